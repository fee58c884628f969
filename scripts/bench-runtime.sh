#!/usr/bin/env bash
# Start-to-exit latency of `true` in a container: isolab-runtime against runc and crun
# on the same busybox root (as one OCI bundle), N runs each after a warm-up,
# interleaved in a shuffled order every round (medians by predecessor printed), with
# isolab-runtime also run with its seccomp cache cleared before each start (as runc and
# crun, which compile their filter every time). Prints median, p5, p95, the
# ratios isolab-runtime/crun and isolab-runtime/runc, then (separately) our bridge
# network against their bare network namespace with N/4 runs, and isolab-runtime's
# phase breakdown (from --trace) for both. The measuring is in bench_runtime.py.
#
# Host changes, all undone on exit (also on Ctrl-C or failure) and printed:
# - crun refuses a hybrid cgroup host whose cgroup2 mount (/sys/fs/cgroup/unified)
#   still lists controllers: scripts/lib/hybrid-cgroup.sh mounts a v1 hierarchy for
#   each such controller (here: hugetlb) and gives it back to cgroup2 afterwards
#   (the same fix as scripts/oci-validation.sh).
# - the bridge isolab0 (with its NAT rule and IPAM state) outlives containers like
#   docker0; if this run created it, it is removed at the end.
# - runc and crun leave the bundle's cgroupsPath parent (isolab) in every hierarchy.
# Usage: sudo scripts/bench-runtime.sh [N]   (default N=100)
#        NO_BUILD=1 to measure the binaries already in target/release.
set -euo pipefail
N=${1:-100}
[[ $N =~ ^[0-9]+$ && $N -ge 20 ]] || { echo "N must be a number >= 20" >&2; exit 2; }
[[ $(id -u) -eq 0 ]] || { echo "run as root (sudo $0 $N)" >&2; exit 2; }
cd "$(dirname "$0")/.."
if [[ ${NO_BUILD:-0} == 1 ]]; then
    echo "NO_BUILD=1: measuring the existing target/release binaries (not rebuilt)"
else
    cargo build --release --locked -q -p isolab -p isolab-runtime
fi
ISOLAB=$PWD/target/release/isolab RT=$PWD/target/release/isolab-runtime
RUNC=$(command -v runc || echo -) CRUN=$(command -v crun || echo -)
CG=/sys/fs/cgroup BRIDGE=isolab0 CNI_STATE=/run/isolab/cni
SFX=$$

# shellcheck source=lib/hybrid-cgroup.sh
source scripts/lib/hybrid-cgroup.sh
tmp=$(mktemp -d)
bridge_existed=0 fwd_before=$(cat /proc/sys/net/ipv4/ip_forward)
ip link show "$BRIDGE" >/dev/null 2>&1 && bridge_existed=1
ipt_before=$(iptables-save 2>/dev/null | grep -E '^-' || true)

