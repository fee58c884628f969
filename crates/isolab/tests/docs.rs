//! The docs' examples, run (docs/testing.md): every whole spec in README.md and docs/*.md
//! passes `isolab check` (a block that is part of a spec is marked ```` ```toml fragment ````
//! and skipped); docs/data.md's experiment is run, exported with its own commands, and its
//! Python examples (pandas, `sqlite3`) run on that export; docs/json.md's program runs
//! through the `json` parser; docs/install.md's tier tables are scripts/tiers.txt's (and
//! `ISOLAB_UPDATE_DOCS=1` rewrites them), and it names every tool scripts/setup.sh pins; the
//! README's tier table names only packages of each tier; docs/environment.md names every
//! variable the code and the scripts read; every relative link leads to a file and heading
//! that exist. Running experiments needs root: without it those tests skip with the reason.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository's root.
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the repository's root")
}

/// `isolab`, with no store chosen by the caller's environment.
fn isolab() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_isolab"));
    cmd.env_remove("ISOLAB_DB");
    cmd
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The README and every page of docs/, in a fixed order.
fn markdown_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .expect("docs/")
        .map(|e| e.expect("docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    files.sort();
    files.insert(0, repo().join("README.md"));
    files
}

/// A fenced code block of a Markdown file.
#[derive(Debug)]
struct Block {
    /// The file, relative to the repository, and the line of the opening fence.
    at: String,
    /// The words after the opening fence: the language, then marks (`fragment`).
    info: Vec<String>,
    /// The block's lines, without the fence's indentation.
    text: String,
}

impl Block {
    fn lang(&self) -> Option<&str> {
        self.info.first().map(String::as_str)
    }

    fn marked(&self, mark: &str) -> bool {
        self.info.iter().skip(1).any(|w| w == mark)
    }
}

/// The fenced code blocks of `path`, and the lines outside them (numbered from 1).
fn parse_markdown(path: &Path) -> (Vec<Block>, Vec<(usize, String)>) {
    let name = path
        .strip_prefix(repo())
        .unwrap_or(path)
        .display()
        .to_string();
    let mut blocks = Vec::new();
    let mut prose = Vec::new();
    // The open block: its first line, its fence's indentation, its info words, its lines.
    let mut open: Option<(usize, usize, Vec<String>, Vec<String>)> = None;
    for (i, line) in read(path).lines().enumerate() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        if open.is_none() {
            if let Some(info) = trimmed.strip_prefix("```") {
                let info = info.split_whitespace().map(str::to_owned).collect();
                open = Some((i + 1, indent, info, Vec::new()));
            } else {
                prose.push((i + 1, line.to_owned()));
            }
        } else if trimmed.trim_end() == "```" {
            let (start, _, info, lines) = open.take().expect("an open block");
            blocks.push(Block {
                at: format!("{name}:{start}"),
                info,
                text: lines.join("\n") + "\n",
            });
        } else if let Some((_, fence_indent, _, lines)) = &mut open {
            let strip = indent.min(*fence_indent);
            lines.push(line[strip..].to_owned());
        }
    }
    assert!(open.is_none(), "{name}: a code block is not closed");
    (blocks, prose)
}

fn blocks_of(path: &Path) -> Vec<Block> {
    parse_markdown(path).0
}

