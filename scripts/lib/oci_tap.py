#!/usr/bin/env python3
"""TAP reading for scripts/oci-validation.sh (runtime-tools validation programs).

  oci_tap.py row NAME STDOUT_FILE STDERR_FILE EXIT_CODE TIMED_OUT TIMEOUT_S
      print one TSV row: program passed failed skipped status first_failure_reason
  oci_tap.py summary TSV_FILE
      print the table of a TSV written from such rows, and the totals

Only the program's own TAP stream is counted: test lines at column 0
("ok N - desc", "not ok N - desc", "# SKIP"/"# TODO" directives), the plan
("1..N", "1..0 # SKIP why") and "Bail out!". For failure details we read the
diagnostics: YAML blocks ("  ---" ... "  ...", indented; runtime-tools writes them
as JSON, which is also YAML) and "# " comment lines after a test line (the cgroup
programs: "# expect: X, actual: Y"). The runtimetest TAP that a program embeds in a
diagnostic's "stdout" is not counted, only searched for the first inner "not ok".

Status, first match wins:
  timeout  killed by the time limit
  fail     a "not ok"; or a diagnostics block with an "error" that belongs to no
           test line (the lifecycle programs, e.g. hooks and prestart, print "1..0"
           and report a failure only that way; counted as one failed test); or
           "Bail out!"; or a non-zero exit after util.Fatal of a spec error (stderr
           ends with the "Refer to: .../runtime-spec/..." link: the *_fail programs
           report a runtime that accepted an invalid config that way; counted as one
           failed test)
  crash    any other non-zero exit (reason: the last informative stderr line)
  skip     "1..0 # SKIP why"
  pass     exit 0 with no test line at all: a lifecycle run without an error
           diagnostic, or a *_fail program whose runtime refused the bad config as
           it must. The reason column then carries a note and the runtime's last
           stderr line, since a runtime that refuses everything "passes" those
  fail     fewer tests than the plan announced
  skip     every test skipped
  pass     otherwise
"""
import json
import re
import sys

COMMENT_RE = re.compile(r"^#\s?(.*)$")
TEST_RE = re.compile(r"^(not ok|ok)\b\s*(\d*)\s*(?:-\s*)?(.*)$")
DIRECTIVE_RE = re.compile(r"\s*#\s*(skip|todo)\S*\s*(.*)$", re.IGNORECASE)
PLAN_RE = re.compile(r"^1\.\.(\d+)\s*(?:#\s*(.*))?$")
YAML_START_RE = re.compile(r"^(\s+)---\s*$")
YAML_END_RE = re.compile(r"^\s+\.\.\.\s*$")
# Runtime log lines (runc/crun logfmt): keep the message only.
LOGFMT_MSG_RE = re.compile(r'\blevel=\w+\s+msg="((?:[^"\\]|\\.)*)"')
# stderr lines that say nothing on their own: the Go error wrapper, spec references,
# the suite's own cleanup noise (util.Runtime.Clean: "Clean: Delete: exit status 1").
UNINFORMATIVE_RE = re.compile(r"^(exit status \d+|Refer to: \S+|signal: \w+.*|Clean: .*)$")
MAX_REASON = 300


def clean(text):
    """One line, no tabs, bounded length (it goes into a TSV cell)."""
    text = re.sub(r"\s+", " ", str(text)).strip()
    return text if len(text) <= MAX_REASON else text[: MAX_REASON - 3] + "..."


def parse_yaml(lines):
    text = "\n".join(lines)
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        import yaml  # python3-yaml, if installed; runtime-tools emits JSON anyway

        return yaml.safe_load(text)
    except Exception:  # noqa: BLE001 - any failure: keep the raw text
        return text


