//! One file per subcommand; this module dispatches and maps errors to exit codes.

mod advise;
mod bench;
mod calibrate;
mod check;
mod check_kvm;
mod compare;
mod env;
mod export;
mod fleet;
mod gate;
mod gc;
mod image;
pub mod json;
mod list;
mod manual;
mod report;
mod run;
mod show;
mod store;
mod trend;

use anyhow::Result;
use isolab_lab::SpecErrors;

use crate::cli::{Cli, Command, EnvArgs};

/// Documented exit statuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Success = 0,
    Error = 1,
    Invalid = 2,
    FailedCells = 3,
    /// `compare --fail-on worse|changed` found such a point.
    Worse = 4,
    /// `compare --fail-on undecided` found an undecided point (and none worse).
    Undecided = 5,
    /// `gate` refused a reference whose host fingerprint differs.
    Refused = 6,
    Interrupted = 130,
}

impl From<Exit> for std::process::ExitCode {
    fn from(e: Exit) -> Self {
        std::process::ExitCode::from(e as u8)
    }
}

pub fn dispatch(cli: Cli) -> Result<Exit> {
    let db = cli.db;
    COLOR.set(cli.color).expect("dispatch runs once");
    if prints_only(&cli.command) {
        // A reader that closes the pipe early (`isolab show 1 | head`) ends the
        // output, as it does for other Unix tools, instead of a panic on EPIPE.
        // Commands that change the host keep Rust's ignored SIGPIPE, so a closed
        // pipe never kills them before they tear down what they made.
        // SAFETY: setting a signal's disposition to SIG_DFL has no preconditions.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    }
    match cli.command {
        Command::Run(args) => run::run(&db, args),
        Command::BenchStart(args) => bench::bench_start(args),
        Command::Check(args) => check::check(&db, args),
        Command::List(args) => list::list(&db, args),
        Command::Show(args) => show::show(&db, args),
        Command::Export(args) => export::export(&db, args),
        Command::Report(args) => report::report(&db, args),
        Command::Compare(args) => compare::compare(&db, args),
        Command::Advise(args) => advise::advise(&db, args),
        Command::Gate(args) => gate::gate(&db, args),
        Command::Tag(args) => gate::tag(&db, args),
        Command::Trend(args) => trend::trend(&db, args),
        Command::Calibrate(args) => calibrate::calibrate(&db, args),
        Command::Image(args) => image::image(args),
        Command::Store(args) => store::store(args),
        Command::Import { bundle } => store::import(&db, &bundle),
        Command::Fleet(args) => fleet::fleet(&db, args),
        Command::Env(args) => env::env(args),
        Command::Gc(args) => gc::gc(args),
        Command::Completions { shell } => manual::completions(shell),
        Command::Man { dir } => manual::man(dir.as_deref()),
    }
}

/// Whether `command` only reads and prints: nothing on the host or in a store
/// to leave half done if the process ends in the middle of its output.
fn prints_only(command: &Command) -> bool {
    matches!(
        command,
        Command::Check(_)
            | Command::List(_)
            | Command::Show(_)
            | Command::Export(_)
            | Command::Compare(_)
            | Command::Advise(_)
            | Command::Trend(_)
            | Command::Env(EnvArgs {
                check_kvm: false,
                ..
            })
            | Command::Completions { .. }
            | Command::Man { dir: None }
    )
}

/// Invalid specs are exit status 2, everything else 1.
pub fn exit_code_of(err: &anyhow::Error) -> Exit {
    if err.chain().any(|e| e.is::<SpecErrors>()) {
        Exit::Invalid
    } else {
        Exit::Error
    }
}

/// Reads and validates a spec file.
pub fn load_spec(
    path: &std::path::Path,
    host: &isolab_lab::HostFacts,
) -> Result<isolab_lab::ExperimentSpec> {
    use anyhow::Context;
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read spec {}", path.display()))?;
    Ok(isolab_lab::ExperimentSpec::parse(
        isolab_lab::Source::new(path.display().to_string(), text),
        host,
    )?)
}

/// Parses the spec stored with an experiment.
pub fn stored_spec(
    record: &isolab_store::ExperimentRecord,
    host: &isolab_lab::HostFacts,
) -> Result<isolab_lab::ExperimentSpec> {
    let label = format!(
        "stored spec of experiment {} ({})",
        record.id,
        record.spec_path.as_deref().unwrap_or("built-in")
    );
    Ok(isolab_lab::ExperimentSpec::parse(
        isolab_lab::Source::new(label, record.spec_toml.clone()),
        host,
    )?)
}

/// The spec stored with an experiment, parsed as if on a host with every cpu, so that
/// stored data can be analysed on any machine.
pub fn stored_spec_anywhere(
    record: &isolab_store::ExperimentRecord,
) -> Result<isolab_lab::ExperimentSpec> {
    let anywhere = isolab_lab::HostFacts {
        cpus: (0..4096).collect(),
        storage: None,
    };
    stored_spec(record, &anywhere)
}

/// Summary options for stored data: the baseline of its spec and the primary metric
/// of every stored cell (matched by key).
pub fn summary_options(
    data: &isolab_report::ExperimentData,
    all_metrics: bool,
) -> isolab_report::SummaryOptions {
    spec_options(
        data,
        stored_spec_anywhere(&data.record).ok().as_ref(),
        all_metrics,
    )
}

/// [`summary_options`] from the stored spec when it parses (`None`: every metric, no
/// baseline).
pub fn spec_options(
    data: &isolab_report::ExperimentData,
    spec: Option<&isolab_lab::ExperimentSpec>,
    all_metrics: bool,
) -> isolab_report::SummaryOptions {
    match spec {
        Some(s) => isolab_report::SummaryOptions {
            baseline: s.baseline.clone(),
            primary: data
                .cells
                .iter()
                .filter_map(|stored| {
                    s.cells
                        .iter()
                        .find(|c| c.key() == stored.key)
                        .map(|c| (stored.index, c.workload.primary.clone()))
                })
                .collect(),
            all_metrics,
            max_repetitions: Some(s.repetitions.max),
        },
        None => isolab_report::SummaryOptions {
            all_metrics: true,
            ..Default::default()
        },
    }
}

/// The verdict rule of a stored experiment: the default α and its spec's `[experiment]
/// noise` (the default Δ when the stored spec no longer parses).
pub fn stored_rule(record: &isolab_store::ExperimentRecord) -> isolab_stats::VerdictRule {
    spec_rule(stored_spec_anywhere(record).ok().as_ref())
}

/// [`stored_rule`] from the stored spec when it parses.
pub fn spec_rule(spec: Option<&isolab_lab::ExperimentSpec>) -> isolab_stats::VerdictRule {
    spec.map_or_else(isolab_stats::VerdictRule::default, |s| s.verdict_rule())
}

/// Everything the table, JSON and HTML outputs show about `data`, its verdicts decided
/// with its spec's `noise`.
pub fn analyse(data: &isolab_report::ExperimentData, all_metrics: bool) -> isolab_report::Analysis {
    let spec = stored_spec_anywhere(&data.record).ok();
    isolab_report::analyse(
        data,
        spec_options(data, spec.as_ref(), all_metrics),
        &isolab_report::compare::CompareOptions {
            rule: spec_rule(spec.as_ref()),
            ..isolab_report::compare::CompareOptions::default()
        },
    )
}

/// How tables print in a text or Markdown format (`None` for JSON).
pub fn table_style(format: crate::cli::TableFormat) -> Option<isolab_report::table::Style> {
    use crate::cli::TableFormat;
    use isolab_report::table::Style;
    match format {
        TableFormat::Text => Some(Style::Text { color: color() }),
        TableFormat::Md => Some(Style::Markdown),
        TableFormat::Json => None,
    }
}

/// `--color`, set once by [`dispatch`].
static COLOR: std::sync::OnceLock<crate::cli::ColorWhen> = std::sync::OnceLock::new();

/// Whether to colour terminal output, by `--color`: `auto` colours a terminal unless
/// NO_COLOR is set to a non-empty value.
pub fn color() -> bool {
    use std::io::IsTerminal;
    colour_wanted(
        COLOR.get().copied().unwrap_or(crate::cli::ColorWhen::Auto),
        std::env::var_os("NO_COLOR").as_deref(),
        std::io::stdout().is_terminal(),
    )
}

/// The rule of [`color`]: no-color.org's "NO_COLOR … when present and not an empty
/// string", which `always` and `never` override.
fn colour_wanted(
    when: crate::cli::ColorWhen,
    no_color: Option<&std::ffi::OsStr>,
    terminal: bool,
) -> bool {
    use crate::cli::ColorWhen;
    match when {
        ColorWhen::Always => true,
        ColorWhen::Never => false,
        ColorWhen::Auto => terminal && no_color.is_none_or(|v| v.is_empty()),
    }
}

#[cfg(test)]
mod tests {
    use super::colour_wanted;
    use crate::cli::ColorWhen;
    use std::ffi::OsStr;

    #[test]
    fn no_color_counts_only_when_not_empty_and_flags_override_it() {
        let set = Some(OsStr::new("1"));
        let empty = Some(OsStr::new(""));
        assert!(colour_wanted(ColorWhen::Auto, None, true));
        assert!(!colour_wanted(ColorWhen::Auto, None, false));
        assert!(!colour_wanted(ColorWhen::Auto, set, true));
        assert!(colour_wanted(ColorWhen::Auto, empty, true));
        assert!(colour_wanted(ColorWhen::Always, set, false));
        assert!(!colour_wanted(ColorWhen::Never, None, true));
    }
}
