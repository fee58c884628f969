#!/usr/bin/env python3
"""Measurement half of scripts/bench-runtime.sh (which prepares the root, the bundle
and the host, and undoes it all on exit). Runs every engine of a set round-robin,
shuffling the order each round so that drift and position hit all alike, and prints
median, p5, p95, ratios with a bootstrap interval, and isolab-runtime's phase
breakdown from its --trace JSON.

Usage: bench_runtime.py N RUNTIME ROOT BUNDLE RUNC|- CRUN|- ID_SUFFIX
"""
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time

PHASES = ["setup", "cgroup", "plan", "clone", "network", "mounts", "pivot", "seccomp",
          "exec", "reaped", "exit"]
PHASE_NOTES = {
    "setup": "the runtime's main() -> its setup starts (command line, bundle, cgroup mounts)",
    "cgroup": "setup -> state file, cgroup created and limited, devices cgroup",
    "plan": "cgroup -> the child's plan built (paths, argv, seccomp program)",
    "clone": "plan -> clone3 returned in the parent",
    "network": "clone -> child in cgroup, network configured (lo up for none)",
    "mounts": "network -> root, /proc, /sys, /dev mounted (child)",
    "pivot": "mounts -> pivot_root done, old root detached (child)",
    "seccomp": "pivot -> right before loading seccomp (command's process)",
    "exec": "seccomp -> execve succeeded (filter load, caps, execve)",
    "reaped": "exec -> command exited and init reaped (/bin/true runs here)",
    "exit": "reaped -> counters read, cgroup, devices cgroup, state and mount points removed",
}


class RunFailed(Exception):
    pass


def run_once(cmd):
    """Wall time of one start->exit, and stderr (for the trace)."""
    t = time.perf_counter()
    r = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE)
    dt = time.perf_counter() - t
    if r.returncode != 0:
        raise RunFailed(f"{' '.join(cmd)} exited {r.returncode}: "
                        f"{r.stderr.decode(errors='replace').strip()[:300]}")
    return dt, r.stderr.decode(errors="replace")


def parse_trace(stderr):
    for line in reversed(stderr.splitlines()):
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                d = json.loads(line)
            except ValueError:
                continue
            if "exit_us" in d:
                return d
    return None


def pct(xs, p):
    """Percentile with linear interpolation between closest ranks (numpy's default)."""
    s = sorted(xs)
    k = (len(s) - 1) * p / 100
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def ratio_ci(a, b, reps=2000, seed=1):
    """95% bootstrap interval of median(a)/median(b), resampling each side."""
    rng = random.Random(seed)
    rs = sorted(statistics.median(rng.choices(a, k=len(a))) /
                statistics.median(rng.choices(b, k=len(b))) for _ in range(reps))
    return rs[int(0.025 * reps)], rs[int(0.975 * reps) - 1]


def cpu_times():
    """Aggregate /proc/stat cpu line: user nice system idle iowait irq softirq steal."""
    with open("/proc/stat") as f:
        return [int(x) for x in f.readline().split()[1:9]]


def bench(title, engines, n, warmup, idle=0.0, before=None, seed=None):
    """engines: {name: argv}; returns ({name: [seconds]}, {name: [(trace dict, seconds)]}).
    idle: seconds of sleep before every run (a cold, stand-alone start).
    before: {name: function} called, untimed, right before each start of that engine.
    The order is shuffled every round (seed printed): an engine's time can depend on the
    one before it, so the medians by predecessor are printed too."""
    names = list(engines)
    before = before or {}
    seed = random.randrange(2**32) if seed is None else seed
    rng = random.Random(seed)
    gap = f", {idle * 1e3:.0f} ms idle before each run" if idle else ""
    print(f"\n== {title}: {n} runs each after {warmup} warm-up, interleaved "
          f"(order shuffled every round, seed {seed}){gap} ==", flush=True)
    for _ in range(warmup):
        for k in names:
            if k in before:
                before[k]()
            run_once(engines[k])
    times = {k: [] for k in names}
    traces = {k: [] for k in names}
    after = {k: {} for k in names}
    previous = None
    c0 = cpu_times()
    for i in range(n):
        order = names[:]
        rng.shuffle(order)
        for k in order:
            if idle:
                time.sleep(idle)
            if k in before:
                before[k]()
            dt, err = run_once(engines[k])
            times[k].append(dt)
            after[k].setdefault(previous, []).append(dt)
            previous = k
            tr = parse_trace(err)
            if tr is not None:
                traces[k].append((tr, dt))
    d = [b - a for a, b in zip(c0, cpu_times())]
    tot = sum(d) or 1
    print(f"  (CPU time during this set: busy {100 * (tot - d[3] - d[7]) / tot:.0f}%, "
          f"steal {100 * d[7] / tot:.1f}% (taken by the hypervisor: noise), idle {100 * d[3] / tot:.0f}%)")
    for k in names:
        v = [x * 1e3 for x in times[k]]
        print(f"  {k:28s} median {statistics.median(v):7.2f} ms   p5 {pct(v, 5):7.2f}   "
              f"p95 {pct(v, 95):7.2f}   min {min(v):7.2f}   (n={len(v)})")
    print("  median ms by the runtime that ran just before (rows: runtime; columns: before it)")
    short = [k[:18] for k in names]
    print("  " + " " * 30 + "".join(f"{s:>20s}" for s in short))
    for k in names:
        cells = []
        for p in names:
            v = after[k].get(p, [])
            cells.append(f"{statistics.median(v) * 1e3:.2f} ({len(v)})" if v else "-")
        print(f"  {k:30s}" + "".join(f"{c:>20s}" for c in cells))
    return times, traces


