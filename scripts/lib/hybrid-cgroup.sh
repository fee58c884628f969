# shellcheck shell=bash
# Sourced library: make a hybrid cgroup host (cgroup v1 hierarchies plus cgroup2 at
# /sys/fs/cgroup/unified) acceptable to crun, and undo that afterwards.
#
# Why: crun refuses a hybrid host whose cgroup2 mount still lists controllers
# ("drop all controllers from cgroupv2"). A controller listed in
# /sys/fs/cgroup/unified/cgroup.controllers is one that no v1 hierarchy holds (on
# this kernel: hugetlb), so we mount a v1 hierarchy for each such controller at
# /sys/fs/cgroup/NAME (remounting the /sys/fs/cgroup tmpfs read-write first if it is
# read-only). Mounting it moves the controller from cgroup2 to v1; unmounting an
# empty v1 hierarchy gives it back to cgroup2.
#
# Usage:
#   source scripts/lib/hybrid-cgroup.sh
#   hybrid_cgroup_apply          # prints each change; returns 1 if a mount failed
#   ...
#   hybrid_cgroup_undo           # prints each change it reverts; safe to call twice;
#                                # returns 1 (and says how to finish) if it had to keep
#                                # a hierarchy that holds cgroups of other programs
#
# Both functions print what they change (prefixed by HYBRID_CGROUP_PREFIX, default
# two spaces) and never exit the caller, so they are usable under `set -euo pipefail`
# and from an EXIT trap. State lives in the HYBRID_CGROUP_* globals below.

HYBRID_CGROUP_ROOT=${HYBRID_CGROUP_ROOT:-/sys/fs/cgroup}
HYBRID_CGROUP_PREFIX=${HYBRID_CGROUP_PREFIX:-  }
HYBRID_CGROUP_MOUNTED=()       # controllers we mounted a v1 hierarchy for
HYBRID_CGROUP_CREATED_DIRS=()  # mount points we had to create
HYBRID_CGROUP_REMOUNTED_RW=0   # 1 if we remounted $HYBRID_CGROUP_ROOT read-write

_hybrid_cgroup_say() { echo "${HYBRID_CGROUP_PREFIX}$*"; }

# The controllers the cgroup2 mount still lists (empty on a pure v1 or clean hybrid
# host, and when there is no cgroup2 mount at unified/).
hybrid_cgroup_v2_controllers() {
    local f=$HYBRID_CGROUP_ROOT/unified/cgroup.controllers
    [[ -r $f ]] && cat "$f"
    return 0
}

