# isolab's cassandra-latte client, on the host: cassandra-stress's schema with cqlsh,
# KEYS partitions written with `latte load` (unmeasured), then `latte run` of the
# mixed workload, whose JSON report isolab reads (cassandra-latte/latte.json).
# Arguments: host, CQL port, operations, concurrency, write share in percent, keys,
# rate (operations a second).
set -e
host=$1
port=$2
ops=$3
concurrency=$4
writes=$5
keys=$6
rate=$7
dir=@workdir@/cassandra-latte
cqlsh=${ISOLAB_CQLSH:-/opt/isolab/cqlsh/bin/cqlsh}
latte=${ISOLAB_LATTE:-latte}
if [ ! -x "$cqlsh" ]; then
    echo "cassandra-latte: no cqlsh at $cqlsh: install it with scripts/setup.sh (python3 -m venv /opt/isolab/cqlsh && /opt/isolab/cqlsh/bin/pip install cqlsh==6.2.2)" >&2
    exit 1
fi
if ! command -v "$latte" >/dev/null 2>&1; then
    echo "cassandra-latte: no latte: install it with scripts/setup.sh (cargo install latte-cli --version 0.29.0 --locked)" >&2
    exit 1
fi
"$cqlsh" --request-timeout=60 "$host" "$port" -f "$dir/schema.cql"
reads=$((100 - writes))
cd "$dir"
"$latte" load --quiet --threads 1 --concurrency 32 -P "keys=$keys" mixed.rn "$host:$port" >load.log
exec "$latte" run --quiet --threads 1 --concurrency "$concurrency" --connections 1 --rate "$rate" \
    --warmup 0 --duration "$ops" -P "keys=$keys" \
    --functions "read:$reads,write:$writes" \
    --output "$dir/latte.json" mixed.rn "$host:$port"