def solo(title, engines, n, warmup, block=5):
    """Each engine's runs back to back: blocks of `block` measured runs, each after
    one unmeasured run of the same engine (so every measured run follows one of its
    own), engine after engine, round after round (so drift hits all alike)."""
    print(f"\n== {title}: {n} runs each after {warmup} warm-up, in blocks of {block} "
          f"(each block after one unmeasured run of the same runtime) ==", flush=True)
    for argv in engines.values():
        for _ in range(warmup):
            run_once(argv)
    times = {k: [] for k in engines}
    while any(len(v) < n for v in times.values()):
        for k, argv in engines.items():
            run_once(argv)
            for _ in range(min(block, n - len(times[k]))):
                times[k].append(run_once(argv)[0])
    for k in engines:
        v = [x * 1e3 for x in times[k]]
        print(f"  {k:28s} median {statistics.median(v):7.2f} ms   p5 {pct(v, 5):7.2f}   "
              f"p95 {pct(v, 95):7.2f}   min {min(v):7.2f}   (n={len(v)})")
    return times


def print_ratios(times, ours, peers, label=""):
    for peer in peers:
        if peer in times and ours in times:
            a, b = times[ours], times[peer]
            r = statistics.median(a) / statistics.median(b)
            lo, hi = ratio_ci(a, b)
            print(f"  {ours} / {peer}{label}: {r:.2f}   (95% bootstrap CI {lo:.2f}-{hi:.2f})")


def print_phases(title, traces):
    if not traces:
        print(f"\n  (no --trace output for {title})")
        return
    print(f"\n  phase breakdown, {title} (n={len(traces)}; median of each delta; "
          "medians do not add up exactly):")
    deltas = {p: [] for p in PHASES}
    outside = []
    for tr, wall in traces:
        prev = 0
        for p in PHASES:
            if f"{p}_us" in tr:
                deltas[p].append((tr[f"{p}_us"] - prev) / 1e3)
                prev = tr[f"{p}_us"]
        if "exit_us" in tr:
            outside.append(wall * 1e3 - tr["exit_us"] / 1e3)
    for p in PHASES:
        v = deltas[p]
        if v:
            print(f"    {p:8s} {statistics.median(v):7.2f} ms  (p5 {pct(v, 5):6.2f}, "
                  f"p95 {pct(v, 95):6.2f})   {PHASE_NOTES[p]}")
    if outside:
        print(f"    {'outside':8s} {statistics.median(outside):7.2f} ms  (p5 {pct(outside, 5):6.2f}, "
              f"p95 {pct(outside, 95):6.2f})   wall time minus exit_us: exec of the "
              "runtime binary up to main(), printing the trace, process exit")
    tot = [tr["exit_us"] / 1e3 for tr, _ in traces if "exit_us" in tr]
    if tot:
        print(f"    {'total':8s} {statistics.median(tot):7.2f} ms   (exit_us: main() to the end of run())")


