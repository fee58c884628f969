#!/usr/bin/env python3
"""Checks that the workspace's rust-version is honest: every workspace crate inherits it,
and every locked package that a Linux build of isolab compiles declares a rust-version no
newer than it.

Reads `cargo metadata --format-version 1 --locked --all-features --filter-platform T` for
each Linux target isolab is built for (isolab needs Linux namespaces and cgroups): the
resolved graph then holds the normal, build and dev dependencies of every workspace crate,
with every feature of the workspace crates, and no package that only another platform
compiles. Such target-only packages (wasip2 for wasm, windows-sys, r-efi…) are listed but
not checked: nothing isolab builds compiles them. A package that declares no rust-version
cannot be checked here; building with that rustc (Debian 13's) is what checks it.

Exit status: 0 when all is well, 1 when a workspace crate has no rust-version or another
one, or a package needs a newer rustc (each named with the crate that pulls it in).

Usage: scripts/check-msrv.py [--manifest-path Cargo.toml]
"""
import json
import subprocess
import sys

# The Linux targets isolab is built for; what only other targets compile is not checked.
TARGETS = ["x86_64-unknown-linux-gnu", "aarch64-unknown-linux-gnu"]


def version(text):
    """'1.85' or '1.85.0' -> (1, 85, 0)."""
    parts = [int(p) for p in text.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))


def metadata(extra, target=None):
    cmd = ["cargo", "metadata", "--format-version", "1", "--locked", "--all-features"]
    if target:
        cmd += ["--filter-platform", target]
    out = subprocess.run(cmd + extra, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main(argv):
    extra = argv[1:]
    full = metadata(extra)
    packages = {p["id"]: p for p in full["packages"]}
    members = [packages[i] for i in full["workspace_members"]]

    errors = []
    msrvs = {m["rust_version"] for m in members}
    missing = sorted(m["name"] for m in members if not m["rust_version"])
    if missing:
        errors.append("workspace crates without rust-version (add `rust-version.workspace = "
                      "true`): " + ", ".join(missing))
    msrvs.discard(None)
    if len(msrvs) != 1:
        errors.append(f"workspace crates disagree on rust-version: {sorted(msrvs)}")
    msrv = max(msrvs, key=version) if msrvs else None
    if msrv is None:
        print("\n".join(errors), file=sys.stderr)
        return 1

    built = {}  # package id -> the first package found to depend on it
    for target in TARGETS:
        resolve = metadata(extra, target)["resolve"]["nodes"]
        for node in resolve:
            built.setdefault(node["id"], None)
            for dep in node["deps"]:
                if built.get(dep["pkg"]) is None:
                    built[dep["pkg"]] = node["id"]

    member_ids = set(full["workspace_members"])
    newer, unknown, checked = [], [], []
    for pid in built:
        if pid in member_ids:
            continue
        p = packages[pid]
        rv = p["rust_version"]
        if rv is None:
            unknown.append(f"{p['name']} {p['version']}")
        elif version(rv) > version(msrv):
            by = packages[built[pid]]["name"] if built[pid] else "?"
            newer.append(f"{p['name']} {p['version']} needs rust {rv} (pulled in by {by})")
        else:
            checked.append((version(rv), f"{p['name']} {p['version']} ({rv})"))
    elsewhere = sorted(
        f"{p['name']} {p['version']} ({p['rust_version'] or 'no rust-version'})"
        for pid, p in packages.items()
        if pid not in built and pid not in member_ids
    )

    checked.sort(reverse=True)
    print(f"rust-version {msrv}: all {len(members)} workspace crates inherit it")
    print(f"built for {', '.join(TARGETS)}: {len(built) - len(member_ids)} locked packages "
          f"(normal, build and dev dependencies, all features)")
    print(f"  {len(checked)} declare a rust-version <= {msrv}; the highest: "
          + ", ".join(c for _, c in checked[:5]))
    print(f"  {len(unknown)} declare none (checked only by building with rustc {msrv}): "
          + ", ".join(sorted(unknown)))
    print(f"not built on Linux, not checked ({len(elsewhere)}): " + ", ".join(elsewhere))
    for line in newer:
        errors.append(line)
    if errors:
        print(f"\nrust-version {msrv} is not honest:", file=sys.stderr)
        for e in errors:
            print(f"  {e}", file=sys.stderr)
        return 1
    print(f"ok: every locked package built for Linux declares rust-version <= {msrv} or none")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
