# isolab service stack `mariadb`, component `db`: the server in the foreground,
# with the options sized from the cell.
exec mariadbd --defaults-file='@workdir@/db/my.cnf' \
    --innodb-buffer-pool-size=$(( @memory_mib@ / 4 ))M \
    --max-connections=$(( @threads@ + 10 ))
