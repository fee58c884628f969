#!/usr/bin/env bash
# Installs what isolab needs, by tier, on Debian 12 (bookworm) or 13 (trixie).
#
#   scripts/setup.sh [--dry-run] [TIER...]      (no TIER: quickstart)
#
# The tiers and their Debian packages are in scripts/tiers.txt, one source for this script,
# isolab's "not installed" errors and docs/install.md. Beyond packages, a tier may build
# tools Debian does not ship (listed in `usage`). Packages are resolved with apt-cache, so a
# metapackage (`postgresql`, `php-fpm`) is each release's version and nothing here names
# one. What it checks, in order: the distribution (/etc/os-release; anything but Debian 12
# or 13 gets the list of what to install instead of a shell error), the Rust toolchain
# against the workspace's rust-version, then the packages and tools. Every step checks
# before it installs, so a re-run when all is there does nothing and needs no root.
#
# No daemon a user did not ask for is left running: services that a newly installed package
# brings are not started (a policy-rc.d for the install, when the host has none) and are
# disabled at boot; setup says which. isolab and its tests start the daemons they use with
# configurations of their own (dockerd, PostgreSQL, MariaDB, Slurm, ...).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
TIERS_FILE=$here/tiers.txt
ALL_TIERS=(quickstart workloads engines vm services seeds fleet test)