/// Every ```` ```toml ```` block is a whole spec that `isolab check` accepts, or is marked
/// as a fragment.
#[test]
fn every_whole_spec_in_the_docs_passes_check() {
    let dir = tempfile::tempdir().unwrap();
    let (mut checked, mut fragments) = (0, 0);
    let mut failures = Vec::new();
    for file in markdown_files() {
        for block in blocks_of(&file) {
            if block.lang() != Some("toml") {
                continue;
            }
            if block.marked("fragment") {
                fragments += 1;
                continue;
            }
            if !block.text.lines().any(|l| l.trim() == "[experiment]") {
                failures.push(format!(
                    "{}: a ```toml block without [experiment]: mark it ```toml fragment if it \
                     is a part of a spec",
                    block.at
                ));
                continue;
            }
            let spec = dir
                .path()
                .join(format!("{}.toml", block.at.replace(['/', ':', '.'], "-")));
            std::fs::write(&spec, &block.text).unwrap();
            let out = isolab()
                .current_dir(dir.path())
                .arg("--db")
                .arg(dir.path().join("check.db"))
                .arg("check")
                .arg(&spec)
                .output()
                .expect("isolab runs");
            if !out.status.success() {
                failures.push(format!(
                    "{}: isolab check failed: {}",
                    block.at,
                    text(&out.stderr)
                ));
            }
            checked += 1;
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        checked >= 6 && fragments >= 3,
        "{checked} specs checked, {fragments} fragments"
    );
}

// ---- the tiers --------------------------------------------------------------------------

/// A package line of scripts/tiers.txt.
#[derive(Debug)]
struct TierPackage {
    tier: String,
    /// The alternatives, the first that the distribution has is installed.
    packages: Vec<String>,
    need: String,
    why: String,
}

/// The first whitespace-separated word of `s` and the rest after it.
fn word(s: &str) -> (&str, &str) {
    let s = s.trim_start();
    let end = s.find(char::is_whitespace).unwrap_or(s.len());
    (&s[..end], &s[end..])
}

/// scripts/tiers.txt: its package lines, and each tier's description (its `# TIER: …`
/// comment, continued on the comment lines that follow), tiers in their order.
fn tiers() -> (Vec<TierPackage>, Vec<(String, String)>) {
    let mut packages = Vec::new();
    let mut described: Vec<(String, String)> = Vec::new();
    let mut continuing = false;
    for line in read(&repo().join("scripts/tiers.txt")).lines() {
        if let Some(comment) = line.strip_prefix('#') {
            let comment = comment.trim();
            let (first, rest) = word(comment);
            let named = first
                .strip_suffix(':')
                .filter(|t| !t.is_empty() && t.chars().all(|c| c.is_ascii_lowercase()));
            if let Some(tier) = named {
                described.push((tier.to_owned(), rest.trim().to_owned()));
                continuing = true;
            } else if continuing {
                let last = described.last_mut().expect("a tier described");
                last.1 = format!("{} {comment}", last.1);
            }
            continue;
        }
        continuing = false;
        if line.trim().is_empty() {
            continue;
        }
        let (tier, rest) = word(line);
        let (alternatives, rest) = word(rest);
        let (need, why) = word(rest);
        packages.push(TierPackage {
            tier: tier.to_owned(),
            packages: alternatives.split('|').map(str::to_owned).collect(),
            need: need.to_owned(),
            why: why.trim().to_owned(),
        });
    }
    let order: Vec<&str> = packages.iter().fold(Vec::new(), |mut seen, p| {
        if !seen.contains(&p.tier.as_str()) {
            seen.push(&p.tier);
        }
        seen
    });
    let descriptions = order
        .iter()
        .map(|t| {
            let d = described
                .iter()
                .find(|(name, _)| name == t)
                .unwrap_or_else(|| panic!("scripts/tiers.txt: no `# {t}: …` comment"));
            ((*t).to_owned(), d.1.clone())
        })
        .collect();
    (packages, descriptions)
}

const TIERS_START: &str = "<!-- tiers: generated from scripts/tiers.txt";
const TIERS_END: &str = "<!-- end of tiers -->";

/// The tables of docs/install.md between its markers, from scripts/tiers.txt.
fn tier_tables() -> String {
    let (packages, tiers) = tiers();
    let mut out = String::from("\n");
    for (tier, description) in tiers {
        let mut chars = description.chars();
        let description: String = chars
            .next()
            .map(|c| c.to_uppercase().chain(chars).collect())
            .unwrap_or_default();
        out += &format!("### `{tier}`\n\n{description}\n\n");
        out += "| Debian package | need | what it is for |\n|---|---|---|\n";
        for p in packages.iter().filter(|p| p.tier == tier) {
            let names: Vec<String> = p.packages.iter().map(|n| format!("`{n}`")).collect();
            out += &format!(
                "| {} | {} | {} |\n",
                names.join(" or "),
                p.need,
                p.why.replace('|', "\\|")
            );
        }
        out += "\n";
    }
    out
}

/// docs/install.md's tier tables are scripts/tiers.txt's; `ISOLAB_UPDATE_DOCS=1`
/// writes them.
#[test]
fn install_tables_are_the_tiers_of_setup() {
    let path = repo().join("docs/install.md");
    let doc = read(&path);
    let start = doc
        .find(TIERS_START)
        .and_then(|i| doc[i..].find('\n').map(|j| i + j + 1))
        .expect("docs/install.md has the tiers' start marker");
    let end = doc[start..]
        .find(TIERS_END)
        .map(|j| start + j)
        .expect("docs/install.md has the tiers' end marker");
    let expected = tier_tables();
    if std::env::var_os("ISOLAB_UPDATE_DOCS").is_some() {
        let updated = format!("{}{expected}{}", &doc[..start], &doc[end..]);
        std::fs::write(&path, updated).unwrap();
        eprintln!("wrote the tier tables of {}", path.display());
        return;
    }
    assert!(
        doc[start..end] == expected,
        "docs/install.md's tier tables differ from scripts/tiers.txt: run this test with \
         ISOLAB_UPDATE_DOCS=1 to write them; expected:\n{expected}"
    );
}

/// The rows of the first Markdown table after the heading `heading` in `doc`: each row's
/// cells, trimmed (the header and separator rows left out).
fn table_after(doc: &str, heading: &str) -> Vec<Vec<String>> {
    let from = doc
        .find(heading)
        .unwrap_or_else(|| panic!("no heading {heading:?}"));
    doc[from..]
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2)
        .map(|l| {
            l.trim()
                .trim_matches('|')
                .split(" | ")
                .map(|c| c.trim().to_owned())
                .collect()
        })
        .collect()
}

