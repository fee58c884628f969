# isolab sysbench OLTP, data load (in the platform, unmeasured): one table
# `sbtest1` filled by the script's own `prepare` with a fixed random seed
# (deterministic rows), sized from the shape's memory: a row is about 250 bytes
# with its indexes; the data set is about an eighth of the memory. The size is
# written to @workdir@/sysbench/table-size (read by the wrapper for prepare and
# run) and stated in @workdir@/data-set.json, which isolab stores with the run.
set -eu
rows=$(( @memory_mib@ * 524 ))
[ "$rows" -ge 1000 ] || rows=1000
echo "$rows" > '@workdir@/sysbench/table-size'
sysbench '@workdir@/sysbench/oltp.lua' "$@" --tables=1 --threads=1 --rand-seed=1 prepare >&2
printf '{"tool": "sysbench", "tables": 1, "rows": %d, "memory_mib": %d}\n' "$rows" @memory_mib@ \
    > '@workdir@/data-set.json'
