#!/usr/bin/env python3
"""The state of the house: large files, long functions, circles inside a crate.

Usage: scripts/house.py [--check] [--max-file N] [--max-fn N] [ROOT]

--check exits 1 when any part lists something (a test in `make test` runs it).

Prints four parts, each a heading and its rows (an empty part says "none"):

(a) files over --max-file non-test lines (1,000 by default), largest first;
(b) functions over --max-fn lines (200 by default), longest first, with file and name;
(c) circles: within one crate, the files that import each other directly or through a
    cycle (strongly connected components of more than one file), with their edges;
(d) imports in isolab-lab that run from a lower module back up into the runner.

How it counts (a reader should be able to re-count by hand):

- Files: every .rs file below crates/ (src/, examples/, benches/, build.rs) except test
  code: files below a tests/ directory, and files that a `#[cfg(test)] mod NAME;`
  declaration brings in (runner/tests.rs and the like). A file's non-test lines are its
  physical lines (blank lines and comments included) less the lines of every item
  behind `#[cfg(test)]` (usually the `mod tests { ... }` at the end: from the attribute
  line to the closing brace). Items behind `#[cfg(any(test, feature = "testing"))]`
  count: they build outside tests.
- Functions: every `fn` with a body, in the non-test code of those files, from the line
  of its `fn` keyword to the line of its closing brace, both included (doc comments and
  attributes above it do not count; a closure or nested fn counts in its outer fn, and
  a nested fn also on its own). Its name is `Type::name` inside an `impl` or `trait`.
- The module graph of a crate target (lib.rs, main.rs, each src/bin/*): one node per
  file that a `mod NAME;` declaration reaches from the target's root (inline
  `mod NAME { ... }` blocks belong to their file; test modules are not in it). An edge
  A -> B when A's non-test code names a path into B: `use crate::...`, `use super::...`,
  `use self::...`, a `use` or path whose first segment is a child module declared in A,
  and the same `crate::x::y` / `super::x` / `self::x` paths in expressions and types. A
  path is resolved module by module as far as modules go (`crate::a::b::Item` is an
  edge to the file of `a::b`; `use super::*` to the parent's file); a name that a module
  re-exports with `pub use` is followed to the file that defines it.
- `mod` declarations give only the parent/child links that `super::` and child paths
  resolve along, and no edge is drawn from a module down into its own descendants:
  a parent (lib.rs, a mod.rs) that declares, re-exports or calls its children is their
  facade, as a directory is of its files. A child that uses its parent (`super::X`) is
  an edge; so two children of one parent that use each other are a circle, and so is a
  child whose `super::` import leads through a sibling back to itself.
- A circle is a strongly connected component (Tarjan) of more than one file; each of its
  files is printed with its edges inside the circle and the line of the first path.
- The runner of isolab-lab is runner/mod.rs and the files of runner/ that define or
  extend `Runner` (`impl Runner`); a lower module is any other file that the runner
  reaches through the graph. An import runs up when it goes from a lower file into a
  runner file, or from a file outside runner/ into runner/.

Against issue 39 (counted before this script): (a) and (b) are the same, file for file
and line for line. (c) finds ten circles where the issue counts six: it follows paths
in expressions and types and re-exports (`crate::PROCESS_LEAF` in cgroups' tree.rs,
`crate::Recipe` in isolab-image's manifest.rs, `crate::FleetId` in the store's error.rs,
`crate::reservation::Reservation` in isolab-lab's neighbour/level.rs), which adds four
small circles the issue does not list; and it prints isolab-lab's runner/platform/
storage knot as one component of 26 files plus the 3-file runner/finished <-> stack one
where the issue speaks of a 9-file circle and a platform one. (d) counts 4 imports where
the issue counts 5 (its rule is not written down).
"""
import argparse
import os
import re
import sys
from collections import defaultdict

# --- lexing -------------------------------------------------------------------------


