# isolab's OLAP data load (in the platform, unmeasured): database `olap` from the
# generated data set in @workdir@/@asset@: its tables, the data, the keys, statistics.
set -eu
set -- --host="$1" --port="$2" --username=postgres
dir='@workdir@/@asset@'
createdb "$@" olap
psql "$@" --dbname=olap --no-psqlrc --quiet --set=ON_ERROR_STOP=1 --file="$dir/schema.sql"
for f in "$dir"/data/*.csv; do
    t=$(basename "$f" .csv)
    psql "$@" --dbname=olap --no-psqlrc --quiet --set=ON_ERROR_STOP=1 \
        --command="\copy $t FROM '$f' (FORMAT csv, DELIMITER '|')"
done
psql "$@" --dbname=olap --no-psqlrc --quiet --set=ON_ERROR_STOP=1 --file="$dir/keys.sql"
psql "$@" --dbname=olap --no-psqlrc --quiet --set=ON_ERROR_STOP=1 --command='VACUUM ANALYZE'
cp "$dir/dataset.json" '@workdir@/data-set.json'
