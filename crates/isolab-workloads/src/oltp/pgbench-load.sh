# isolab pgbench-oltp, data load (in the platform, unmeasured): database `bench`
# filled by `pgbench -i` (deterministic rows) at a scale sized from the shape's
# memory: one scale unit is 100 000 accounts, about 15 MiB with its indexes; the
# data set is about an eighth of the memory, at least scale 1. Its size is
# stated in @workdir@/data-set.json, which isolab stores with the run.
set -eu
host="$1" port="$2"
scale=$(( @memory_mib@ / 120 ))
[ "$scale" -ge 1 ] || scale=1
createdb --host="$host" --port="$port" --username=postgres bench
pgbench --host="$host" --port="$port" --username=postgres --initialize --quiet --scale="$scale" bench
bytes=$(psql --host="$host" --port="$port" --username=postgres --no-psqlrc --tuples-only --no-align \
    --command="SELECT pg_database_size('bench')" bench)
printf '{"tool": "pgbench", "scale": %d, "accounts": %d, "bytes": %d, "memory_mib": %d}\n' \
    "$scale" $(( scale * 100000 )) "$bytes" @memory_mib@ > '@workdir@/data-set.json'
