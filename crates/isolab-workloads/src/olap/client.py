# isolab's OLAP client (on the host, outside the platform's limits): every query of
# the benchmark in order over one connection to database `olap`, each timed as the
# client sees it (execute and fetch every row) and given the database's own cpu time
# during it, read from the database's cgroup before and after (cpuacct.usage in
# nanoseconds on cgroup v1, usage_usec of cpu.stat on v2). Prints isolab's `json`
# metrics: qNN_time and qNN_db_cpu_time per query, and total_time.
# A query that fails fails the run with the database's message.
# Usage: python3 client.py HOST PORT QUERIES_DIR CPU_USAGE_FILE
import json
import os
import sys
import time

import psycopg2

host, port, queries, usage_file = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]


def cpu_seconds():
    """The database cgroup's cpu time so far, or None when it cannot be read."""
    if not usage_file:
        return None
    try:
        with open(usage_file) as f:
            text = f.read()
    except OSError:
        return None
    if usage_file.endswith("cpu.stat"):
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "usage_usec":
                return int(value) / 1e6
        return None
    return int(text) / 1e9


conn = psycopg2.connect(host=host, port=port, user="postgres", dbname="olap")
conn.autocommit = True
cur = conn.cursor()
metrics = []
total = 0.0
for name in sorted(os.listdir(queries)):
    if not name.endswith(".sql"):
        continue
    query = "q" + name[:-4]
    with open(os.path.join(queries, name)) as f:
        text = f.read()
    before = cpu_seconds()
    start = time.perf_counter()
    try:
        cur.execute(text)
        got = len(cur.fetchall()) if cur.description else 0
    except psycopg2.Error as e:
        print(f"{query} ({name}) failed: {(e.pgerror or str(e)).strip()}", file=sys.stderr)
        sys.exit(1)
    elapsed = time.perf_counter() - start
    after = cpu_seconds()
    total += elapsed
    print(f"{query}: {got} rows in {elapsed:.3f} s", file=sys.stderr)
    metrics.append({"name": f"{query}_time", "unit": "s", "direction": "lower", "value": elapsed})
    if before is not None and after is not None:
        metrics.append({"name": f"{query}_db_cpu_time", "unit": "s", "direction": "lower", "value": after - before})
metrics.append({"name": "total_time", "unit": "s", "direction": "lower", "value": total})
print(json.dumps({"metrics": metrics}))