def blank(text):
    """Returns text with comments, string and char literals replaced by spaces (newlines
    kept), so that braces and paths can be found with plain scans."""
    out = list(text)
    i, n = 0, len(text)

    def wipe(a, b):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = text[i]
        if c == "/" and text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            wipe(i, j)
            i = j
        elif c == "/" and text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            wipe(i, j)
            i = j
        elif c in "rb" and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'(br|r)(#*)"', text[i:i + 260])
            if m:
                close = '"' + m.group(2)
                j = text.find(close, i + m.end())
                j = n if j < 0 else j + len(close)
                wipe(i, j)
                i = j
            elif text.startswith('b"', i) or text.startswith("b'", i):
                i += 1  # the literal itself is handled on the next turn
            else:
                i += 1
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            wipe(i, j + 1)
            i = j + 1
        elif c == "'":
            if i + 1 < n and text[i + 1] == "\\":
                j = text.find("'", i + 2)
                if text[i + 2:i + 3] == "'":  # '\''
                    j = i + 3
                wipe(i, j + 1)
                i = j + 1
            elif i + 2 < n and text[i + 2] == "'":
                wipe(i, i + 3)
                i += 3
            else:
                i += 1  # a lifetime
        else:
            i += 1
    return "".join(out)


def match_brace(code, open_at):
    """Index of the brace closing the one at open_at (code is blanked)."""
    depth = 0
    for j in range(open_at, len(code)):
        ch = code[j]
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(code) - 1


def item_end(code, start):
    """End (inclusive) of the item starting at start: its matching brace, or its `;`
    when a `;` comes before any brace outside parentheses and brackets."""
    depth = 0
    for j in range(start, len(code)):
        ch = code[j]
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif depth == 0 and ch == ";":
            return j
        elif depth == 0 and ch == "{":
            return match_brace(code, j)
    return len(code) - 1


CFG_TEST = re.compile(r"#\[cfg\(test\)\]")
ATTR = re.compile(r"\s*#\[[^\]]*\]")
TEST_MOD_DECL = re.compile(r"\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;")


def strip_tests(code):
    """Blanks every item behind #[cfg(test)]; returns (code, removed line numbers as a
    set of 0-based indexes, names of out-of-line test modules)."""
    out = list(code)
    removed, test_mods = set(), []
    for m in list(CFG_TEST.finditer(code)):
        if out[m.start()] == " ":
            continue  # inside an item already removed
        k = m.end()
        while True:
            a = ATTR.match(code, k)
            if not a:
                break
            k = a.end()
        d = TEST_MOD_DECL.match(code, k)
        if d:
            test_mods.append(d.group(1))
        end = item_end(code, k)
        first, last = code.count("\n", 0, m.start()), code.count("\n", 0, end)
        removed.update(range(first, last + 1))
        for j in range(m.start(), end + 1):
            if out[j] != "\n":
                out[j] = " "
    return "".join(out), removed, test_mods


# --- files --------------------------------------------------------------------------


