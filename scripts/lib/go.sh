# shellcheck shell=bash
# Which Go toolchain isolab's scripts build with, and how new it is. Sourced by
# scripts/setup.sh and scripts/oci-validation.sh; run as a program it prints the
# toolchain's path (nothing, and status 1, when there is none), which is how the
# runtime's tests find the Go the suite is built with.
#
# The newest of: `go` on PATH, the official tarball's /usr/local/go/bin/go (often not on
# root's PATH) and Debian's /usr/lib/go-*/bin/go (golang-go links /usr/bin/go to one of
# them). A newer Go builds newer pins (scripts/setup.sh and oci-validation.sh choose their
# versions by it); Debian bookworm's golang-go is Go 1.19, the fallback. ISOLAB_GO=PATH
# chooses one instead (to check the fallback pins on a machine that has a newer Go).

# The version of the Go toolchain $1 (`1.19.8`), or nothing when it does not run.
go_version() {
    local v
    v=$("$1" env GOVERSION 2>/dev/null) || return 1
    v=${v#go}
    printf '%s\n' "${v%%[!0-9.]*}"  # go1.22rc1 -> 1.22
}

# Whether version $1 is at least $2 (both dotted numbers: 1.19.8, 1.21).
version_at_least() {
    [[ $(printf '%s\n%s\n' "$1" "$2" | sort -V | head -n 1) == "$2" ]]
}

# Prints the newest Go toolchain's path (or $ISOLAB_GO's); status 1 when there is none.
isolab_go() {
    local candidates=() c best="" best_version="" v
    if [[ -n ${ISOLAB_GO:-} ]]; then
        go_version "$ISOLAB_GO" >/dev/null || return 1
        printf '%s\n' "$ISOLAB_GO"
        return 0
    fi
    c=$(command -v go 2>/dev/null) && candidates+=("$c")
    candidates+=(/usr/local/go/bin/go /usr/lib/go-*/bin/go)
    for c in "${candidates[@]}"; do
        [[ -x $c ]] || continue
        v=$(go_version "$c") || continue
        [[ -n $v ]] || continue
        if [[ -z $best ]] || ! version_at_least "$best_version" "$v"; then
            best=$c best_version=$v
        fi
    done
    [[ -n $best ]] || return 1
    printf '%s\n' "$best"
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
    isolab_go
fi