def parse_tap(text):
    """Return (tests, plan, bail, orphans). tests: dicts with ok, num, desc,
    directive, directive_reason and yaml (the test's diagnostics block, or None);
    orphans: the diagnostics blocks that belong to no test line."""
    items, plan, bail = [], None, None  # items: tests and YAML blocks, in order
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        m = YAML_START_RE.match(line)
        if m:
            indent = len(m.group(1))
            body = []
            i += 1
            while i < len(lines) and not YAML_END_RE.match(lines[i]):
                body.append(lines[i][indent:])
                i += 1
            items.append(("yaml", parse_yaml(body)))
        elif TEST_RE.match(line):
            m = TEST_RE.match(line)
            rest = m.group(3)
            directive = directive_reason = None
            d = DIRECTIVE_RE.search(rest)
            if d:
                directive, directive_reason = d.group(1).upper(), d.group(2)
                rest = rest[: d.start()]
            items.append(("test", {
                "ok": m.group(1) == "ok",
                "num": m.group(2) or "?",
                "desc": rest.strip(),
                "directive": directive,
                "directive_reason": directive_reason,
                "yaml": None,
                "comments": [],
            }))
        elif COMMENT_RE.match(line):
            items.append(("comment", COMMENT_RE.match(line).group(1)))
        elif PLAN_RE.match(line):
            pm = PLAN_RE.match(line)
            plan = (int(pm.group(1)), pm.group(2) or "")
        elif line.startswith("Bail out!"):
            bail = line[len("Bail out!"):].strip() or "bailed out"
        i += 1
    # TAP puts a test's YAML block after its test line. util.RuntimeInsideValidate
    # writes it before instead; a stream that opens with a block is read that way.
    blocks = [(k, o) for k, o in items if k != "comment"]
    before = bool(blocks) and blocks[0][0] == "yaml"
    seq = blocks if not before else list(reversed(blocks))
    owner = None
    for kind, obj in seq:
        if kind == "test":
            owner = obj
        elif owner is not None and owner["yaml"] is None:
            owner["yaml"] = obj
    owner = None
    for kind, obj in items:  # comment lines belong to the test line above them
        if kind == "test":
            owner = obj
        elif kind == "comment" and owner is not None:
            owner["comments"].append(obj)
    attached = {id(t["yaml"]) for k, t in items if k == "test" and t["yaml"] is not None}
    orphans = [o for k, o in items if k == "yaml" and id(o) not in attached]
    return [o for k, o in items if k == "test"], plan, bail, orphans


def last_stderr_reason(stderr):
    for line in reversed(stderr.splitlines()):
        line = line.strip()
        if not line or UNINFORMATIVE_RE.match(line):
            continue
        m = LOGFMT_MSG_RE.search(line)
        if m:
            return m.group(1).replace('\\"', '"').replace("\\\\", "\\")
        return line
    return ""


def yaml_detail(block, fallback=""):
    """The most telling part of a diagnostics block: an inner runtimetest failure,
    else error and stderr, else `fallback` (the program's stderr), else expected and
    actual values."""
    if not isinstance(block, dict):
        return fallback if block is None else str(block)
    out = block.get("stdout")
    if isinstance(out, str):
        for line in out.splitlines():
            if line.startswith("not ok"):
                return "runtimetest: " + line
    parts = []
    if block.get("error"):
        # drop the spec link that specerror appends: the description names the rule
        parts.append(re.sub(r"\s*Refer to: \S+", "", str(block["error"])))
    if block.get("stderr"):
        parts.append(last_stderr_reason(str(block["stderr"])))
    if parts:
        return ": ".join(p for p in parts if p)
    if fallback:
        return fallback
    if "expected" in block or "actual" in block:
        return "expected %s, got %s" % (json.dumps(block.get("expected")),
                                        json.dumps(block.get("actual")))
    return ""


