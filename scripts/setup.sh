#!/usr/bin/env bash
# Installs what isolab needs on Debian bookworm (or a derivative): the benchmark
# tools and the build dependencies, Go (Debian's, when there is none) and what is built
# with it (benchstat, vegeta, the OCI runtime-tools suite); checks that cargo is there
# and builds youki with it.
# Idempotent: packages already present are skipped by apt-get, benchstat, vegeta, Locust,
# cqlsh, youki and latte when the installed one is the pinned version.
set -euo pipefail

need_root() {
    if [ "$(id -u)" -ne 0 ]; then
        echo "setup: run as root (isolab creates cgroups and installs Debian packages): sudo $0" >&2
        exit 1
    fi
}

# Debian packages: the benchmark tools the built-in workloads run; what the build of
# the bundled SQLite needs; Chromium, in which the tests open the HTML report; and what
# the container runtime and images use: busybox-static (test images), mmdebstrap (the
# bench image), e2fsprogs (ext4 images), Debian's CNI plugins and iptables (bridge
# networking), runc and crun (the same OCI bundle on other runtimes); the engines isolab
# compares with: docker.io (dockerd, started by isolab when none runs), podman, lxc,
# systemd-container (systemd-nspawn, run without systemd as PID 1), tini
# (PID 1 of runc/crun bundles), nftables (`nft`, with which isolab deletes the netfilter
# tables an engine's daemon created on a host that had none), and QEMU for the vm platforms (the guest kernel is
# fetched with `apt-get download` on first use and cached in /var/lib/isolab/vm);
# libseccomp-dev (with pkg-config): isolab-runtime compiles its seccomp filters with
# libseccomp, and the build of youki below needs it too.
PACKAGES=(sysbench fio stress-ng iperf3 build-essential pkg-config ca-certificates chromium
    busybox-static mmdebstrap e2fsprogs containernetworking-plugins iptables runc crun
    docker.io podman lxc systemd-container tini qemu-system-x86 qemu-utils nftables libseccomp-dev)
# The load generators that drive service workloads, as Debian packages: JMeter (its HTTP
# sampler is the separate jmeter-http), wrk, and python3-venv for Locust's venv below.
PACKAGES+=(jmeter jmeter-http wrk python3-venv)
# The built-in service stacks on the `host` platform (containers and VMs get them from
# the experiment's recipe image): nginx for `static`; MariaDB, php-fpm, nginx and
# WordPress with the theme its site uses for `wordpress`; mariadb-client for the
# database's readiness check, which runs on the host for every platform.
PACKAGES+=(nginx-light mariadb-server mariadb-client php8.2-fpm php8.2-mysql php8.2-cli
    wordpress wordpress-theme-twentytwentyone)
# The database stacks `postgresql` and `mariadb` and their OLTP clients, which run on the
# host for every platform: PostgreSQL 15 with pgbench and pg_isready (postgresql-client-15),
# MariaDB 10.11 (above), sysbench 1.0.20 with its mysql and pgsql drivers (above).
PACKAGES+=(postgresql-15 postgresql-client-15)
# The seeds' own benchmark programs on the `host` platform (containers and VMs get them from
# the experiment's recipe image, the same Debian versions): HPC Challenge (HPL, STREAM) under
# Open MPI with OpenBLAS in place of the reference BLAS, sockperf (request-response latency)
# and ioping (disk latency), FFmpeg with libx264/libx265 (the transcoding workloads; the host
# also generates their stand-in input video once) and Open MPI's compiler wrapper (mpicc
# builds isolab's MPI programs once on the host; every platform runs that binary).
PACKAGES+=(hpcc openmpi-bin libopenblas0-serial sockperf ioping ffmpeg libopenmpi-dev)
# The NoSQL stores on the `host` platform (containers and VMs get them from the experiment's
# recipe image): Redis 7.0 (redis-server; redis-tools has redis-benchmark and the
# readiness check's redis-cli, which run on the host) and OpenJDK 17 for Cassandra 5.0,
# whose jars Debian's Maven resolves from Maven Central into the `cassandra` asset
# (built on first use and cached by content hash in /var/lib/isolab/assets).
PACKAGES+=(redis-server redis-tools openjdk-17-jre-headless maven)
# Seed 001's httpd compile: the asset configures httpd on the host against these.
PACKAGES+=(gcc make libapr1-dev libaprutil1-dev libpcre2-dev)
# The storage factor's striped `shared` level: dmsetup (a device-mapper `striped` target)
# and btrfs-progs (a btrfs raid0, `[storage] striping = "btrfs"`, where the kernel has no
# device-mapper).
PACKAGES+=(dmsetup btrfs-progs)
# The OLAP workloads' client on the host talks to PostgreSQL through psycopg2.
PACKAGES+=(python3-psycopg2)
# PostgreSQL's server programs (initdb, pg_ctl): the store tests start a server of their
# own in a temporary directory, and a team's store can live in PostgreSQL (--db postgres://).
PACKAGES+=(postgresql)
# Slurm, through which a fleet spreads an experiment over many hosts: the client programs
# (sbatch, scontrol, scancel, srun) and, for the test that runs a one-node cluster on this
# machine, its controller and node daemons and MUNGE, which authenticates them. The test
# starts them with a configuration of its own in a temporary directory; the packages'
# own services are not used.
PACKAGES+=(slurm-client slurmctld slurmd munge)

