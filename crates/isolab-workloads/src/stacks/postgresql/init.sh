# isolab service stack `postgresql`, component `db`, prepare: a new cluster in
# @workdir@/db/data, owned by the `postgres` user (PostgreSQL refuses to run as root).
set -eu
db='@workdir@/db'
mkdir -p "$db/data"
chown -R postgres:postgres "$db"
if ! setpriv --reuid=postgres --regid=postgres --clear-groups test -x "$db"; then
    echo "the postgres user cannot reach $db: make every parent directory of the working directory searchable by others (chmod o+x)" >&2
    exit 1
fi
exec setpriv --reuid=postgres --regid=postgres --clear-groups \
    /usr/lib/postgresql/15/bin/initdb --pgdata="$db/data" --auth=trust --username=postgres \
    --encoding=UTF8 --locale=C.UTF-8 --no-sync --no-instructions