class Source:
    """One .rs file: its text, blanked code without tests, and what that drops."""

    def __init__(self, path, rel):
        self.path, self.rel = path, rel
        with open(path, encoding="utf-8") as f:
            self.text = f.read()
        self.lines = self.text.count("\n") + (0 if self.text.endswith("\n") else 1)
        self.code, removed, self.test_mods = strip_tests(blank(self.text))
        self.counted = self.lines - len([r for r in removed if r < self.lines])
        self.starts = [0] + [i + 1 for i, ch in enumerate(self.code) if ch == "\n"]

    def line_of(self, pos):
        lo, hi = 0, len(self.starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.starts[mid] <= pos:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1


def rust_files(root):
    for base, dirs, files in os.walk(os.path.join(root, "crates")):
        dirs[:] = sorted(d for d in dirs if d not in ("target", ".git"))
        for name in sorted(files):
            if name.endswith(".rs"):
                yield os.path.join(base, name)


# --- functions ----------------------------------------------------------------------

FN = re.compile(r"\bfn\s+(\w+)")
IMPL = re.compile(r"\b(impl|trait)\b")


def blocks_named(src):
    """(start, end, name) of every impl and trait block: `impl X`, `impl T for X`."""
    code, found = src.code, []
    for m in IMPL.finditer(code):
        j = m.end()
        head_end = j
        depth = 0
        while head_end < len(code):
            ch = code[head_end]
            if ch in "(<[":
                depth += 1
            elif ch in ")>]":
                depth -= 1
            elif ch in "{;" and depth <= 0:
                break
            head_end += 1
        if head_end >= len(code) or code[head_end] != "{":
            continue
        head = code[j:head_end]
        head = re.sub(r"\bwhere\b.*", "", head, flags=re.S)
        if " for " in head:
            head = head.split(" for ", 1)[1]
        head = re.sub(r"<.*", "", head.strip(), flags=re.S)
        words = re.findall(r"\w+", head)
        if m.group(1) == "impl":
            name = words[-1] if words else "?"
        else:
            name = words[0] if words else "?"
        found.append((head_end, match_brace(code, head_end), name))
    return found


def functions(src):
    code, blocks, found = src.code, blocks_named(src), []
    for m in FN.finditer(code):
        k, depth = m.end(), 0
        body = None
        while k < len(code):
            ch = code[k]
            if ch in "([":
                depth += 1
            elif ch in ")]":
                depth -= 1
            elif depth == 0 and ch == ";":
                break
            elif depth == 0 and ch == "{":
                body = k
                break
            k += 1
        if body is None:
            continue
        end = match_brace(code, body)
        owner = [b for b in blocks if b[0] < m.start() < b[1]]
        name = m.group(1)
        if owner:
            name = min(owner, key=lambda b: b[1] - b[0])[2] + "::" + name
        first, last = src.line_of(m.start()), src.line_of(end)
        found.append((last - first + 1, name, first))
    return found


# --- module graph -------------------------------------------------------------------

MOD_DECL = re.compile(r"(?:#\[path\s*=\s*\"([^\"]*)\"\]\s*)?"
                      r"(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*([;{])")
USE = re.compile(r"(?<![\w:])use\s+")
PATH = re.compile(r"(?<![\w:])((?:\w+)(?:\s*::\s*\w+)+)")


def mod_decls(src):
    """(path attribute or None, name, inline?, position, end) of the module declarations."""
    # The path attribute is in a string literal, blanked in the code: read it from the
    # text at the same offsets.
    out = []
    for m in re.finditer(r"(?:pub(?:\([^)]*\))?\s+)?\bmod\s+(\w+)\s*([;{])", src.code):
        before = src.text[max(0, m.start() - 200):m.start()]
        pa = re.search(r"#\[path\s*=\s*\"([^\"]*)\"\]\s*$", before)
        inline = m.group(2) == "{"
        end = match_brace(src.code, m.end() - 1) if inline else m.end()
        out.append((pa.group(1) if pa else None, m.group(1), inline, m.start(), end))
    return out


class Crate:
    """One crate target: its files, each with a module path, and the edges between them."""

    def __init__(self, name, root_file, sources):
        self.name, self.sources = name, sources
        self.module_file = {}  # tuple(path) -> rel file
        self.file_module = {}  # rel file -> tuple(path)
        self.inline = {}  # rel file -> [(start, end, name)]
        self.children = defaultdict(set)  # tuple(path) -> child names
        self._walk(root_file, ())

    def _walk(self, path, module):
        rel = self.sources.rel(path)
        if rel in self.file_module or not os.path.exists(path):
            return
        src = self.sources.get(path)
        self.module_file[module] = rel
        self.file_module[rel] = module
        stem = os.path.basename(path)[:-3]
        base = os.path.dirname(path)
        is_dir_owner = stem in ("mod", "lib", "main") or module == ()
        dir_ = base if is_dir_owner else os.path.join(base, stem)
        inline = []
        for pa, name, is_inline, start, end in mod_decls(src):
            if is_inline:
                inline.append((start, end, name))
        self.inline[rel] = inline
        for pa, name, is_inline, start, end in mod_decls(src):
            outer = [n for s, e, n in inline if s < start < e]
            sub = module + tuple(outer)
            self.children[sub].add(name)
            if is_inline:
                self.module_file[sub + (name,)] = rel
                continue
            if pa:
                child = os.path.join(base, pa)
            else:
                d = os.path.join(dir_, *outer)
                child = os.path.join(d, name + ".rs")
                if not os.path.exists(child):
                    child = os.path.join(d, name, "mod.rs")
            self._walk(child, sub + (name,))

    def module_at(self, rel, pos):
        module = self.file_module[rel]
        for s, e, n in sorted(self.inline.get(rel, [])):
            if s < pos < e:
                module = module + (n,)
        return module

    def resolve(self, module, segs, depth=0):
        """The file a path names, from inside `module`, or None when it leaves the crate."""
        if not segs:
            return None
        if segs[0] == "crate":
            cur, rest = (), segs[1:]
        elif segs[0] in ("self", "super"):
            cur, rest = module, segs
            while rest and rest[0] in ("self", "super"):
                if rest[0] == "super":
                    if not cur:
                        return None
                    cur = cur[:-1]
                rest = rest[1:]
        elif segs[0] in self.children.get(module, ()):
            cur, rest = module, segs
        else:
            return None
        for seg in rest:
            if cur + (seg,) in self.module_file:
                cur = cur + (seg,)
                continue
            target = self.reexport(cur, seg, depth)
            if target is not None:
                return target
            break
        return self.module_file.get(cur)

    def reexport(self, module, name, depth):
        """Where a `pub use` of `module` that exports `name` leads, if it does."""
        if depth > 8:
            return None
        rel = self.module_file.get(module)
        if rel is None or self.file_module.get(rel) != module:
            return None
        for path, alias, public in uses(self.sources.get_rel(rel)):
            if public and alias == name:
                return self.resolve(module, path, depth + 1)
        return None

    def edges(self):
        """A -> {B: line of A's first path into B}, without the edges from a module to its
        own descendants (see the header)."""
        found = defaultdict(dict)
        for rel, module in self.file_module.items():
            src = self.sources.get_rel(rel)
            for segs, pos in paths(src):
                here = self.module_at(rel, pos)
                target = self.resolve(here, segs)
                if not target or target == rel:
                    continue
                if self.file_module[target][:len(module)] == module:
                    continue  # down into its own children
                line = src.line_of(pos)
                if line < found[rel].get(target, line + 1):
                    found[rel][target] = line
        return found


def split_top(s, sep=","):
    parts, depth, cur = [], 0, []
    for ch in s:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def expand(tree, prefix=()):
    """(segments, alias) of every leaf of a use tree."""
    tree = tree.strip()
    if tree.startswith("{") and tree.endswith("}"):
        out = []
        for part in split_top(tree[1:-1]):
            out.extend(expand(part, prefix))
        return out
    m = re.match(r"^((?:\w+\s*::\s*)*)(\{.*\}|\*|\w+)(?:\s+as\s+(\w+))?$", tree, re.S)
    if not m:
        return []
    segs = prefix + tuple(s.strip() for s in m.group(1).split("::") if s.strip())
    last = m.group(2)
    if last.startswith("{"):
        return expand(last, segs)
    if last == "*":
        return [(segs, None)]
    if last == "self":
        return [(segs, segs[-1] if segs else None)]
    return [(segs + (last,), m.group(3) or last)]


def uses(src):
    """(segments, alias, public) of every leaf of every `use` in the non-test code."""
    cache = getattr(src, "_uses", None)
    if cache is not None:
        return cache
    out = []
    for m in USE.finditer(src.code):
        end = src.code.find(";", m.end())
        before = src.code[max(0, m.start() - 20):m.start()]
        public = re.search(r"\bpub\s*(\([^)]*\))?\s*$", before) is not None
        for segs, alias in expand(src.code[m.end():end]):
            out.append((segs, alias, public, m.start()))
    src._uses = [(s, a, p) for s, a, p, _ in out]
    src._use_pos = [(s, pos) for s, _, _, pos in out]
    return src._uses


def paths(src):
    """(segments, position) of every path in use statements and in code."""
    uses(src)
    out = list(src._use_pos)
    for m in PATH.finditer(src.code):
        before = src.code[max(0, m.start() - 4):m.start()]
        if re.search(r"\bin\s+$", before):
            continue  # pub(in crate::x)
        segs = tuple(s.strip() for s in m.group(1).split("::"))
        out.append((segs, m.start()))
    return out


class Sources:
    def __init__(self, root):
        self.root, self.by_path = root, {}

    def rel(self, path):
        return os.path.relpath(path, self.root)

    def get(self, path):
        path = os.path.normpath(path)
        if path not in self.by_path:
            self.by_path[path] = Source(path, self.rel(path))
        return self.by_path[path]

    def get_rel(self, rel):
        return self.get(os.path.join(self.root, rel))


def targets(root):
    """(name, root file) of every crate target below crates/."""
    out = []
    crates = os.path.join(root, "crates")
    for crate in sorted(os.listdir(crates)):
        src = os.path.join(crates, crate, "src")
        if os.path.exists(os.path.join(src, "lib.rs")):
            out.append((crate, os.path.join(src, "lib.rs")))
        if os.path.exists(os.path.join(src, "main.rs")):
            out.append((crate + " (bin)", os.path.join(src, "main.rs")))
        bins = os.path.join(src, "bin")
        if os.path.isdir(bins):
            for b in sorted(os.listdir(bins)):
                p = os.path.join(bins, b)
                if b.endswith(".rs"):
                    out.append((crate + " (bin " + b[:-3] + ")", p))
                elif os.path.exists(os.path.join(p, "main.rs")):
                    out.append((crate + " (bin " + b + ")", os.path.join(p, "main.rs")))
    return out


def sccs(nodes, edges):
    """Tarjan's strongly connected components (iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for start in sorted(nodes):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(sorted(comp))
    return out


# --- report -------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("root", nargs="?", default=os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    ap.add_argument("--max-file", type=int, default=1000)
    ap.add_argument("--max-fn", type=int, default=200)
    ap.add_argument("--check", action="store_true",
                    help="exit 1 when any list is not empty (the conventions test runs this)")
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    sources = Sources(root)

    # Out-of-line test modules: the files `#[cfg(test)] mod NAME;` declares.
    all_files = list(rust_files(root))
    test_files = set()
    for path in all_files:
        src = sources.get(path)
        base = os.path.dirname(path)
        stem = os.path.basename(path)[:-3]
        d = base if stem in ("mod", "lib", "main") else os.path.join(base, stem)
        for name in src.test_mods:
            for cand in (os.path.join(d, name + ".rs"), os.path.join(d, name, "mod.rs")):
                test_files.add(os.path.normpath(cand))
    counted = [sources.get(p) for p in all_files
               if os.sep + "tests" + os.sep not in sources.rel(p)
               and os.path.normpath(p) not in test_files]

    print(f"(a) non-test files over {args.max_file:,} lines")
    big = sorted((s for s in counted if s.counted > args.max_file), key=lambda s: -s.counted)
    for s in big:
        print(f"  {s.counted:6,}  {s.rel}")
    print("  none" if not big else f"  ({len(big)} files)")

    print(f"\n(b) functions over {args.max_fn} lines")
    long_fns = []
    for s in counted:
        for n, name, line in functions(s):
            if n > args.max_fn:
                long_fns.append((n, name, f"{s.rel}:{line}"))
    for n, name, where in sorted(long_fns, key=lambda f: (-f[0], f[2])):
        print(f"  {n:6,}  {name}  ({where})")
    print("  none" if not long_fns else f"  ({len(long_fns)} functions)")

    print("\n(c) circles: files of one crate that import each other (directly or in a cycle)")
    graphs, circles = {}, 0
    for name, root_file in targets(root):
        crate = Crate(name, root_file, sources)
        edges = crate.edges()
        graphs[name] = (crate, edges)
        for comp in sccs(crate.file_module.keys(), edges):
            if len(comp) < 2:
                continue
            circles += 1
            prefix = sources.rel(os.path.dirname(root_file))
            short = lambda f: os.path.relpath(f, prefix)
            print(f"  {name} ({prefix}): {len(comp)} files")
            members = set(comp)
            for f in comp:
                inside = sorted((short(t), line) for t, line in edges.get(f, {}).items()
                                if t in members)
                print(f"    {short(f)} -> "
                      + ", ".join(f"{t} (line {line})" for t, line in inside))
    print("  none" if not circles else f"  ({circles} circles)")

    print("\n(d) isolab-lab: imports from a lower module up into the runner")
    up = []
    if "isolab-lab" in graphs:
        crate, edges = graphs["isolab-lab"]
        in_dir = lambda rel: (crate.file_module[rel] or ("",))[0] == "runner"
        extends = re.compile(r"\b(?:impl(?:<[^>]*>)?|struct)\s+Runner\b")
        runner = {f for f in crate.file_module if in_dir(f) and (
            crate.file_module[f] == ("runner",)
            or extends.search(sources.get_rel(f).code))}
        lower, todo = set(), list(runner)
        seen = set(todo)
        while todo:
            f = todo.pop()
            for t in edges.get(f, ()):
                if t not in seen:
                    seen.add(t)
                    todo.append(t)
                if t not in runner and crate.file_module[t] != ():
                    lower.add(t)
        for f in sorted(lower):
            for t in sorted(edges.get(f, ())):
                if t in runner or (in_dir(t) and not in_dir(f)):
                    up.append((f, t, edges[f][t]))
        root_dir = sources.rel(os.path.dirname(dict(targets(root))["isolab-lab"])) + "/"
        short = lambda f: f[len(root_dir):] if f.startswith(root_dir) else f
        print("  the runner: " + ", ".join(sorted(short(f) for f in runner)))
    for f, t, line in up:
        print(f"  {short(f)} -> {short(t)} (line {line})")
    print("  none" if not up else f"  ({len(up)} imports)")
    return 1 if args.check and (big or long_fns or circles or up) else 0


if __name__ == "__main__":
    sys.exit(main())
