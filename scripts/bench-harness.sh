#!/usr/bin/env bash
# Harness cost per run: `true` run N times through isolab (cgroup created, limited,
# read back and removed; perf counters; host sampler; one SQLite transaction per
# run) against spawning `true` N times directly, measured side by side in one go.
# Usage: sudo scripts/bench-harness.sh [N]   (default N=200)
set -euo pipefail
N=${1:-200}
cd "$(dirname "$0")/.."
cargo build --release --locked -q -p isolab
BIN=target/release/isolab
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/harness.toml" <<SPEC
[experiment]
name = "harness-cost"
repetitions = { warmup = 0, min = $N, max = $N, target_cv = 0.05 }
duration = "1s"

[matrix]
placement = ["shared"]
workload = ["true"]

[workload.true]
command = "true"
parser = "time"
SPEC

now() { date +%s%N; }
# Direct spawns first and last, so that drift shows up as a difference between the two.
t0=$(now); for _ in $(seq "$N"); do /bin/true; done; t1=$(now)
"$BIN" --db "$tmp/h.db" run --quiet --no-report --workdir "$tmp/work" "$tmp/harness.toml"
t2=$(now); for _ in $(seq "$N"); do /bin/true; done; t3=$(now)
# isolab's own time: from its first to its last stored run, plus one run's length.
wall=$("$BIN" --db "$tmp/h.db" export harness-cost --format json | python3 -c '
import json,sys; rows=json.load(sys.stdin)["observations"]; print(sum(r["value"] for r in rows)/len(rows))')
t4=$(now)
"$BIN" --db "$tmp/h2.db" run --quiet --no-report --workdir "$tmp/work" "$tmp/harness.toml"
t5=$(now)
python3 - "$N" "$t0" "$t1" "$t2" "$t3" "$t4" "$t5" "$wall" <<'PY'
import sys
n = int(sys.argv[1]); t = [int(x) for x in sys.argv[2:8]]; wall = float(sys.argv[8])
direct = ((t[1]-t[0]) + (t[3]-t[2])) / 2 / n / 1e6
isolab = (t[5]-t[4]) / n / 1e6
print(f"runs per side:                 {n}")
print(f"direct spawn of true:          {direct:8.3f} ms/run")
print(f"isolab run of true (total):    {isolab:8.3f} ms/run  (process start, spec, preflight and store included)")
print(f"  measured wall of true inside: {wall*1e3:8.3f} ms/run")
print(f"harness cost per run:          {isolab-direct:8.3f} ms  (ratio isolab/direct {isolab/direct:.1f}x)")
PY