usage() {
    cat <<EOF
usage: scripts/setup.sh [--dry-run] [TIER...]

Installs what isolab needs on Debian 12 or 13, tier by tier (default: quickstart).
  quickstart  the build, sysbench and mmdebstrap: what \`make quickstart\` needs
  workloads   fio, stress-ng, iperf3: built-in workloads and neighbours on the host
  engines     docker.io, podman, runc, crun, lxc, systemd-nspawn and what they use;
              youki (built from crates.io)
  vm          QEMU: the vm, vm+isolab and vm+docker platforms
  services    load generators and the service stacks on the host: JMeter, wrk, nginx,
              MariaDB, PHP, WordPress, PostgreSQL, Redis, Java and Maven for Cassandra;
              Locust, cqlsh, DuckDB (PyPI), vegeta (Go), latte (crates.io)
  seeds       the seeds' programs on the host (HPCC, Open MPI, sockperf, ioping, FFmpeg,
              httpd's build) and the storage factor (dmsetup, btrfs-progs)
  fleet       PostgreSQL's server (a team's store) and Slurm with MUNGE
  test        every tier, plus Chromium, hyperfine, benchstat, cargo-deny, the OCI
              runtime-tools suite and pandas (the docs' data example): what
              \`make test\` needs
  all         the same as test

--dry-run   resolve and print each tier's packages (installed, to install, or not in
            this distribution) and install nothing; needs no root
Environment: ISOLAB_SKIP_SETUP=1 skips setup (a host set up by hand); on a Debian
derivative, ISOLAB_SETUP_TRY_APT=1 tries apt-get anyway.
EOF
}

say() { printf 'setup: %s\n' "$*"; }
die() { printf 'setup: %s\n' "$*" >&2; exit 1; }

DRY_RUN=0
tiers=()
while [[ $# -gt 0 ]]; do
    case $1 in
        -h|--help) usage; exit 0 ;;
        --dry-run) DRY_RUN=1 ;;
        all) tiers+=(test) ;;
        -*) printf 'setup: unknown option %s\n' "$1" >&2; usage >&2; exit 2 ;;
        *)
            [[ " ${ALL_TIERS[*]} " == *" $1 "* ]] || {
                printf 'setup: unknown tier %s (tiers: %s all)\n' "$1" "${ALL_TIERS[*]}" >&2
                exit 2
            }
            tiers+=("$1")
            ;;
    esac
    shift
done
[[ ${#tiers[@]} -gt 0 ]] || tiers=(quickstart)
# `test` is every tier.
[[ " ${tiers[*]} " == *" test "* ]] && tiers=("${ALL_TIERS[@]}")

if [[ ${ISOLAB_SKIP_SETUP:-} == 1 ]]; then
    say "ISOLAB_SKIP_SETUP=1: nothing checked or installed"
    exit 0
fi

# Lines of tiers.txt for the chosen tiers: TIER PACKAGES NEED WHY.
tier_lines() {
    local t
    for t in "${tiers[@]}"; do
        awk -v t="$t" '$1 == t' "$TIERS_FILE"
    done
}

# What a host without apt-get (or not Debian 12/13) must install by hand, per tier.
print_needs() {
    local tier packages need why
    while read -r tier packages need why; do
        printf '  %-10s %-32s %s\n' "$tier" "${packages//|/ or }" "$why"
    done < <(tier_lines)
    printf '  %-10s %-32s %s\n' quickstart "Rust >= $(msrv)" "cargo and rustc, e.g. from https://rustup.rs"
}

# ---- 1. the distribution ------------------------------------------------------------
os_id="" os_version="" os_like="" os_name="this host"
if [[ -r /etc/os-release ]]; then
    # shellcheck disable=SC1091
    os_id=$(. /etc/os-release && printf '%s' "${ID:-}")
    os_version=$(. /etc/os-release && printf '%s' "${VERSION_ID:-}")
    os_like=$(. /etc/os-release && printf '%s' "${ID_LIKE:-}")
    os_name=$(. /etc/os-release && printf '%s' "${PRETTY_NAME:-$ID}")
fi

msrv() { sed -n 's/^rust-version *= *"\([0-9.]*\)".*/\1/p' "$repo/Cargo.toml" | head -n 1; }

supported=0
if [[ $os_id == debian && ( $os_version == 12 || $os_version == 13 ) ]]; then
    supported=1
elif [[ " $os_like " == *" debian "* && ${ISOLAB_SETUP_TRY_APT:-} == 1 ]]; then
    say "$os_name is a Debian derivative, not Debian 12 or 13: trying apt-get as asked (ISOLAB_SETUP_TRY_APT=1)"
    supported=1
fi
if [[ $supported -eq 1 ]] && ! command -v apt-get >/dev/null 2>&1; then
    supported=0
fi
if [[ $supported -eq 0 ]]; then
    {
        if ! command -v apt-get >/dev/null 2>&1; then
            printf 'setup: %s has no apt-get: scripts/setup.sh installs with Debian'"'"'s apt-get on Debian 12 and 13.\n' "$os_name"
        else
            printf 'setup: %s is not Debian 12 or 13, the releases scripts/setup.sh installs on.\n' "$os_name"
        fi
        printf 'Install these with your distribution'"'"'s packages (docs/install.md says the same, per tier),\n'
        printf 'then run again with ISOLAB_SKIP_SETUP=1 (e.g. `make quickstart ISOLAB_SKIP_SETUP=1`):\n'
        print_needs
        if [[ " $os_like " == *" debian "* ]]; then
            printf 'On this Debian derivative, ISOLAB_SETUP_TRY_APT=1 tries apt-get with the names above.\n'
        fi
    } >&2
    exit 3
fi

# ---- 2. the Rust toolchain (every tier builds isolab) ----------------------------------
MSRV=$(msrv)
version_ge() { [[ $(printf '%s\n%s\n' "$1" "$2" | sort -V | head -n 1) == "$2" ]]; }
rust_version=$(rustc --version 2>/dev/null | awk '{print $2}') || true
if ! command -v cargo >/dev/null 2>&1 || [[ -z $rust_version ]]; then
    die "no Rust toolchain (cargo, rustc): install Rust >= $MSRV from https://rustup.rs$(
        [[ $os_version == 13 ]] && printf ' or with `apt-get install cargo` (Debian 13 has 1.85)'), then run again"
fi
version_ge "${rust_version%%-*}" "$MSRV" ||
    die "rustc $rust_version is older than isolab's minimum, $MSRV: \`rustup update\` (or install Rust >= $MSRV from https://rustup.rs), then run again"
say "$os_name; Rust $rust_version (>= $MSRV); tiers: ${tiers[*]}"

need_root() {
    if [[ $(id -u) -ne 0 ]]; then
        die "$1 needs root: sudo $0 ${tiers[*]}"
    fi
}

# ---- 3. Debian packages ---------------------------------------------------------------
# Resolve each line's alternatives to the first package with an install candidate.
declare -A candidate=()
read_candidates() {
    candidate=()
    local names=() name
    mapfile -t names < <(tier_lines | awk '{n = split($2, a, "|"); for (i = 1; i <= n; i++) print a[i]}' | sort -u)
    # `apt-cache policy` prints "NAME:" then "  Candidate: VERSION" (or "(none)") for each
    # package it knows; unknown ones only warn.
    while read -r name; do
        candidate[$name]=1
    done < <(LC_ALL=C apt-cache policy "${names[@]}" 2>/dev/null |
        awk '/^[^ ].*:$/ { sub(/:$/, ""); p = $0 } /^  Candidate:/ && $2 != "(none)" { print p }')
}
resolve() {  # prints "NAME NEED WHY" lines, NAME "-" when no alternative resolves
    local tier packages need why alt chosen
    while read -r tier packages need why; do
        chosen=-
        IFS='|' read -ra alts <<<"$packages"
        for alt in "${alts[@]}"; do
            if [[ -n ${candidate[$alt]:-} ]]; then chosen=$alt; break; fi
        done
        printf '%s %s %s %s\n' "$packages" "$chosen" "$need" "$why"
    done < <(tier_lines)
}
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

read_candidates
mapfile -t resolved < <(resolve)
# Nothing resolves for a required package: the lists may be missing or old (a fresh
# container image has none); update them once, as root.
if printf '%s\n' "${resolved[@]}" | awk '$2 == "-" && $3 == "required"' | grep -q . &&
    [[ $DRY_RUN -eq 0 && $(id -u) -eq 0 ]]; then
    say "updating apt's package lists (some packages have no candidate)"
    apt-get update -qq
    read_candidates
    mapfile -t resolved < <(resolve)
fi

missing=() absent_required=() notes=()
declare -A seen=()
for line in "${resolved[@]}"; do
    read -r wanted chosen need why <<<"$line"
    [[ -z ${seen[$wanted]:-} ]] || continue
    seen[$wanted]=1
    if [[ $chosen == - ]]; then
        if [[ $need == required ]]; then
            absent_required+=("$wanted")
        else
            notes+=("$wanted: not in $os_name, skipped ($why)")
        fi
        [[ $DRY_RUN -eq 1 ]] && printf '  %-32s %-12s %s\n' "$wanted" "NOT FOUND" "$why"
        continue
    fi
    if installed "$chosen"; then
        [[ $DRY_RUN -eq 1 ]] && printf '  %-32s %-12s %s\n' "$chosen" "installed" "$why"
    else
        missing+=("$chosen")
        [[ $DRY_RUN -eq 1 ]] && printf '  %-32s %-12s %s\n' "$chosen" "to install" "$why"
    fi
done
for n in "${notes[@]}"; do say "$n"; done
if [[ ${#absent_required[@]} -gt 0 ]]; then
    die "no package in $os_name's apt sources provides: ${absent_required[*]} (is the main component enabled? \`apt-get update\` as root, then run again)"
fi
if [[ $DRY_RUN -eq 1 ]]; then
    say "dry run: ${#missing[@]} package(s) to install for ${tiers[*]}; nothing installed"
    exit 0
fi

# Installs packages without starting their services; then disables the services they
# brought at boot and stops any that still started. Prints what it disabled.
policy_made=0
cleanup_policy() {
    if [[ $policy_made -eq 1 ]]; then rm -f /usr/sbin/policy-rc.d; fi
}
trap cleanup_policy EXIT
apt_install() {
    local pkg unit units=() scripts=() name
    if [[ ! -e /usr/sbin/policy-rc.d ]]; then
        printf '#!/bin/sh\n# scripts/setup.sh: no service starts while it installs\nexit 101\n' \
            > /usr/sbin/policy-rc.d
        chmod 755 /usr/sbin/policy-rc.d
        policy_made=1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"
    cleanup_policy
    policy_made=0
    for pkg in "$@"; do
        while read -r unit; do
            case $unit in
                */systemd/system/*.service|*/systemd/system/*.socket) units+=("${unit##*/}") ;;
                /etc/init.d/*) scripts+=("${unit##*/}") ;;
            esac
        done < <(dpkg -L "$pkg" 2>/dev/null)
    done
    [[ ${#units[@]} -gt 0 || ${#scripts[@]} -gt 0 ]] || return 0
    for unit in "${units[@]}"; do
        [[ $unit == *@.service || $unit == *@.socket ]] && continue
        if [[ -d /run/systemd/system ]]; then systemctl stop "$unit" >/dev/null 2>&1 || true; fi
        systemctl disable "$unit" >/dev/null 2>&1 || true
    done
    for name in "${scripts[@]}"; do
        # An init script's daemon that started anyway (a package that ignores policy-rc.d).
        if [[ ! -d /run/systemd/system ]]; then "/etc/init.d/$name" stop >/dev/null 2>&1 || true; fi
        update-rc.d "$name" disable >/dev/null 2>&1 || true
    done
    say "services the new packages brought are stopped and disabled at boot (isolab starts what it uses): $(
        printf '%s\n' "${units[@]%.*}" "${scripts[@]}" | grep -v '@$' | sort -u | tr '\n' ' ')"
}

if [[ ${#missing[@]} -gt 0 ]]; then
    need_root "installing ${missing[*]}"
    say "installing ${missing[*]}"
    apt-get update -qq
    apt_install "${missing[@]}"
fi

has_tier() { [[ " ${tiers[*]} " == *" $1 "* ]]; }

# ---- 4. tools Debian does not ship ----------------------------------------------------
# Go builds vegeta (services), benchstat and the OCI runtime-tools suite (test). The
# newest toolchain present is used (scripts/lib/go.sh: `go` on PATH, /usr/local/go,
# Debian's /usr/lib/go-*); with none, Debian's golang-go is installed. Each tool has two
# pins: the newest, for a Go that builds it, and the newest that Go 1.19 (Debian 12's)
# builds, checked with bookworm's golang-1.19-go through the module proxy.
if has_tier services || has_tier test; then
    # shellcheck source=lib/go.sh
    source "$here/lib/go.sh"
    GO=$(isolab_go || true)
    if [[ -z $GO ]]; then
        need_root "installing Debian's golang-go (no Go toolchain found)"
        say "no Go toolchain: installing Debian's golang-go"
        apt_install golang-go
        GO=$(isolab_go)
    fi
    GO_VERSION=$(go_version "$GO")
fi

# go_install BINARY MODULE VERSION: MODULE@VERSION into /usr/local/bin, skipped when the
# installed BINARY was built from that version.
go_install() {
    local bin=$1 module=$2 version=$3
    if [[ -x /usr/local/bin/$bin ]] &&
        "$GO" version -m "/usr/local/bin/$bin" 2>/dev/null | grep -q "[[:space:]]$version\([[:space:]]\|$\)"; then
        return 0
    fi
    need_root "installing $bin $version"
    say "installing $bin $version into /usr/local/bin"
    GOBIN=/usr/local/bin "$GO" install "$module@$version"
}

# pip_venv PACKAGE VERSION [EXTRA...]: PACKAGE==VERSION (and each EXTRA==VERSION, packages
# released in step with it) in a venv of its own, /opt/isolab/PACKAGE; skipped when pip
# lists every one of them at VERSION there.
pip_venv() {
    local name=$1 version=$2 venv=/opt/isolab/$1 listed extra
    shift 2
    local wanted=("$name==$version")
    for extra in "$@"; do wanted+=("$extra==$version"); done
    # `pip show` prints a Version: line for each package it finds (and only a warning
    # for one it does not): as many lines as packages, all of VERSION.
    listed=$("$venv/bin/pip" show "$name" "$@" 2>/dev/null | awk '/^Version:/ {print $2}') || true
    if [[ $(grep -c . <<<"$listed") != "${#wanted[@]}" || $(sort -u <<<"$listed") != "$version" ]]; then
        need_root "installing ${wanted[*]} into $venv"
        say "installing ${wanted[*]} into $venv"
        /usr/bin/python3 -m venv "$venv"
        "$venv/bin/pip" install --quiet "${wanted[@]}"
    fi
}

# cargo_install BINARY VERSION CARGO-INSTALL-ARGS...: a crate into /usr/local/bin (several
# minutes on two cores), skipped when the first line of `BINARY --version` ends in VERSION.
cargo_install() {
    local bin=$1 version=$2
    shift 2
    if [[ $(/usr/local/bin/"$bin" --version 2>/dev/null | head -n 1 | awk '{print $NF}') == "$version" ]]; then
        return 0
    fi
    need_root "installing $bin $version"
    say "installing $bin $version into /usr/local/bin"
    cargo install "$@"
}

if has_tier engines; then
    # youki, the Rust OCI runtime (the `youki` platform): its crate has no default features,
    # so the cgroup managers (v1, v2) and seccomp (libseccomp-dev) are named: a plain
    # `cargo install youki` runs no container here. The same command is in
    # crates/isolab-engines/src/youki.rs.
    YOUKI_VERSION=0.7.0
    cargo_install youki "$YOUKI_VERSION" \
        youki --version "$YOUKI_VERSION" --locked --features v1,v2,seccomp --root /usr/local
fi

if has_tier services; then
    # vegeta, the open-loop load generator (constant rate): v12.13.0 needs Go 1.20 (its
    # go.mod says 1.22); v12.11.1 is the newest that Go 1.19 builds. Both attack with the
    # same flags and encode the same CSV columns, which is all isolab reads.
    if version_at_least "$GO_VERSION" 1.22; then VEGETA_VERSION=v12.13.0; else VEGETA_VERSION=v12.11.1; fi
    go_install vegeta github.com/tsenart/vegeta/v12 "$VEGETA_VERSION"
    # Locust (the load fixtures were captured with this version), cqlsh (creates
    # cassandra-stress's schema) and DuckDB with its TPC-H and TPC-DS extensions (the OLAP
    # data sets; loaded by file path, never downloaded at run time): PyPI only, each in a
    # venv of its own under /opt/isolab with the host's python3.
    pip_venv locust 2.47.0
    pip_venv cqlsh 6.2.2
    pip_venv duckdb 1.5.5 duckdb-extension-tpch duckdb-extension-tpcds
    # latte, the Cassandra load generator (JSON reports, HDR histograms): crates.io only.
    LATTE_VERSION=0.29.0
    cargo_install latte "$LATTE_VERSION" \
        latte-cli --version "$LATTE_VERSION" --locked --root /usr/local
fi

if has_tier test; then
    # benchstat reads `isolab export --format benchstat`; the report tests compare its
    # p-values with isolab's. golang.org/x/perf has no release tags: the first pin is the
    # module proxy's latest as of 2026-09-08 (go.mod: go 1.26.0); the second, of
    # 2025-01-06, the last but one whose go.mod says go 1.18. Between the two, cmd/benchstat
    # gained only a fix to the column count of `-format csv`'s geomean rows and clean-ups.
    if version_at_least "$GO_VERSION" 1.26; then
        BENCHSTAT_VERSION=v0.0.0-20260908200009-22c9c6c9d4da
    else
        BENCHSTAT_VERSION=v0.0.0-20250106172127-400946f43c82
    fi
    go_install benchstat golang.org/x/perf/cmd/benchstat "$BENCHSTAT_VERSION"
    # cargo-deny checks deny.toml (licences, duplicate versions, sources, advisories) in
    # `make deny`, which `make test` runs: crates.io only, about 5 CPU-minutes to build.
    CARGO_DENY_VERSION=0.20.2
    cargo_install cargo-deny "$CARGO_DENY_VERSION" \
        cargo-deny --version "$CARGO_DENY_VERSION" --locked --root /usr/local
    # The OCI runtime-tools validation suite: built once with Go through the module proxy
    # into /var/cache/isolab/runtime-tools (a cache hit costs nothing, and needs no root).
    ISOLAB_GO=$GO bash "$here/oci-validation.sh" --build-only | sed 's/^/setup: runtime-tools: /'
    # pandas: docs/data.md's example loads a real export with it, and the docs test
    # (crates/isolab/tests/docs.rs) runs that example with this venv's python.
    pip_venv pandas 3.1.1
fi

say "ready for: ${tiers[*]}"