def main():
    n, rt, root, bundle, runc, crun, sfx = sys.argv[1:8]
    n = int(n)
    warmup = max(3, n // 20)
    # The headline runs every runtime from the same config.json (capabilities, seccomp
    # profile, masked paths, cgroupsPath): isolab-runtime as `run --bundle`, like runc
    # and crun. Its own command-line form is measured beside it.
    engines = {"isolab-runtime": [rt, "run", "--trace", "--id", f"bench-isob-{sfx}",
                                  "--bundle", bundle],
               "isolab-runtime (flags)": [rt, "run", "--trace", "--id", f"bench-iso-{sfx}",
                                          "--readonly", root, "--", "/bin/true"]}
    if runc != "-":
        engines["runc"] = [runc, "run", "--bundle", bundle, f"bench-runc-{sfx}"]
    if crun != "-":
        engines["crun"] = [crun, "run", "--bundle", bundle, f"bench-crun-{sfx}"]
    # runc and crun compile their seccomp filter on every start; isolab-runtime loads the
    # compiled one from its cache. This one has a state directory of its own whose cache is
    # removed before each start (untimed), so it compiles every time, as they do.
    # Beside the default state directory (/run/isolab), on the same file system, so that the
    # two differ only in the seccomp work; bench-runtime.sh removes it on exit.
    cold_root = f"/run/isolab-bench-cold-{sfx}"
    engines["isolab-runtime (cold seccomp)"] = [rt, "run", "--root", cold_root, "--trace",
                                                "--id", f"bench-isoc-{sfx}", "--bundle", bundle]
    cold = {"isolab-runtime (cold seccomp)":
            lambda: shutil.rmtree(os.path.join(cold_root, "seccomp-cache"), ignore_errors=True)}
    # Which engines work here (one try each, errors shown).
    for k in list(engines):
        try:
            run_once(engines[k])
        except RunFailed as e:
            print(f"{k}: unusable here ({e})")
            if k.startswith("isolab-runtime"):
                sys.exit(1)
            del engines[k]

    # 1. Headline: no network (every engine gets a new, empty network namespace;
    #    isolab-runtime also brings lo up).
    times, traces = bench("start->exit of /bin/true, no network (new netns, no interfaces)",
                          engines, n, warmup, before=cold)
    print("\n  headline, the same config.json for every runtime (median ratios; lower = "
          "isolab-runtime faster; goal <= 0.50 x crun):")
    print_ratios(times, "isolab-runtime", ["crun", "runc"])
    print_ratios(times, "isolab-runtime (cold seccomp)", ["crun", "runc"])
    print_ratios(times, "isolab-runtime (flags)", ["crun", "runc"])
    if "crun" in times:
        r = statistics.median(times["isolab-runtime"]) / statistics.median(times["crun"])
        print(f"  goal median <= 0.50 x crun: {'MET' if r <= 0.50 else 'NOT met'} ({r:.2f})")
    print_phases("no network, isolab-runtime (run --bundle)", traces["isolab-runtime"])

    # 1a. The same, each engine alone, back to back (no other engine between two of
    #     its runs): what a loop of one runtime sees. An engine that writes pids to v1
    #     cgroup.procs files keeps the kernel's threadgroup lock primed with its own
    #     runs here, whoever ran before it in the interleaved set.
    ns = max(10, n // 2)
    warm = {k: v for k, v in engines.items() if k not in cold}
    stimes = solo("the same, each runtime alone, back to back", warm, ns, warmup)
    print_ratios(stimes, "isolab-runtime", ["crun", "runc"], " (alone)")

    # 1b. The same, cold: with back-to-back runs the v1 cgroup attach (writing
    #     cgroup.procs takes cgroup_threadgroup_rwsem for writing, which waits for an
    #     RCU grace period unless another attach just did) is mostly free; a
    #     stand-alone start pays it. Every engine attaches, so every engine pays.
    nc = max(10, n // 4)
    ctimes, ctraces = bench("the same, cold starts (stand-alone: idle before each run)",
                            engines, nc, 1, idle=0.2, before=cold)
    print_ratios(ctimes, "isolab-runtime", ["crun", "runc"], " (cold)")
    print_phases("no network, cold, isolab-runtime (run --bundle)", ctraces["isolab-runtime"])

    # 2. Bridge networking: ours does veth + IPAM + NAT; runc/crun have no built-in
    #    bridge (that is a CNI caller's job), so they run the same bundle: netns only.
    nb = max(10, n // 4)
    bengines = {"isolab-runtime --network bridge":
                [rt, "run", "--trace", "--network", "bridge", "--id", f"bench-isonet-{sfx}",
                 "--readonly", root, "--", "/bin/true"]}
    for k in ("runc", "crun"):
        if k in engines:
            bengines[f"{k} (netns only)"] = engines[k]
    print("\nNote on the bridge comparison: isolab-runtime --network bridge creates a veth pair "
          "on bridge isolab0,\nleases an address (file-locked IPAM), sets the default route "
          "and ensures the NAT rule, through\nDebian's CNI plugins (/usr/lib/cni), and tears it "
          "down after exit. runc and crun have no built-in\nbridge: they only create an empty "
          "network namespace (the same bundle as above). Not like for like;\nreported "
          "separately, not as the headline.")
    try:
        btimes, btraces = bench("start->exit of /bin/true, bridge network (ours) vs netns only "
                                "(theirs)", bengines, nb, max(2, warmup // 2))
    except RunFailed as e:
        print(f"  bridge benchmark failed: {e}")
        sys.exit(1)
    print_ratios(btimes, "isolab-runtime --network bridge", ["crun (netns only)", "runc (netns only)"])
    print("  bridge cost over no network, isolab-runtime: "
          f"{(statistics.median(btimes['isolab-runtime --network bridge']) - statistics.median(times['isolab-runtime (flags)'])) * 1e3:+.2f} ms (median difference across the two sets)")
    print_phases("bridge network, isolab-runtime", btraces["isolab-runtime --network bridge"])


if __name__ == "__main__":
    try:
        main()
    except RunFailed as e:
        print(f"benchmark failed: {e}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