def row(name, stdout_file, stderr_file, rc, timed_out, timeout_s):
    stdout = open(stdout_file, errors="replace").read()
    stderr = open(stderr_file, errors="replace").read()
    rc, timed_out = int(rc), timed_out == "1"
    tests, plan, bail, orphans = parse_tap(stdout)

    skipped = [t for t in tests if t["directive"] == "SKIP"
               or (t["directive"] == "TODO" and not t["ok"])]
    failed = [t for t in tests if not t["ok"] and t not in skipped]
    passed = [t for t in tests if t["ok"] and t not in skipped]
    # The lifecycle programs (hooks, prestart, poststop, ...) have no test line: they
    # print "1..0" and, only when something went wrong, a block with an "error".
    for block in orphans:
        if isinstance(block, dict) and block.get("error"):
            failed.append({"num": None, "desc": "error diagnostic without test line",
                           "yaml": block})
    # util.Fatal(specerror) prints the spec violation and its "Refer to:" spec link,
    # then exits 1: the *_fail programs report a runtime that accepted a bad config
    # that way. That is a failed check, not a crash.
    spec_violation = rc != 0 and re.search(
        r"^Refer to: \S*opencontainers/runtime-spec", stderr, re.MULTILINE)
    err_reason = last_stderr_reason(stderr)

    if timed_out:
        status = "timeout"
        reason = "timed out after %ss" % timeout_s + (": " + err_reason if err_reason else "")
    elif failed:
        status = "fail"
        t = failed[0]
        comments = "; ".join(c for c in t.get("comments", [])
                             if c and not c.startswith("Refer to:"))
        detail = yaml_detail(t["yaml"], comments or err_reason) or err_reason
        reason = ("#%s " % t["num"] if t["num"] else "") + t["desc"] + (
            ": " + detail if detail else "")
    elif bail:
        status, reason = "fail", "Bail out! " + bail
    elif spec_violation:
        status = "fail"
        failed.append(None)
        reason = "exit %d, spec violation: %s" % (rc, err_reason)
    elif rc != 0:
        status = "crash"
        reason = (err_reason or "exit status %d" % rc)
        if not tests:
            reason = "no TAP test (exit %d): %s" % (rc, reason)
        else:
            reason = "exit %d after %d tests: %s" % (rc, len(tests), reason)
    elif not tests and plan is not None and plan[1].upper().startswith("SKIP"):
        status, reason = "skip", plan[1][4:].strip() or "plan 1..0 # SKIP"
    elif not tests:
        # Exit 0 with nothing to count: a lifecycle program whose run raised no error
        # diagnostic, or a *_fail program whose runtime refused the config as it must
        # (they print nothing then). Say what the runtime said, in case it refused
        # everything (a runtime without `create` "passes" these).
        status = "pass"
        reason = ("note: plan 1..0 and no error diagnostic" if plan is not None
                  else "note: exit 0 without TAP output")
        if err_reason:
            reason += "; runtime said: " + err_reason
    elif plan is not None and plan[0] > len(tests):
        status, reason = "fail", "plan 1..%d but %d tests reported" % (plan[0], len(tests))
    elif not passed:
        status = "skip"
        reason = skipped[0]["directive_reason"] or skipped[0]["desc"]
    else:
        status, reason = "pass", ""

    print("\t".join([name, str(len(passed)), str(len(failed)), str(len(skipped)),
                     status, clean(reason)]))


def summary(tsv):
    rows = []
    with open(tsv) as f:
        for line in f:
            cols = line.rstrip("\n").split("\t")
            if cols[0] == "program" or len(cols) < 6:
                continue
            rows.append(cols)
    width = max([len(r[0]) for r in rows] + [7])
    print("%-*s  %-7s %5s %5s %5s  %s" % (width, "program", "status", "pass", "fail", "skip",
                                          "first failure / skip reason"))
    for r in rows:
        print("%-*s  %-7s %5s %5s %5s  %s" % (width, r[0], r[4], r[1], r[2], r[3],
                                              r[5][:110]))
    by_status = {}
    for r in rows:
        by_status[r[4]] = by_status.get(r[4], 0) + 1
    order = ["pass", "fail", "skip", "crash", "timeout"]
    print()
    print("programs: %d  (%s)" % (len(rows), ", ".join(
        "%s %d" % (s, by_status.get(s, 0)) for s in order)))
    print("tests:    %d passed, %d failed, %d skipped" % tuple(
        sum(int(r[i]) for r in rows) for i in (1, 2, 3)))


if __name__ == "__main__":
    if len(sys.argv) == 8 and sys.argv[1] == "row":
        row(*sys.argv[2:])
    elif len(sys.argv) == 3 and sys.argv[1] == "summary":
        summary(sys.argv[2])
    else:
        sys.exit(__doc__)