/// The words inside single backticks in `cell`.
fn code_spans(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// The README's summary of the tiers names every tier, and in each only packages of
/// that tier (all of them for `quickstart`).
#[test]
fn the_readme_tier_table_names_packages_of_each_tier() {
    let (packages, tiers) = tiers();
    let rows = table_after(&read(&repo().join("README.md")), "## Two commands");
    let mut seen = Vec::new();
    for row in &rows {
        let tier = code_spans(&row[0]).concat();
        assert!(
            tiers.iter().any(|(t, _)| *t == tier),
            "README: tier row `{tier}` is not a tier of scripts/tiers.txt"
        );
        let of_tier: BTreeSet<&str> = packages
            .iter()
            .filter(|p| p.tier == tier)
            .flat_map(|p| p.packages.iter().map(String::as_str))
            .collect();
        let named = code_spans(&row[1]);
        for name in &named {
            assert!(
                of_tier.contains(name.as_str()),
                "README: `{name}` is not a package of tier {tier} in scripts/tiers.txt"
            );
        }
        if tier == "quickstart" {
            for p in &of_tier {
                assert!(
                    named.iter().any(|n| n == p),
                    "README: the quickstart row misses {p}"
                );
            }
        }
        seen.push(tier);
    }
    let all: Vec<String> = tiers.into_iter().map(|(t, _)| t).collect();
    assert_eq!(seen, all, "README: the tier table's rows");
}

/// A tool `scripts/setup.sh` installs beyond Debian's packages: its tier, its name and
/// every version it may pin (with the packages released in step with it).
#[derive(Debug)]
struct PinnedTool {
    tier: String,
    names: Vec<String>,
    versions: Vec<String>,
}

/// The `pip_venv`, `cargo_install` and `go_install` calls inside `if has_tier TIER; then`
/// blocks of scripts/setup.sh, with the values of the `$VARIABLE`s they pass.
fn pinned_tools() -> Vec<PinnedTool> {
    let script = read(&repo().join("scripts/setup.sh"));
    let mut assigned: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in script.lines() {
        for part in line.split([';', ' ']) {
            if let Some((var, value)) = part.trim().split_once('=') {
                if var.ends_with("_VERSION") && !value.is_empty() && !value.starts_with('$') {
                    assigned
                        .entry(var.to_owned())
                        .or_default()
                        .push(value.to_owned());
                }
            }
        }
    }
    let mut tools = Vec::new();
    let mut tier: Option<String> = None;
    for line in script.lines() {
        let trimmed = line.trim();
        if let Some(t) = trimmed
            .strip_prefix("if has_tier ")
            .and_then(|r| r.strip_suffix("; then"))
        {
            tier = (!t.contains(' ')).then(|| t.to_owned());
            continue;
        }
        if line == "fi" {
            tier = None;
            continue;
        }
        let Some(tier) = &tier else { continue };
        let words: Vec<&str> = trimmed.split_whitespace().collect();
        let value = |w: &str| -> Vec<String> {
            match w.trim_matches('"').strip_prefix('$') {
                Some(var) => assigned.get(var).cloned().unwrap_or_default(),
                None => vec![w.to_owned()],
            }
        };
        let tool = match words.as_slice() {
            ["pip_venv", name, version, extras @ ..] => PinnedTool {
                tier: tier.clone(),
                names: std::iter::once(*name)
                    .chain(extras.iter().copied())
                    .map(str::to_owned)
                    .collect(),
                versions: value(version),
            },
            ["cargo_install", name, version, ..] => PinnedTool {
                tier: tier.clone(),
                names: vec![(*name).to_owned()],
                versions: value(version),
            },
            ["go_install", name, _module, version] => PinnedTool {
                tier: tier.clone(),
                names: vec![(*name).to_owned()],
                versions: value(version),
            },
            _ => continue,
        };
        assert!(!tool.versions.is_empty(), "setup.sh: {trimmed}: no version");
        tools.push(tool);
    }
    tools
}

/// How a version appears in the docs: a Go pseudo-version `v0.0.0-YYYYMMDDhhmmss-hash` as
/// its date, `YYYY-MM-DD`; any other as it is.
fn as_documented(version: &str) -> String {
    match version.strip_prefix("v0.0.0-") {
        Some(rest) if rest.len() >= 8 && rest[..8].bytes().all(|b| b.is_ascii_digit()) => {
            format!("{}-{}-{}", &rest[..4], &rest[4..6], &rest[6..8])
        }
        _ => version.to_owned(),
    }
}

/// docs/install.md names every tool scripts/setup.sh installs beyond Debian's packages,
/// in its tier, with every version it may pin.
#[test]
fn install_names_every_tool_setup_pins() {
    let tools = pinned_tools();
    assert!(tools.len() >= 8, "{tools:?}");
    let rows = table_after(
        &read(&repo().join("docs/install.md")),
        "## Beyond Debian packages",
    );
    for tool in &tools {
        let row = rows
            .iter()
            .find(|r| {
                code_spans(&r[0]).concat() == tool.tier
                    && tool.names.iter().all(|n| r[1].contains(n.as_str()))
            })
            .unwrap_or_else(|| {
                panic!(
                    "docs/install.md: no row of tier `{}` names {:?} under \"Beyond Debian \
                     packages\"",
                    tool.tier, tool.names
                )
            });
        for version in &tool.versions {
            let shown = as_documented(version);
            assert!(
                row[2].contains(&shown),
                "docs/install.md: {:?} is at {shown} in scripts/setup.sh, the doc says {:?}",
                tool.names,
                row[2]
            );
        }
    }
}

// ---- the examples that run --------------------------------------------------------------

/// Tests that run experiments, one at a time.
static EXPERIMENTS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Where `scripts/setup.sh test` installs pandas.
const PANDAS_PYTHON: &str = "/opt/isolab/pandas/bin/python";

/// Whether `program` runs (`program --version`).
fn runs(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The one whole spec of `doc` whose `[experiment]` is named `name`.
fn spec_named(doc: &Path, name: &str) -> String {
    let wanted = format!("name = \"{name}\"");
    let found: Vec<Block> = blocks_of(doc)
        .into_iter()
        .filter(|b| b.lang() == Some("toml") && b.text.lines().any(|l| l.trim() == wanted))
        .collect();
    assert_eq!(found.len(), 1, "{}: specs named {name}", doc.display());
    found[0].text.clone()
}

/// Runs the `isolab …` lines of the ```` ```sh ```` block of `doc` that mentions
/// `mentions`, in `dir`, as the doc writes them (`sudo ` dropped: the test runs as root;
/// comments after ` #` dropped); returns each command's output.
fn run_doc_commands(doc: &Path, mentions: &str, dir: &Path) -> Vec<(String, Output)> {
    let blocks: Vec<Block> = blocks_of(doc)
        .into_iter()
        .filter(|b| b.lang() == Some("sh") && b.text.contains(mentions))
        .collect();
    assert_eq!(
        blocks.len(),
        1,
        "{}: sh blocks with {mentions}",
        doc.display()
    );
    let mut outputs = Vec::new();
    for line in blocks[0].text.lines() {
        let line = line.split(" #").next().unwrap_or(line).trim();
        let line = line.strip_prefix("sudo ").unwrap_or(line);
        let Some(args) = line.strip_prefix("isolab ") else {
            continue;
        };
        let out = isolab()
            .current_dir(dir)
            .args(args.split_whitespace())
            .output()
            .expect("isolab runs");
        assert!(
            out.status.success(),
            "{}: `{line}` failed\nstdout {}\nstderr {}",
            blocks[0].at,
            text(&out.stdout),
            text(&out.stderr)
        );
        outputs.push((args.to_owned(), out));
    }
    assert!(!outputs.is_empty(), "{}: no isolab command", blocks[0].at);
    outputs
}

/// The right to run `doc`'s experiment, whose command runs `program`: this test's turn
/// among those that run experiments, or `None` (after a skip with the reason) when not
/// root or `program` is missing (`install` says how to get it).
fn experiment_turn(
    doc: &str,
    program: &str,
    install: &str,
) -> Option<std::sync::MutexGuard<'static, ()>> {
    let turn = EXPERIMENTS.lock().unwrap_or_else(|e| e.into_inner());
    if !is_root() {
        isolab_skip::skip(format!(
            "running {doc}'s experiment creates cgroups: it needs root"
        ));
        return None;
    }
    if !runs(program) {
        isolab_skip::skip(format!("{program} is not installed ({install})"));
        return None;
    }
    Some(turn)
}

/// docs/data.md's experiment, run and exported with the doc's own commands, and its
/// Python examples (pandas, then sqlite3) on that export.
#[test]
fn the_data_examples_load_a_real_export() {
    let Some(_turn) = experiment_turn(
        "docs/data.md",
        "sysbench",
        "scripts/setup.sh quickstart installs it",
    ) else {
        return;
    };
    if !Path::new(PANDAS_PYTHON).exists() {
        isolab_skip::skip(format!(
            "{PANDAS_PYTHON} is missing: pandas is not installed (scripts/setup.sh test \
             installs it into /opt/isolab/pandas)"
        ));
        return;
    }
    let doc = repo().join("docs/data.md");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("demo.toml"), spec_named(&doc, "demo")).unwrap();
    run_doc_commands(&doc, "isolab run demo.toml", dir.path());
    for file in ["isolab.db", "demo.csv", "demo.json"] {
        assert!(
            dir.path().join(file).exists(),
            "no {file} after the commands"
        );
    }
    let python: Vec<Block> = blocks_of(&doc)
        .into_iter()
        .filter(|b| b.lang() == Some("python"))
        .collect();
    assert_eq!(
        python.len(),
        2,
        "docs/data.md: a pandas and an sqlite3 example"
    );
    let mut printed = Vec::new();
    for (i, block) in python.iter().enumerate() {
        let script = dir.path().join(format!("example-{i}.py"));
        std::fs::write(&script, &block.text).unwrap();
        let out = Command::new(PANDAS_PYTHON)
            .arg(&script)
            .current_dir(dir.path())
            .output()
            .expect("python runs");
        let stdout = text(&out.stdout);
        assert!(
            out.status.success(),
            "{}: the example failed\nstdout {stdout}\nstderr {}",
            block.at,
            text(&out.stderr)
        );
        eprintln!("{}:\n{stdout}", block.at);
        printed.push(stdout);
    }
    assert!(
        printed[0].contains("quota") && printed[0].contains("quota against shared:"),
        "{}",
        printed[0]
    );
    let runs_shown = printed[1]
        .lines()
        .filter(|l| l.contains("throttled"))
        .count();
    assert_eq!(runs_shown, 6, "3 counted runs of 2 cells: {}", printed[1]);
}