# Controllers bound to a v1 hierarchy that is mounted nowhere: what is left when a
# hierarchy is unmounted while it still has cgroups (another program's, made just
# before the unmount). /proc/cgroups gives such a controller a hierarchy number, and
# runtimes write plain directories into the unmounted /sys/fs/cgroup/NAME; mounting it
# again makes it usable, and the undo frees it once it is empty.
hybrid_cgroup_hidden_controllers() {
    local name hier enabled
    while read -r name hier _ enabled; do
        [[ $name == \#* || $hier == 0 || $enabled != 1 ]] && continue
        awk -v c="$name" '$3 == "cgroup" { n = split($4, o, ","); for (i = 1; i <= n; i++) if (o[i] == c) f = 1 }
            END { exit !f }' /proc/self/mounts || echo "$name"
    done </proc/cgroups
    return 0
}

hybrid_cgroup_apply() {
    local cg=$HYBRID_CGROUP_ROOT c rc=0 controllers hidden why
    controllers=$(hybrid_cgroup_v2_controllers)
    hidden=$(hybrid_cgroup_hidden_controllers)
    if [[ -z ${controllers// /} && -z $hidden ]]; then
        _hybrid_cgroup_say "hybrid cgroup: cgroup2 lists no controllers, nothing to change"
        return 0
    fi
    for c in $controllers $hidden; do
        mountpoint -q "$cg/$c" && continue
        if [[ $HYBRID_CGROUP_REMOUNTED_RW -eq 0 &&
              $(findmnt -no OPTIONS "$cg" | tr , '\n' | head -1) == ro ]]; then
            if mount -o remount,rw "$cg"; then
                HYBRID_CGROUP_REMOUNTED_RW=1
                _hybrid_cgroup_say "hybrid cgroup: remounted $cg read-write"
            else
                _hybrid_cgroup_say "hybrid cgroup: could not remount $cg read-write"
                return 1
            fi
        fi
        if [[ ! -d $cg/$c ]]; then
            mkdir "$cg/$c" && HYBRID_CGROUP_CREATED_DIRS+=("$cg/$c")
        fi
        why="cgroup2 listed it; crun needs it on v1"
        [[ " $hidden " == *" $c "* ]] && why="it was on a v1 hierarchy mounted nowhere"
        if mount -t cgroup -o "$c" cgroup "$cg/$c"; then
            HYBRID_CGROUP_MOUNTED+=("$c")
            _hybrid_cgroup_say "hybrid cgroup: mounted a v1 $c hierarchy at $cg/$c ($why)"
        else
            _hybrid_cgroup_say "hybrid cgroup: could not mount a v1 $c hierarchy: crun will likely refuse this host"
            rc=1
        fi
    done
    return $rc
}

# /proc/cgroups: "name hierarchy num_cgroups enabled". num_cgroups counts removed
# cgroups that the kernel has not freed yet ("dying"), hierarchy is 0 on cgroup2.
_hybrid_cgroup_field() { awk -v c="$1" -v f="$2" '$1 == c { print $f }' /proc/cgroups; }

# Unmount the v1 hierarchy of controller $1 so that the controller returns to cgroup2.
# The kernel destroys an unmounted v1 hierarchy only if, at the moment of the unmount,
# it has no child cgroup, dying ones included; otherwise the hierarchy lives on,
# unmounted, and keeps the controller away from cgroup2 for good (a later mount
# reuses it). Runtimes leave dying cgroups for a moment after `delete`, so: wait
# until only the root is left, unmount, check, and if the hierarchy survived, mount
# it again and retry. Returns 1 with the hierarchy mounted when it will not go.
_hybrid_cgroup_unmount() {
    local c=$1 dir=$HYBRID_CGROUP_ROOT/$1 attempt t
    for attempt in 1 2 3; do
        for ((t = 0; t < 100; t++)); do  # up to 10 s
            [[ $(_hybrid_cgroup_field "$c" 3) -le 1 ]] && break
            sleep 0.1
        done
        umount "$dir" || return 1
        for ((t = 0; t < 20; t++)); do  # up to 2 s
            [[ $(_hybrid_cgroup_field "$c" 2) == 0 ]] && return 0
            sleep 0.1
        done
        _hybrid_cgroup_say "hybrid cgroup: the unmounted $c hierarchy outlived its unmount" \
            "($(_hybrid_cgroup_field "$c" 3) cgroups in it), mounting it again ($attempt/3)"
        mount -t cgroup -o "$c" cgroup "$dir" || return 1
        # A cgroup another program made just before the unmount: keep the hierarchy
        # mounted, so that its owner can remove it.
        [[ -n $(find "$dir" -mindepth 1 -maxdepth 1 -type d -print -quit) ]] && return 1
    done
    # Mounted, not hidden: the undo reports it kept.
    return 1
}

hybrid_cgroup_undo() {
    local cg=$HYBRID_CGROUP_ROOT c d i kept=() created=()
    # Newest first. A hierarchy that still has child cgroups is left mounted: unmounting
    # it would only hide them, and the controller would stay bound to the hidden
    # hierarchy instead of returning to cgroup2.
    for ((i = ${#HYBRID_CGROUP_MOUNTED[@]} - 1; i >= 0; i--)); do
        c=${HYBRID_CGROUP_MOUNTED[i]}
        # The empty cgroups in a hierarchy we mounted were made while it was mounted (a
        # runtime's parent cgroup, e.g. isolab-runtime's `isolab`) and would only be hidden
        # by the unmount: remove them, deepest first (rmdir keeps one in use).
        if mountpoint -q "$cg/$c"; then
            find "$cg/$c" -mindepth 1 -depth -type d -exec rmdir {} \; 2>/dev/null &&
                _hybrid_cgroup_say "hybrid cgroup: removed the empty cgroups left in $cg/$c"
        fi
        if [[ -n $(find "$cg/$c" -mindepth 1 -maxdepth 1 -type d -print -quit 2>/dev/null) ]]; then
            _hybrid_cgroup_say "hybrid cgroup: WARNING: kept $cg/$c mounted, it still has child cgroups:" \
                "$(find "$cg/$c" -mindepth 1 -type d | head -5 | tr '\n' ' ')"
            kept+=("$c")
        elif _hybrid_cgroup_unmount "$c"; then
            _hybrid_cgroup_say "hybrid cgroup: unmounted the v1 $c hierarchy from $cg/$c ($c is back on cgroup2)"
        elif mountpoint -q "$cg/$c"; then
            _hybrid_cgroup_say "hybrid cgroup: WARNING: could not unmount $cg/$c"
            kept+=("$c")
        fi
    done
    HYBRID_CGROUP_MOUNTED=("${kept[@]}")
    for ((i = ${#HYBRID_CGROUP_CREATED_DIRS[@]} - 1; i >= 0; i--)); do
        d=${HYBRID_CGROUP_CREATED_DIRS[i]}
        if mountpoint -q "$d"; then
            created+=("$d")  # still in use: removed by a later undo
        else
            rmdir "$d" && _hybrid_cgroup_say "hybrid cgroup: removed mount point $d"
        fi
    done
    HYBRID_CGROUP_CREATED_DIRS=("${created[@]}")
    if [[ $HYBRID_CGROUP_REMOUNTED_RW -eq 1 && ${#kept[@]} -eq 0 ]]; then
        mount -o remount,ro "$cg" && _hybrid_cgroup_say "hybrid cgroup: remounted $cg read-only again"
        HYBRID_CGROUP_REMOUNTED_RW=0
    fi
    if [[ ${#kept[@]} -gt 0 ]]; then
        # On a shared host another program may have put cgroups into our hierarchy
        # (Podman's libpod_parent did). Say how to finish the undo once they are gone.
        _hybrid_cgroup_say "hybrid cgroup: to undo the rest once those cgroups are gone, run:"
        _hybrid_cgroup_say "  bash -c 'source ${BASH_SOURCE[0]}; HYBRID_CGROUP_MOUNTED=(${kept[*]});" \
            "HYBRID_CGROUP_CREATED_DIRS=(${created[*]}); HYBRID_CGROUP_REMOUNTED_RW=$HYBRID_CGROUP_REMOUNTED_RW;" \
            "hybrid_cgroup_undo'"
        return 1
    fi
    return 0
}