missing=()
for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
    need_root
    echo "setup: installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Go builds benchstat, vegeta and the OCI runtime-tools suite below. The newest toolchain
# present is used (scripts/lib/go.sh: `go` on PATH, /usr/local/go, Debian's
# /usr/lib/go-*); with none, Debian's golang-go (Go 1.19 on bookworm) is installed. Each
# tool has two pins: the newest, for a Go that builds it, and the newest that Go 1.19
# builds, checked with bookworm's golang-1.19-go through the module proxy.
# shellcheck source=lib/go.sh
source "$(dirname "$0")/lib/go.sh"
GO=$(isolab_go || true)
if [ -z "$GO" ]; then
    need_root
    echo "setup: no Go toolchain: installing Debian's golang-go"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends golang-go
    GO=$(isolab_go)
fi
GO_VERSION=$(go_version "$GO")
echo "setup: Go $GO_VERSION ($GO)"

# benchstat reads `isolab export --format benchstat`; the report tests run it and compare
# its p-values with isolab's. golang.org/x/perf has no release tags: the first pin is the
# module proxy's latest as of 2026-09-08 (its go.mod says go 1.26.0); the second, of
# 2025-01-06, is the last but one whose go.mod says go 1.18 (the next commit raised it to
# 1.23; the last, of 2025-02-10, only updates dependencies and its checksum could not be
# fetched when this was checked). Between the two, cmd/benchstat and the packages it reads
# with gained only a fix to the column count of `-format csv`'s geomean rows and clean-ups.
if version_at_least "$GO_VERSION" 1.26; then
    BENCHSTAT_VERSION=v0.0.0-20260908200009-22c9c6c9d4da
else
    BENCHSTAT_VERSION=v0.0.0-20250106172127-400946f43c82
fi
if [ -x /usr/local/bin/benchstat ] \
    && "$GO" version -m /usr/local/bin/benchstat 2>/dev/null | grep -q "$BENCHSTAT_VERSION"; then
    :
else
    need_root
    echo "setup: installing benchstat $BENCHSTAT_VERSION into /usr/local/bin"
    GOBIN=/usr/local/bin "$GO" install "golang.org/x/perf/cmd/benchstat@$BENCHSTAT_VERSION"
fi

# vegeta, the open-loop load generator (constant rate), is not in Debian: built with Go
# into /usr/local/bin like benchstat, skipped when the installed one is this version.
# v12.13.0 needs Go 1.20 (its prometheus/common uses strings.CutPrefix; its go.mod says
# 1.22); v12.11.1 is the newest that Go 1.19 builds. The two attack with the same flags and
# encode the same CSV columns (lib/results.go is the same), which is all isolab reads.
if version_at_least "$GO_VERSION" 1.22; then
    VEGETA_VERSION=v12.13.0