/// docs/json.md's program, measured through the `json` parser with the doc's commands.
#[test]
fn the_json_parser_example_runs() {
    let Some(_turn) = experiment_turn("docs/json.md", "python3", "Debian's python3") else {
        return;
    };
    let doc = repo().join("docs/json.md");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("my-program.toml"),
        spec_named(&doc, "my-program"),
    )
    .unwrap();
    let outputs = run_doc_commands(&doc, "isolab run my-program.toml", dir.path());
    let (_, export) = outputs
        .iter()
        .find(|(line, _)| line.starts_with("export "))
        .expect("the doc exports the experiment");
    let csv = text(&export.stdout);
    for metric in ["hash_time,s,lower,", "hash_rate,MiB/s,higher,"] {
        assert!(csv.contains(metric), "no {metric} in the export:\n{csv}");
    }
}

// ---- links and variables ----------------------------------------------------------------

/// GitHub's anchor for a heading: lower case, letters, digits, `-` and `_` kept, spaces
/// as `-`, everything else dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            '-' | '_' => Some(c),
            c if c.is_alphanumeric() => Some(c),
            _ => None,
        })
        .flat_map(char::to_lowercase)
        .collect()
}

/// The anchors of a Markdown file's headings (GitHub numbers repeated ones).
fn anchors(path: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (_, line) in parse_markdown(path).1 {
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if hashes == 0 || hashes > 6 || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(&line[hashes..]);
        let mut anchor = base.clone();
        let mut n = 0;
        while out.contains(&anchor) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
        out.insert(anchor);
    }
    out
}

