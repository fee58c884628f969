# isolab service stack `postgresql`, component `db`: the server in the foreground
# as the `postgres` user, with the settings sized from the cell.
exec setpriv --reuid=postgres --regid=postgres --clear-groups \
    /usr/lib/postgresql/15/bin/postgres -D '@workdir@/db/data' \
    -c config_file='@workdir@/db/postgresql.conf' \
    -c shared_buffers=$(( @memory_mib@ / 4 ))MB \
    -c max_connections=$(( @threads@ + 10 ))