else
    VEGETA_VERSION=v12.11.1
fi
if [ -x /usr/local/bin/vegeta ] \
    && "$GO" version -m /usr/local/bin/vegeta 2>/dev/null \
    | grep -q "github.com/tsenart/vegeta/v12[[:space:]]$VEGETA_VERSION[[:space:]]"; then
    :
else
    need_root
    echo "setup: installing vegeta $VEGETA_VERSION into /usr/local/bin"
    GOBIN=/usr/local/bin "$GO" install "github.com/tsenart/vegeta/v12@$VEGETA_VERSION"
fi

# The OCI runtime-tools validation suite (issue 15): its programs are built once with Go
# through the module proxy into /var/cache/isolab/runtime-tools (a cache hit costs
# nothing); the runtime's test suite runs it against isolab-runtime. oci-validation.sh
# picks the suite's version by the Go it builds with.
need_root
ISOLAB_GO=$GO bash "$(dirname "$0")/oci-validation.sh" --build-only |
    sed 's/^/setup: runtime-tools: /'

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
    if [ "$(grep -c . <<<"$listed")" != "${#wanted[@]}" ] ||
        [ "$(sort -u <<<"$listed")" != "$version" ]; then
        need_root
        echo "setup: installing ${wanted[*]} into $venv"
        /usr/bin/python3 -m venv "$venv"
        "$venv/bin/pip" install --quiet "${wanted[@]}"
    fi
}

# Locust, the Python load generator, is on PyPI only: a venv of its own in
# /opt/isolab/locust with Debian's python3, where isolab runs /opt/isolab/locust/bin/locust
# (Generator::program). The version is the one the load fixtures were captured with;
# skipped when it is installed.
pip_venv locust 2.47.0

# cqlsh, with which the cassandra-latte client creates cassandra-stress's schema, is on
# PyPI only: a venv of its own in /opt/isolab/cqlsh, as Locust's; skipped when installed.
pip_venv cqlsh 6.2.2

# DuckDB and its TPC-H and TPC-DS extensions, on PyPI only: the OLAP workloads'
# data sets are generated by them (tpch-pgsql, tpcds-pgsql). A venv of its own in
# /opt/isolab/duckdb; the extensions are loaded by file path from their packages,
# never downloaded at run time.
pip_venv duckdb 1.5.5 duckdb-extension-tpch duckdb-extension-tpcds

if ! command -v cargo >/dev/null 2>&1; then
    echo "setup: cargo not found: install a Rust toolchain of at least 1.80 (https://rustup.rs) and run again" >&2
    exit 1
fi
# youki, the Rust OCI runtime (the `youki` platform), is not in Debian: it is built from
# crates.io into /usr/local/bin (a few minutes on two cores). Its crate has no default
# features, so the cgroup managers (v1, v2) and seccomp (libseccomp-dev) are named: a
# plain `cargo install youki` runs no container here. The same command is in
# crates/isolab-engines/src/youki.rs. Skipped when the installed youki is this version.
YOUKI_VERSION=0.7.0
if [ "$(/usr/local/bin/youki --version 2>/dev/null | head -n 1)" != "youki version: $YOUKI_VERSION" ]; then
    need_root
    echo "setup: installing youki $YOUKI_VERSION into /usr/local/bin"
    cargo install youki --version "$YOUKI_VERSION" --locked --features v1,v2,seccomp --root /usr/local
fi
# latte, the Cassandra load generator of cassandra-latte (JSON reports, HDR histograms),
# is on crates.io only: built into /usr/local/bin (several minutes on two cores), skipped
# when the installed one is this version.
LATTE_VERSION=0.29.0
if [ "$(/usr/local/bin/latte --version 2>/dev/null | awk '{print $NF}')" != "$LATTE_VERSION" ]; then
    need_root
    echo "setup: installing latte $LATTE_VERSION into /usr/local/bin"
    cargo install latte-cli --version "$LATTE_VERSION" --locked --root /usr/local
fi
echo "setup: Debian packages, cargo, youki and latte present"