cleanup() {
    local rc=$? d c
    trap - EXIT INT TERM
    set +e
    echo
    echo "== cleanup =="
    [[ $RUNC != - ]] && for c in bench-runc-$SFX; do "$RUNC" delete -f "$c" >/dev/null 2>&1; done
    [[ $CRUN != - ]] && for c in bench-crun-$SFX; do "$CRUN" delete -f "$c" >/dev/null 2>&1; done
    "$RT" gc >/dev/null 2>&1
    # The cold-seccomp runtime's state directory (bench_runtime.py).
    [[ -d /run/isolab-bench-cold-$SFX ]] && "$RT" gc --root "/run/isolab-bench-cold-$SFX" >/dev/null 2>&1
    rm -rf "/run/isolab-bench-cold-$SFX"
    # Leftover `isolab` cgroup parents (leaves first; rmdir only removes empty cgroups).
    for d in "$CG"/*/isolab; do
        [[ -d $d ]] || continue
        find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null
        [[ -d $d ]] && echo "  kept $d (not empty: in use)" || echo "  removed cgroup $d"
    done
    hybrid_cgroup_undo
    if [[ $bridge_existed -eq 0 ]] && ip link show "$BRIDGE" >/dev/null 2>&1; then
        # What isolab_runtime::network::remove_bridge does, unless a container holds an address.
        local leases
        leases=$(find "$CNI_STATE/ipam/$BRIDGE" -maxdepth 1 -type f \
            ! -name lock ! -name 'last_reserved_ip*' 2>/dev/null | wc -l)
        if [[ $leases -gt 0 ]]; then
            echo "  kept bridge $BRIDGE: $leases address(es) still leased"
        else
            local subnet
            subnet=$(iptables -t nat -S POSTROUTING | sed -n \
                "s/^-A POSTROUTING -s \([0-9./]*\) ! -o $BRIDGE .*isolab masquerade $BRIDGE.*/\1/p" | head -1)
            [[ -n $subnet ]] && iptables -t nat -D POSTROUTING -s "$subnet" ! -o "$BRIDGE" \
                -m comment --comment "isolab masquerade $BRIDGE" -j MASQUERADE &&
                echo "  removed iptables masquerade rule for $subnet on $BRIDGE"
            ip link del "$BRIDGE" && echo "  removed bridge $BRIDGE (created by this run)"
            rm -rf "$CNI_STATE/ipam/$BRIDGE" "$CNI_STATE/attachments/$BRIDGE" "$CNI_STATE/$BRIDGE.lock"
        fi
    fi
    if [[ $(cat /proc/sys/net/ipv4/ip_forward) != "$fwd_before" ]]; then
        echo "$fwd_before" > /proc/sys/net/ipv4/ip_forward &&
            echo "  restored net.ipv4.ip_forward=$fwd_before (the CNI bridge plugin sets 1)"
    fi
    local ipt_after
    ipt_after=$(iptables-save 2>/dev/null | grep -E '^-' || true)
    if [[ $ipt_after != "$ipt_before" ]]; then
        echo "  WARNING: iptables differ from before the run:"
        diff <(echo "$ipt_before") <(echo "$ipt_after") | sed 's/^/    /'
    fi
    rm -rf "$tmp"
    echo "  removed $tmp"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# crun on a hybrid host: give every controller still on the cgroup2 mount a v1 hierarchy.
if [[ $CRUN != - ]]; then
    hybrid_cgroup_apply || echo "could not mount a v1 hierarchy: crun will likely refuse this host"
fi

"$ISOLAB" image build busybox "$tmp/root" >/dev/null
mkdir -p "$tmp/bundle"
"$RT" spec --id bench "$tmp/root" -- /bin/true > "$tmp/bundle/config.json"
python3 - "$tmp/bundle/config.json" "$tmp/root" <<'PY'
import json, sys
p, root = sys.argv[1], sys.argv[2]
c = json.load(open(p)); c["root"]["path"] = root; c["root"]["readonly"] = True
c["process"]["terminal"] = False
json.dump(c, open(p, "w"))
PY

echo "== versions =="
echo "  kernel         $(uname -r) ($(nproc) cpus, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs))"
echo "  isolab-runtime $("$RT" --version | head -1)"
[[ $RUNC != - ]] && echo "  runc           $("$RUNC" --version | head -1)" || echo "  runc           not installed"
[[ $CRUN != - ]] && echo "  crun           $("$CRUN" --version | head -1)" || echo "  crun           not installed"
echo "  root           busybox (isolab image build busybox), read-only, command /bin/true"
echo "  bundle         $RT spec (isolab-runtime's defaults: caps, seccomp, masked paths, devices), one config.json for all;"
echo "                 the headline runs isolab-runtime on it too (run --bundle), as runc and crun"
echo "  timing         wall clock around each runtime process (python perf_counter), stdout/stderr to pipes"
echo "  --trace        on for isolab-runtime: the phases are always recorded, --trace only prints one JSON line"

python3 scripts/bench_runtime.py "$N" "$RT" "$tmp/root" "$tmp/bundle" "$RUNC" "$CRUN" "$SFX"
