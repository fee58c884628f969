#!/usr/bin/env bash
# Run the OCI runtime-tools validation suite against an OCI runtime binary and report
# pass/fail/skip per validation program (one TSV row each, plus a summary table).
#
# What the suite needs (read from validation/util/test.go at the pinned version):
# - RUNTIME=<runtime binary> in the environment (util.RuntimeCommand);
# - the current directory holds `runtimetest` (copied into every bundle and run there
#   as the container process: `/runtimetest --path=/`) and `rootfs-$GOARCH.tar.gz`
#   (util.PrepareBundle untars it into a fresh bundle made by os.MkdirTemp, i.e. under
#   $TMPDIR; the bundle directory itself is the root: root.path ".").
# So we build every validation/* program and cmd/runtimetest once into a cache, make
# a work directory with runtimetest and a busybox rootfs tarball, point TMPDIR into it
# (so every bundle the suite leaves behind is ours to remove) and run the programs one
# at a time, each with a time limit. Each program prints TAP on stdout; we parse that
# (scripts/lib/oci_tap.py) into: program passed failed skipped status reason.
#
# Host changes, all undone on exit (also on Ctrl-C or failure) and printed:
# - crun refuses a hybrid cgroup host whose cgroup2 mount still lists controllers:
#   scripts/lib/hybrid-cgroup.sh mounts a v1 hierarchy per such controller (here:
#   hugetlb). Applied for every runtime so that all are measured on the same host
#   (--no-hybrid-fix to skip it).
# - The suite leaves containers (random UUID ids), cgroups (testdir/cgrouptest, or
#   container ids), mounts under its bundles and bundle directories when a program
#   fails half-way (util.Fatal exits without its deferred cleanup). After every
#   program we `RUNTIME delete -f` the new UUID-named containers, kill processes of
#   this run (by the marker in their environment or a root under the work directory),
#   unmount what is mounted under the work directory and remove the cgroups that
#   appeared during the run and carry a suite name (others are reported, not touched:
#   this host may be shared).
#
# Pinned suite version: runtime-tools has no release since v0.9.0 (2019), which does
# not build in module mode against the dependencies it resolves today (runtime-spec
# and selinux API changes). The proxy cannot resolve @master (403), so we pin the
# newest pseudo-version it lists (`go list -m -versions` shows only tags; the proxy's
# @v/list has it): master of 2025-11-14, runtime-spec v1.3.0. Its configs say
# ociVersion 1.3.0, which crun 1.8.1 (Debian bookworm) refuses ("unknown version
# specified"; it takes up to 1.1.x): to test such a runtime on its own terms, use
# --suite-version v0.9.1-0.20221107090550-2e043c6bd626 (master of 2022-11-07,
# runtime-spec 1.0.2-dev), which the proxy also serves and which builds.
#
# Go: the newest toolchain scripts/lib/go.sh finds (or $ISOLAB_GO). The pinned master needs
# Go 1.21 (its github.com/moby/sys/capability v0.4.0 imports `slices`); with an older Go
# (Debian bookworm's golang-go is 1.19) the default is master of 2025-03-03
# (v0.9.1-0.20250303011046-260e151b8552, runtime-spec v1.1.0), the last before that
# dependency, which Go 1.19 builds.
set -euo pipefail