/// The targets of `[text](target)` links in `line`, outside inline code.
fn link_targets(line: &str) -> Vec<String> {
    let prose: String = line
        .split('`')
        .enumerate()
        .filter(|(i, _)| i % 2 == 0)
        .map(|(_, part)| part)
        .collect::<Vec<_>>()
        .join(" ");
    prose
        .match_indices("](")
        .filter_map(|(i, _)| {
            let rest = &prose[i + 2..];
            rest.find(')').map(|end| rest[..end].to_owned())
        })
        .collect()
}

/// Every relative link of the README and docs/ leads to a file that exists, and an
/// anchor to a heading of that file.
#[test]
fn links_in_the_docs_resolve() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in markdown_files() {
        let dir = file.parent().expect("a directory");
        for (n, line) in parse_markdown(&file).1 {
            for target in link_targets(&line) {
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                let (path, anchor) = target.split_once('#').unwrap_or((&target, ""));
                let linked = if path.is_empty() {
                    file.clone()
                } else {
                    dir.join(path)
                };
                let name = file.strip_prefix(repo()).unwrap_or(&file).display();
                let at = format!("{name}:{n}: {target}");
                if !linked.exists() {
                    broken.push(format!("{at}: no such file"));
                } else if !anchor.is_empty()
                    && linked.extension().is_some_and(|e| e == "md")
                    && !anchors(&linked).contains(anchor)
                {
                    broken.push(format!("{at}: no such heading"));
                }
                checked += 1;
            }
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
    assert!(checked >= 50, "{checked} links");
}

/// Every `.rs` file below `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The names `ISOLAB_…` in `text`, starting right after one of `before`.
fn isolab_names(text: &str, before: &[&str]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for prefix in before {
        for (i, _) in text.match_indices(&format!("{prefix}ISOLAB_")) {
            let name: String = text[i + prefix.len()..]
                .chars()
                .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            out.insert(name);
        }
    }
    out
}

/// docs/environment.md names every environment variable isolab's code reads (the
/// `ISOLAB_…` names its Rust code quotes, and what `var`/`var_os` read outside build
/// scripts) and every `ISOLAB_…` variable of the scripts, the Makefile and CI.
#[test]
fn the_environment_page_names_every_variable() {
    let mut files = Vec::new();
    rust_files(&repo().join("crates"), &mut files);
    let mut names = BTreeSet::new();
    for file in &files {
        let code = read(file);
        names.extend(isolab_names(&code, &["\""]));
        if file.file_name().is_some_and(|n| n == "build.rs")
            || !file.components().any(|c| c.as_os_str() == "src")
        {
            continue;
        }
        for call in ["var_os(\"", "var(\""] {
            for (i, _) in code.match_indices(call) {
                let rest = &code[i + call.len()..];
                if let Some(end) = rest.find('"') {
                    names.insert(rest[..end].to_owned());
                }
            }
        }
    }
    let mut scripts = vec![repo().join("Makefile"), repo().join(".ci/run")];
    for dir in ["scripts", "scripts/lib"] {
        for entry in std::fs::read_dir(repo().join(dir)).unwrap().flatten() {
            if entry.path().extension().is_some_and(|e| e == "sh") {
                scripts.push(entry.path());
            }
        }
    }
    for script in &scripts {
        names.extend(isolab_names(&read(script), &["$", "${"]));
    }
    assert!(
        names.contains("ISOLAB_DB") && names.contains("NO_COLOR"),
        "{names:?}"
    );
    let page = read(&repo().join("docs/environment.md"));
    let missing: Vec<&String> = names
        .iter()
        .filter(|n| !page.contains(&format!("`{n}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/environment.md does not name {missing:?}"
    );
}
