#!/usr/bin/env bash
# Start-to-exit latency of `true` in a container: isolab-runtime against runc and crun
# on the same busybox root (as one OCI bundle), N runs each after a warm-up,
# interleaved so that drift hits all three alike. Prints medians and ratios.
# Usage: sudo scripts/bench-runtime.sh [N]   (default N=100)
set -euo pipefail
N=${1:-100}
cd "$(dirname "$0")/.."
cargo build --release --locked -q -p isolab -p isolab-runtime
ISOLAB=target/release/isolab RT=target/release/isolab-runtime
tmp=$(mktemp -d)
cleanup() {
    runc delete -f bench-runc >/dev/null 2>&1 || true
    crun delete -f bench-crun >/dev/null 2>&1 || true
    # runc and crun leave the bundle's cgroupsPath parent (isolab) in every hierarchy.
    for d in /sys/fs/cgroup/*/isolab; do rmdir "$d" 2>/dev/null || true; done
    rm -rf "$tmp"
}
trap cleanup EXIT
"$ISOLAB" image build busybox "$tmp/root" >/dev/null
"$RT" spec --id bench "$tmp/root" -- /bin/true > "$tmp/config.json"
mkdir -p "$tmp/bundle" && cp "$tmp/config.json" "$tmp/bundle/config.json"
python3 - "$tmp/bundle/config.json" "$tmp/root" <<'PY'
import json, sys
p, root = sys.argv[1], sys.argv[2]
c = json.load(open(p)); c["root"]["path"] = root; c["root"]["readonly"] = True
c["process"]["terminal"] = False
json.dump(c, open(p, "w"))
PY
python3 - "$N" "$RT" "$tmp" <<'PY'
import statistics, subprocess, sys, time
n, rt, tmp = int(sys.argv[1]), sys.argv[2], sys.argv[3]
cmds = {
    "isolab-runtime": [rt, "run", "--id", "bench-iso", "--readonly", f"{tmp}/root", "--", "/bin/true"],
    "runc": ["runc", "run", "--bundle", f"{tmp}/bundle", "bench-runc"],
    "crun": ["crun", "run", "--bundle", f"{tmp}/bundle", "bench-crun"],
}
times = {k: [] for k in cmds}
usable = {}
for k, c in cmds.items():  # warm-up, and find out which engines work here
    r = subprocess.run(c, capture_output=True)
    usable[k] = r.returncode == 0
    if not usable[k]:
        print(f"{k}: unusable here ({r.stderr.decode().strip()[:160]})")
for _ in range(n):
    for k, c in cmds.items():
        if usable[k]:
            t = time.perf_counter(); subprocess.run(c, capture_output=True, check=True); times[k].append(time.perf_counter() - t)
med = {k: statistics.median(v) for k, v in times.items() if v}
for k, m in med.items():
    q = statistics.quantiles(times[k], n=20)
    print(f"{k:15s} median {m*1e3:7.2f} ms  p5 {q[0]*1e3:7.2f}  p95 {q[-1]*1e3:7.2f}  (n={len(times[k])})")
for peer in ("crun", "runc"):
    if peer in med and "isolab-runtime" in med:
        print(f"isolab-runtime / {peer}: {med['isolab-runtime']/med[peer]:.2f}")
PY