# The whole script is one { ... } block, which bash reads in full before running it:
# editing this file while a run is going does not derail that run.
{
RT_MODULE=github.com/opencontainers/runtime-tools
RT_VERSION_NEW=v0.9.1-0.20251114084447-edf4cb3d2116  # Go >= 1.21
RT_VERSION_GO119=v0.9.1-0.20250303011046-260e151b8552  # older Go
RT_VERSION=${OCI_VALIDATION_VERSION:-}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LIB=$REPO/scripts/lib
UUID_RE='^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'

usage() {
    cat <<EOF
Usage: sudo scripts/oci-validation.sh RUNTIME [options]

Run the OCI runtime-tools validation suite ($RT_MODULE)
against the OCI runtime RUNTIME (a path or a name on PATH: runc, crun,
target/debug/isolab-runtime, ...), one validation program at a time.

Options:
  --only NAME,...      run only these validation programs (e.g. create,state,kill)
  --out FILE.tsv       where to write the results (default:
                       /tmp/oci-validation/<runtime name>.tsv); each program's stdout,
                       stderr and exit status are kept in FILE.logs/
  --timeout SECONDS    time limit per program (default 60)
  --suite-version V    runtime-tools module version (default $RT_VERSION_NEW
                       with Go >= 1.21, else $RT_VERSION_GO119;
                       also \$OCI_VALIDATION_VERSION). v0.9.1-0.20221107090550-2e043c6bd626
                       writes ociVersion 1.0.2-dev, for runtimes that refuse 1.3.0
  --cache-dir DIR      build cache (default /var/cache/isolab/runtime-tools, or
                       \$OCI_VALIDATION_CACHE); binaries go to DIR/<version>_<go version>_<os-arch>/
  --state-dir DIR      the runtime's state directory, to find containers the suite
                       left (default: /run/<runtime name> if it exists); \`RUNTIME list -q\`
                       (or \`RUNTIME list\`) is asked too
  --rootfs KIND        isolab (default): busybox from \`isolab image build busybox\`;
                       suite: the rootfs tarball shipped in the runtime-tools module
  --no-hybrid-fix      do not mount v1 hierarchies for the controllers cgroup2 lists
  --build-only         build (or find) the cached suite and exit
  -h, --help           this text

Output: a TSV (header, then one row per program: program passed failed skipped
status reason; status is pass, fail, skip, crash or timeout, see scripts/lib/oci_tap.py),
a summary table and totals. Exit status: 0 when the suite ran (whatever it found),
1 on a harness error or when the final check finds something of the run left behind,
2 on bad usage; 130/143 when interrupted (the host is cleaned up all the same).
EOF
}

# ---- arguments -------------------------------------------------------------------
RUNTIME_ARG="" ONLY="" OUT="" TIMEOUT=60 STATE_DIR="" ROOTFS_KIND=isolab
HYBRID_FIX=1 BUILD_ONLY=0
CACHE_ROOT=${OCI_VALIDATION_CACHE:-/var/cache/isolab/runtime-tools}
die_usage() { echo "oci-validation: $*" >&2; echo "try --help" >&2; exit 2; }
while [[ $# -gt 0 ]]; do
    case $1 in
        -h|--help) usage; exit 0 ;;
        --only) [[ $# -ge 2 ]] || die_usage "--only needs a value"; ONLY=$2; shift 2 ;;
        --out) [[ $# -ge 2 ]] || die_usage "--out needs a value"; OUT=$2; shift 2 ;;
        --timeout) [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || die_usage "--timeout needs seconds"; TIMEOUT=$2; shift 2 ;;
        --suite-version) [[ ${2:-} == v* ]] || die_usage "--suite-version needs a module version (v...)"
                         RT_VERSION=$2; shift 2 ;;
        --cache-dir) [[ $# -ge 2 ]] || die_usage "--cache-dir needs a value"; CACHE_ROOT=$2; shift 2 ;;
        --state-dir) [[ $# -ge 2 ]] || die_usage "--state-dir needs a value"; STATE_DIR=$2; shift 2 ;;
        --rootfs) [[ ${2:-} == isolab || ${2:-} == suite ]] || die_usage "--rootfs is isolab or suite"
                  ROOTFS_KIND=$2; shift 2 ;;
        --no-hybrid-fix) HYBRID_FIX=0; shift ;;
        --build-only) BUILD_ONLY=1; shift ;;
        -*) die_usage "unknown option $1" ;;
        *) [[ -z $RUNTIME_ARG ]] || die_usage "one RUNTIME only ($RUNTIME_ARG, $1)"; RUNTIME_ARG=$1; shift ;;
    esac
done
[[ $BUILD_ONLY -eq 1 || -n $RUNTIME_ARG ]] || die_usage "RUNTIME missing"
# A run creates containers; a build writes the root-owned cache. A --build-only that finds
# the suite built needs neither (checked below, before the cache is locked).
[[ $(id -u) -eq 0 || $BUILD_ONLY -eq 1 ]] || { echo "oci-validation: run as root (the suite creates containers)" >&2; exit 2; }
# shellcheck source=SCRIPTDIR/lib/go.sh
source "$LIB/go.sh"
GO=$(isolab_go) || { echo "oci-validation: no Go toolchain (scripts/setup.sh installs Debian's golang-go)" >&2; exit 1; }
PATH="$(dirname "$GO"):$PATH"
export PATH
if [[ -z $RT_VERSION ]]; then
    if version_at_least "$(go_version "$GO")" 1.21; then RT_VERSION=$RT_VERSION_NEW; else RT_VERSION=$RT_VERSION_GO119; fi
fi
for tool in go python3 tar timeout findmnt; do
    command -v "$tool" >/dev/null || { echo "oci-validation: $tool not found" >&2; exit 1; }
done

# ---- build (cached) ----------------------------------------------------------------
GOARCH=$(go env GOARCH) GOOS=$(go env GOOS) GOVERSION=$(go env GOVERSION)
KEY=${RT_VERSION}_${GOVERSION}_${GOOS}-${GOARCH}
SUITE=$CACHE_ROOT/$KEY
if [[ $(id -u) -ne 0 ]]; then
    [[ -f $SUITE/BUILDINFO && -x $SUITE/bin/runtimetest ]] ||
        { echo "oci-validation: $SUITE is not built: run as root to build it" >&2; exit 2; }
    echo "runtime-tools: $SUITE (cache hit, nothing built)"
    exit 0
fi
mkdir -p "$CACHE_ROOT"

elapsed() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }

# The throwaway Go world of one build: GOPATH, module cache and build cache live in
# $1 and are deleted afterwards; only the binaries and a record stay in $SUITE.
# A subshell, so that the Go environment stays in it.
build_suite() (
    local build=$1 stage=$2 t0=$EPOCHREALTIME pkgs src
    export GOPATH=$build/gopath GOMODCACHE=$build/gopath/pkg/mod GOCACHE=$build/gocache
    export GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0  # static: runtimetest runs in busybox
    mkdir -p "$build/mod" "$stage/bin"
    cd "$build/mod"
    # A wrapper module that requires the suite: dependencies resolve from runtime-tools'
    # own go.mod (its vendor/ is not used), all through the module proxy.
    printf 'module isolab.local/oci-validation\n\ngo 1.21\n\nrequire %s %s\n' \
        "$RT_MODULE" "$RT_VERSION" > go.mod
    go mod download "$RT_MODULE"
    # every main package under validation/ (util is a library), plus runtimetest
    mapfile -t pkgs < <(go list -f '{{if eq .Name "main"}}{{.ImportPath}}{{end}}' "$RT_MODULE/validation/...")
    [[ ${#pkgs[@]} -gt 0 ]] || { echo "no validation programs found" >&2; exit 1; }
    go build -trimpath -ldflags="-s -w" -o "$stage/bin/" "${pkgs[@]}" "$RT_MODULE/cmd/runtimetest"
    printf '%s\n' "${pkgs[@]##*/}" > "$stage/programs"
    cp go.mod go.sum "$stage/"
    # the suite's own rootfs, for --rootfs suite
    src=$(go list -m -f '{{.Dir}}' "$RT_MODULE")
    cp "$src/rootfs-$GOARCH.tar.gz" "$stage/suite-rootfs-$GOARCH.tar.gz"
    {
        echo "module      $RT_MODULE $RT_VERSION"
        echo "sum         $(grep -m1 "^$RT_MODULE $RT_VERSION " go.sum | cut -d' ' -f3)"
        echo "go          $GOVERSION $GOOS/$GOARCH, CGO_ENABLED=0, -trimpath, -ldflags=\"-s -w\""
        echo "built       $(date -u +%FT%TZ) in $(elapsed "$t0") s (download and compile)"
        echo "programs    $(wc -l < "$stage/programs") validation programs + runtimetest"
    } > "$stage/BUILDINFO"
)

remove_tree() {  # Go's module cache is read-only: make it writable, then remove it
    [[ -e $1 ]] || return 0
    chmod -R u+w "$1" 2>/dev/null || true
    rm -rf --one-file-system "$1"
}

# One builder at a time per cache (a second run waits, then finds the result).
exec 9> "$CACHE_ROOT/.lock"
flock 9
if [[ -f $SUITE/BUILDINFO && -x $SUITE/bin/runtimetest ]]; then
    echo "runtime-tools: $SUITE (cache hit, nothing built)"
else
    echo "runtime-tools: $SUITE (cache miss: building $RT_MODULE@$RT_VERSION with $GOVERSION)"
    build=$(mktemp -d "$CACHE_ROOT/.build.XXXXXX") stage=$(mktemp -d "$CACHE_ROOT/.stage.XXXXXX")
    # Called bare (not under if/||) so that errexit holds inside; the trap removes the
    # half-built trees when it fails.
    trap 'remove_tree "$build"; remove_tree "$stage"; echo "oci-validation: build failed" >&2' EXIT
    build_suite "$build" "$stage"
    trap - EXIT
    remove_tree "$build"
    rm -rf "$SUITE" && mv "$stage" "$SUITE" && chmod 755 "$SUITE"
    sed 's/^/  /' "$SUITE/BUILDINFO"
fi
flock -u 9
exec 9>&-
[[ $BUILD_ONLY -eq 1 ]] && exit 0

# ---- the runtime and what to run -----------------------------------------------------
RUNTIME=$(command -v "$RUNTIME_ARG") || { echo "oci-validation: runtime $RUNTIME_ARG not found" >&2; exit 2; }
[[ $RUNTIME == /* ]] || RUNTIME=$PWD/$RUNTIME
RT_NAME=$(basename "$RUNTIME")
[[ -n $STATE_DIR || ! -d /run/$RT_NAME ]] || STATE_DIR=/run/$RT_NAME
OUT=${OUT:-/tmp/oci-validation/$RT_NAME.tsv}
mkdir -p "$(dirname "$OUT")"
OUT=$(cd "$(dirname "$OUT")" && pwd)/$(basename "$OUT")
LOGS=${OUT%.tsv}.logs
mapfile -t ALL < "$SUITE/programs"
if [[ -n $ONLY ]]; then
    IFS=, read -r -a PROGRAMS <<< "$ONLY"
    for p in "${PROGRAMS[@]}"; do
        printf '%s\n' "${ALL[@]}" | grep -qx -- "$p" ||
            die_usage "no validation program '$p' (have: ${ALL[*]})"
    done
else
    PROGRAMS=("${ALL[@]}")
fi

# One run at a time on this host: a run takes every new UUID-named container of the
# runtime and every new testdir/cgrouptest cgroup for its own, and undoes the hybrid
# cgroup fix when it ends, so two at once would clean up under each other.
RUN_LOCK=/run/lock/isolab-oci-validation.lock
exec 8> "$RUN_LOCK"
if ! flock -n 8; then
    echo "waiting for another oci-validation run to finish ($RUN_LOCK)"
    flock 8
fi

# ---- cleanup (runs on every exit) -----------------------------------------------------
# shellcheck source=SCRIPTDIR/lib/hybrid-cgroup.sh
source "$LIB/hybrid-cgroup.sh"
WORK=$(mktemp -d /tmp/oci-validation.XXXXXX)
RUN_MARK=OCI_VALIDATION_RUN=$(basename "$WORK")  # in the environment of all we start
ids_before="" cgroups_before="" SNAPSHOT=0  # SNAPSHOT=1 once the "before" lists exist
LEFT_CONTAINERS=0 LEFT_CGROUPS=0 LEFT_MOUNTS=0 LEFT_PROCS=0

LIST_MODE=none  # how the runtime lists its containers: q (list -q), table (list), none
runtime_ids() {  # container ids the runtime knows (its list, plus its state dir)
    { case $LIST_MODE in
          q) timeout 20 "$RUNTIME" list -q 2>/dev/null || true ;;
          # the first column of runc's table format, header skipped
          table) timeout 20 "$RUNTIME" list 2>/dev/null | awk 'NR > 1 { print $1 }' || true ;;
      esac
      if [[ -n $STATE_DIR && -d $STATE_DIR ]]; then ls -1 "$STATE_DIR"; fi
    } | sort -u
}
cgroup_dirs() {  # every cgroup of every hierarchy, mount points included
    findmnt -rn -t cgroup,cgroup2 -o TARGET | while read -r m; do
        find "$m" -mindepth 1 -type d 2>/dev/null
    done | sort -u
}
our_pids() {  # processes of this run: marker in the environment, or root/cwd in $WORK
    { grep -lzxF "$RUN_MARK" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3
      find /proc -mindepth 2 -maxdepth 2 \( -name root -o -name cwd \) -lname "$WORK/*" \
          2>/dev/null | cut -d/ -f3
    } | sort -un | grep -vx -e "$$" -e "$BASHPID" || true
}
kill_ours() {
    local p
    for p in $(our_pids); do
        echo "    cleanup: killed pid $p ($(tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null | cut -c1-60))"
        kill -9 "$p" 2>/dev/null || true
        LEFT_PROCS=$((LEFT_PROCS + 1))
    done
    return 0
}
# After each program (and at exit): leave the host as the program found it.
sweep() {
    local id p m d new
    [[ $SNAPSHOT -eq 1 ]] || return 0  # without a "before", nothing is known to be ours
    # 1. a validation program still running (the run was interrupted): stop it first,
    #    so that it creates nothing more
    kill_ours
    # 2. containers with a suite-made id (uuid) that were not there before the run
    for id in $(comm -13 <(echo "$ids_before") <(runtime_ids) | grep -E "$UUID_RE" || true); do
        if timeout 20 "$RUNTIME" delete -f "$id" >/dev/null 2>&1 ||
           ! runtime_ids | grep -qx "$id"; then
            echo "    cleanup: deleted container $id"
        else
            echo "    cleanup: WARNING: could not delete container $id"
        fi
        LEFT_CONTAINERS=$((LEFT_CONTAINERS + 1))
    done
    # 3. processes of this run still alive (containers the runtime lost, helpers)
    kill_ours
    # 4. mounts under our work directory, deepest first (lazily if busy)
    for m in $(findmnt -rn -o TARGET | grep "^$WORK/" | awk '{print length, $0}' | sort -rn | cut -d' ' -f2-); do
        umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
        echo "    cleanup: unmounted $m"
        LEFT_MOUNTS=$((LEFT_MOUNTS + 1))
    done
    # 5. new cgroups named like the suite's (cgroups.AbsCgroupPath /testdir/cgrouptest,
    #    RelCgroupPath testdir/cgrouptest) or after a container id; leaves first.
    #    rmdir only removes empty cgroups.
    new=$(comm -13 <(echo "$cgroups_before") <(cgroup_dirs) |
          grep -E '/(testdir|cgrouptest|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})(/|$)' |
          awk '{print length, $0}' | sort -rn | cut -d' ' -f2- || true)
    for d in $new; do
        [[ -d $d ]] || continue
        if rmdir "$d" 2>/dev/null; then
            echo "    cleanup: removed cgroup $d"
            LEFT_CGROUPS=$((LEFT_CGROUPS + 1))
        else
            echo "    cleanup: WARNING: could not remove cgroup $d (in use?)"
        fi
    done
    # 6. bundles (only once nothing is mounted in them: never follow a bind mount)
    if [[ -d $WORK/tmp ]] && ! findmnt -rn -o TARGET | grep -q "^$WORK/"; then
        for d in "$WORK"/tmp/*; do
            [[ -e $d ]] && rm -rf --one-file-system "$d"
        done
    fi
    return 0
}

# shellcheck disable=SC2317  # invoked by the EXIT trap
cleanup() {
    local rc=$? left
    trap - EXIT INT TERM
    set +e
    echo
    echo "== cleanup =="
    sweep
    if [[ $HYBRID_FIX -eq 1 ]] && ! hybrid_cgroup_undo; then
        hybrid_kept=1
    fi
    if findmnt -rn -o TARGET | grep -q "^$WORK/"; then
        echo "  WARNING: mounts left under $WORK, not removing it:"
        findmnt -rn -o TARGET | grep "^$WORK/" | sed 's/^/    /'
    else
        rm -rf --one-file-system "$WORK" && echo "  removed $WORK"
    fi
    # Check with the tools a person would use that nothing of ours is left.
    echo "  left by the suite and removed: $LEFT_CONTAINERS containers, $LEFT_PROCS processes," \
         "$LEFT_MOUNTS mounts, $LEFT_CGROUPS cgroups"
    left=0
    [[ ${hybrid_kept:-0} -eq 1 ]] &&
        { echo "  CHECK findmnt: v1 hierarchies this run mounted are still mounted (see above)"; left=1; }
    findmnt -rn -o TARGET | grep -q "oci-validation\.\|ocitest" &&
        { echo "  CHECK findmnt: mounts left:"; findmnt -rn -o TARGET | grep "oci-validation\.\|ocitest"; left=1; }
    if [[ -n $cgroups_before ]]; then
        new=$(comm -13 <(echo "$cgroups_before") <(cgroup_dirs))
        if [[ -n $new ]]; then
            echo "  CHECK cgroups: new since the start (not ours unless named like the suite's):"
            while read -r d; do echo "    $d"; done <<< "$new"
            grep -qE '/(testdir|cgrouptest)(/|$)' <<< "$new" && left=1
        fi
    fi
    [[ -n $(our_pids) ]] && { echo "  CHECK ps: processes of this run left: $(our_pids)"; left=1; }
    pgrep -f "$WORK" >/dev/null &&
        { echo "  CHECK ps: processes naming $WORK:"; pgrep -af "$WORK"; left=1; }
    if [[ -n ${RUNTIME:-} ]]; then
        new=$(comm -13 <(echo "$ids_before") <(runtime_ids) | grep -E "$UUID_RE")
        [[ -n $new ]] && { echo "  CHECK $RT_NAME list: containers left: $new"; left=1; }
    fi
    if [[ $left -eq 0 ]]; then
        echo "  checked (findmnt, cgroups, ps, ${RT_NAME:-runtime} list): nothing of this run is left"
    elif [[ $rc -eq 0 ]]; then
        rc=1
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---- prepare the work directory --------------------------------------------------------
echo "runtime: $RUNTIME ($("$RUNTIME" --version 2>&1 | head -1))"
echo "work directory: $WORK"
# mktemp made it 0700: open it, or a container with a user namespace (uid mappings)
# cannot reach its bundle ("mount ...: permission denied").
chmod 755 "$WORK"
mkdir -p "$WORK/tmp"
cp "$SUITE/bin/runtimetest" "$WORK/runtimetest"
ROOTFS_TAR=$WORK/rootfs-$GOARCH.tar.gz  # the name util.PrepareBundle untars
if [[ $ROOTFS_KIND == isolab ]]; then
    # isolab beside the runtime under test (a build of this workspace), else in the target
    # directory (CARGO_TARGET_DIR's, where cargo builds it).
    ISOLAB=$(dirname "$RUNTIME")/isolab
    if [[ ! -x $ISOLAB ]]; then
        ISOLAB=${CARGO_TARGET_DIR:-$REPO/target}/debug/isolab
    fi
    if [[ ! -x $ISOLAB ]]; then
        echo "building $ISOLAB (cargo build -p isolab) for its busybox image"
        (cd "$REPO" && cargo build -q -p isolab) ||
            echo "  cargo build failed: using the suite's own rootfs instead"
    fi
    if [[ -x $ISOLAB ]] && (cd "$WORK" && "$ISOLAB" image build busybox "$WORK/rootfs" >/dev/null); then
        tar -C "$WORK/rootfs" -czf "$ROOTFS_TAR" .
        rm -rf --one-file-system "$WORK/rootfs" "$WORK/isolab.db"*
        echo "rootfs: busybox from isolab image build ($(tar -tzf "$ROOTFS_TAR" | wc -l) entries)"
    else
        echo "rootfs: isolab image build busybox failed: using the suite's own rootfs"
        ROOTFS_KIND=suite
    fi
fi
if [[ $ROOTFS_KIND == suite ]]; then
    cp "$SUITE/suite-rootfs-$GOARCH.tar.gz" "$ROOTFS_TAR"
    echo "rootfs: the suite's rootfs-$GOARCH.tar.gz (busybox of 2018)"
fi

if [[ $HYBRID_FIX -eq 1 ]]; then
    hybrid_cgroup_apply || echo "  (continuing: runtimes that need it will fail their cgroup tests)"
fi
# How to find the containers the suite leaves behind (random UUID ids).
if timeout 20 "$RUNTIME" list -q >/dev/null 2>&1; then LIST_MODE=q
elif timeout 20 "$RUNTIME" list >/dev/null 2>&1; then LIST_MODE=table
fi
how=()
[[ $LIST_MODE == q ]] && how+=("\`$RT_NAME list -q\`")
[[ $LIST_MODE == table ]] && how+=("\`$RT_NAME list\`")
[[ -n $STATE_DIR ]] && how+=("the state directory $STATE_DIR")
if [[ ${#how[@]} -eq 0 ]]; then
    echo "containers: $RT_NAME has no working \`list\` and no state directory is known" \
         "(--state-dir): leftover containers cannot be found, only their processes"
else
    printf -v how_text '%s, ' "${how[@]}"
    echo "containers left by the suite are found through: ${how_text%, }"
fi
ids_before=$(runtime_ids)
cgroups_before=$(cgroup_dirs)
SNAPSHOT=1

# ---- run ------------------------------------------------------------------------------
mkdir -p "$LOGS"
rm -f "$LOGS"/*.stdout "$LOGS"/*.stderr "$LOGS"/*.exit
printf 'program\tpassed\tfailed\tskipped\tstatus\tfirst_failure_reason\n' > "$OUT"
echo "running ${#PROGRAMS[@]} validation programs, ${TIMEOUT}s limit each"
t_suite=$EPOCHREALTIME
for p in "${PROGRAMS[@]}"; do
    t0=$EPOCHREALTIME rc=0 timed_out=0
    # timeout(1) runs it in a process group of its own, so a time-out also ends the
    # runtime processes it started (containers are reaped by sweep). In the background
    # plus `wait`, so that Ctrl-C or TERM reach our traps at once (the cleanup then
    # kills the program: it carries $RUN_MARK).
    (cd "$WORK" && exec env "$RUN_MARK" RUNTIME="$RUNTIME" TMPDIR="$WORK/tmp" \
        timeout -k 5 "$TIMEOUT" "$SUITE/bin/$p" \
        < /dev/null > "$LOGS/$p.stdout" 2> "$LOGS/$p.stderr") &
    wait $! || rc=$?
    [[ $rc -eq 124 || $rc -eq 137 ]] && timed_out=1
    echo "exit=$rc timed_out=$timed_out seconds=$(elapsed "$t0")" > "$LOGS/$p.exit"
    row=$(python3 "$LIB/oci_tap.py" row "$p" "$LOGS/$p.stdout" "$LOGS/$p.stderr" \
          "$rc" "$timed_out" "$TIMEOUT")
    printf '%s\n' "$row" >> "$OUT"
    IFS=$'\t' read -r _ np nf ns st _ <<< "$row"
    printf '  %-32s %-7s %4s ok %3s not ok %3s skip  %5.1fs\n' "$p" "$st" "$np" "$nf" "$ns" \
        "$(elapsed "$t0")"
    sweep
done
wall=$(elapsed "$t_suite")

echo
echo "== $RT_NAME: runtime-tools $RT_VERSION, ${#PROGRAMS[@]} programs in ${wall}s =="
python3 "$LIB/oci_tap.py" summary "$OUT"
echo "results: $OUT (logs: $LOGS/)"
exit
}
