#!/usr/bin/env bash
# Harness cost per run, beside the peer's: `true` run N times through hyperfine (-N, no
# shell) and through `isolab run` on the host platform (cgroup made, limited, read back
# and removed; perf counters; host sampler; the run stored), in ROUNDS rounds that visit
# hyperfine and every isolab build given in a shuffled order each.
#
# Usage: sudo scripts/bench-harness.sh [N] [ROUNDS] [ISOLAB...]
#   N       runs of `true` per measurement (default 200)
#   ROUNDS  rounds (default 3)
#   ISOLAB  isolab binaries to compare (default: target/release/isolab, built first);
#           e.g. an old build and a new one: the rounds alternate them.
#
# Per build and round it prints the wall time per run of the whole `isolab run`
# (process start, spec, preflight and environment capture included), the period per run
# between its first and its last stored run (what every further run costs), and the
# same for hyperfine: its mean, and the wall time of the whole invocation per run. The
# harness cost is isolab's period per run minus hyperfine's mean.
#
# Then where the time goes: each build runs N runs once more with ISOLAB_PHASES set (the
# runner's marks, crates/isolab-lab/src/phases.rs), and the median time of each step of a
# run is printed, a column per build (a build without the marks prints none). The first
# tenth of the runs (cold caches) is left out; a step passed more than once in a run (a
# server's or a neighbour's start) counts with the sum of its times.
set -euo pipefail
N=${1:-200}
ROUNDS=${2:-3}
shift $(( $# > 2 ? 2 : $# ))
cd "$(dirname "$0")/.."
BINS=("$@")
if [[ ${#BINS[@]} -eq 0 ]]; then
    cargo build --release --locked -q -p isolab
    BINS=(target/release/isolab)
fi
command -v hyperfine >/dev/null || { echo "bench-harness: hyperfine is not installed (apt-get install hyperfine, or scripts/setup.sh test)" >&2; exit 1; }
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
results=$tmp/results.tsv
: > "$results"
for round in $(seq "$ROUNDS"); do
    # hyperfine is index -1; builds are 0..n-1; the order of the round is shuffled.
    mapfile -t order < <( (echo -1; seq 0 $(( ${#BINS[@]} - 1 ))) | shuf )
    for i in "${order[@]}"; do
        if [[ $i == -1 ]]; then
            t0=$(now)
            hyperfine -N --runs "$N" --warmup 3 --style none --export-json "$tmp/hf.json" true >/dev/null
            t1=$(now)
            mean=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["results"][0]["mean"])' "$tmp/hf.json")
            printf 'hyperfine\t%s\t%s\t%s\n' "$round" "$(( (t1 - t0) / N ))" "$mean" >> "$results"
        else
            bin=${BINS[$i]}
            rm -rf "$tmp/h.db"* "$tmp/work"
            t0=$(now)
            "$bin" --db "$tmp/h.db" run --quiet --no-report --workdir "$tmp/work" "$tmp/harness.toml"
            t1=$(now)
            # From the first stored run's start to the last one's end, per run.
            period=$(python3 - "$tmp/h.db" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
first, last, n = c.execute("select min(started_at_ms), max(started_at_ms + wall_ns / 1000000.0), count(*) from runs").fetchone()
print((last - first) / 1000 / n)
PY
)
            printf '%s\t%s\t%s\t%s\n' "$bin" "$round" "$(( (t1 - t0) / N ))" "$period" >> "$results"
        fi
    done
done
python3 - "$N" "$results" <<'PY'
import sys
n = int(sys.argv[1])
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[2])]
print(f"{n} runs of `true` per measurement; ms per run (wall of the whole command / N; isolab's period between its first and last run / N; hyperfine's mean)")
print(f"{'what':<40} {'round':>5} {'whole/N':>9} {'period':>9}")
hf = {}
for what, rnd, whole_ns, x in rows:
    whole = int(whole_ns) / 1e6
    per = float(x) * 1e3
    print(f"{what:<40} {rnd:>5} {whole:9.3f} {per:9.3f}")
    if what == "hyperfine":
        hf[rnd] = per
print()
for what in dict.fromkeys(r[0] for r in rows if r[0] != "hyperfine"):
    costs = [float(x) * 1e3 - hf[rnd] for w, rnd, _, x in rows if w == what]
    print(f"harness cost per run of {what}: " + ", ".join(f"{c:.3f}" for c in costs) + " ms above hyperfine's mean")
PY
echo
for i in "${!BINS[@]}"; do
    rm -rf "$tmp/h.db"* "$tmp/work"
    ISOLAB_PHASES="$tmp/phases-$i.tsv" "${BINS[$i]}" --db "$tmp/h.db" run --quiet --no-report \
        --workdir "$tmp/work" "$tmp/harness.toml"
done
python3 - "$tmp" "${BINS[@]}" <<'PY'
import os, statistics, sys
tmp, bins = sys.argv[1], sys.argv[2:]
steps, medians = [], []
for i, _ in enumerate(bins):
    runs, run = [], []
    path = os.path.join(tmp, f"phases-{i}.tsv")
    for line in open(path) if os.path.exists(path) else []:
        step, micros = line.split("\t")
        run.append((step, int(micros)))
        if step == "end":
            runs.append(run)
            run = []
    runs = runs[len(runs) // 10:]
    took = {}
    for run in runs:
        before, this = 0, {}
        for step, at in run:
            this[step] = this.get(step, 0) + at - before
            before = at
            if step not in steps:
                steps.append(step)
        for step, micros in this.items():
            took.setdefault(step, []).append(micros)
    medians.append({s: statistics.median(v) for s, v in took.items()})
print("median µs a run spends in each step (ISOLAB_PHASES), a column per build:")
print(f"{'step':<16}" + "".join(f" {os.path.basename(b)[-14:]:>14}" for b in bins))
for step in steps + ["total"]:
    cells = []
    for m in medians:
        v = sum(m.values()) if step == "total" and m else m.get(step)
        cells.append(f" {v:>14.0f}" if v is not None else f" {'-':>14}")
    print(f"{step:<16}" + "".join(cells))
PY
