//! Command-line flags. These types stop here: commands turn them into the lab's settings.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

/// Measure what an execution platform and its configuration cost a workload, and how
/// well they isolate it: declared experiment matrices, repeated until stable, stored
/// in SQLite, reported with confidence intervals.
///
/// Exit status: 0 success, 1 error, 2 invalid spec or usage, 3 finished with failed
/// cells, 4 `compare --fail-on` or `gate` found a point worse (or changed), 5 `compare
/// --fail-on undecided` or `gate --strict` found an undecided point, 6 `gate` refused a
/// reference on a different host fingerprint, 130 interrupted (resume with `isolab run
/// --resume EXP`).
#[derive(Debug, Parser)]
#[command(name = "isolab", version, propagate_version = true)]
pub struct Cli {
    /// The results store: an SQLite file (created when missing) or a PostgreSQL URL,
    /// postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE (its tables are created).
    #[arg(long, global = true, env = "ISOLAB_DB", default_value = "isolab.db")]
    pub db: PathBuf,

    /// When to colour tables: `auto` on a terminal unless the NO_COLOR environment
    /// variable is set to a non-empty value (no-color.org), `always`, or `never`.
    #[arg(
        long,
        global = true,
        value_enum,
        default_value = "auto",
        value_name = "WHEN"
    )]
    pub color: ColorWhen,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run an experiment (the built-in quick start when no SPEC is given), then print
    /// its summary table and write its HTML report.
    Run(RunArgs),
    /// Validate a spec and print the expanded matrix: cells, dropped cells, runs and
    /// estimated time (from how long runs of the same platform and workload took in
    /// the store, when it has some).
    Check(CheckArgs),
    /// List stored experiments (or the built-in workloads and shapes).
    List(ListArgs),
    /// Show an experiment: per cell n, mean, 95% CI, CV, overhead vs baseline, limits
    /// read back and why the cell stopped (`--format md` for Markdown tables).
    Show(ShowArgs),
    /// Export every metric observation of an experiment's counted runs, one row each:
    /// CSV, JSON, or Go's benchmark format for `benchstat`; with --series, the load
    /// intervals of service workloads instead, one row per run, request and second.
    #[command(after_long_help = BENCHSTAT_HELP)]
    Export(ExportArgs),
    /// Write the self-contained HTML report of an experiment.
    Report(ReportArgs),
    /// Import a bundle (`isolab export --bundle`) into the store: every experiment with
    /// its runs, ids remapped; one the store already holds (same name, seed and
    /// creation time) is skipped, so importing twice duplicates nothing.
    Import {
        /// The bundle file.
        bundle: PathBuf,
    },
    /// Compare configuration B against A: within one experiment (`EXP --a
    /// placement=quota --b placement=pinned`, other factors matched) or across two
    /// experiments (`EXP_A EXP_B`, cells matched by their levels). Prints medians with
    /// CIs, the change with its CI, Mann-Whitney p, Benjamini-Hochberg q, a verdict, the
    /// geometric mean of the overhead ratios, and seed 000's regression histogram
    /// (`--format md` for Markdown tables).
    Compare(CompareArgs),
    /// Decide a stored experiment (or run SPEC first) against a reference built from the
    /// store's history: the latest --history experiments of the same spec (cells by
    /// levels, workloads by definition) on the same host fingerprint, or the latest
    /// tagged --reference. Each point's threshold is the larger of the spec's `noise` and the
    /// history's own scatter between experiments (see docs/gate.md); a point is worse
    /// when significant after Benjamini-Hochberg and beyond it. A reference on a
    /// different fingerprint (kernel, THP, mitigations, tool and engine versions, image
    /// digest…) is refused with the keys named unless --allow-drift names each.
    ///
    /// Exit status: 0 nothing worse, 4 a point is worse, 5 with --strict a point is
    /// undecided (or its history too short) and none worse, 6 refused: the reference's
    /// fingerprint differs and --allow-drift does not name every key.
    Gate(GateArgs),
    /// Each point of an experiment's spec over the stored experiments of that spec (cells
    /// by levels, workloads by definition) in time order, one line per cell and host:
    /// median, 95% CI, the change points the gate's rule decides, and the host-fingerprint
    /// changes between consecutive experiments. `isolab report` shows it as a section.
    Trend(TrendArgs),
    /// Tag an experiment (`isolab tag EXP baseline-2026-11`); several experiments may
    /// share a tag, which `gate --reference TAG` decides against. --remove takes it off.
    Tag(TagArgs),
    /// Check an experiment's data against the seeds' best practices (pin small
    /// containers, container size, container-in-VM for IO-bound services, reservation
    /// against noisy neighbours, dedicated storage, …): for every rule, whether it
    /// applies here with its evidence (cells, effects, verdicts), does not, or cannot
    /// be checked and which factor is missing.
    Advise(AdviseArgs),
    /// Measure the noise of this host: run the spec (or the quick start) as an A/A
    /// design (every cell twice, interleaved), then report per workload the CV, the
    /// false positives among A/A points, and the runs needed to detect an effect.
    Calibrate(CalibrateArgs),
    /// Build root filesystems for containers (busybox for tests, a Debian root with the
    /// benchmark tools) and pack them for every engine (ext4 image, tar, OCI bundle).
    #[command(subcommand)]
    Image(ImageCommand),
    /// Move experiments between results stores: SQLite files and PostgreSQL databases.
    #[command(subcommand)]
    Store(StoreCommand),
    /// Run one experiment on many hosts through Slurm, into a PostgreSQL store
    /// (--db postgres://…): each host runs every cell in its own shuffled rounds.
    #[command(subcommand)]
    Fleet(FleetCommand),
    /// Print the environment isolab captures with every experiment; with --check-kvm,
    /// check that KVM runs isolab's VM platforms.
    Env(EnvArgs),
    /// Remove cgroups, processes and working directories left by a killed `isolab run`,
    /// what killed `isolab-runtime` containers left (cgroups, loop devices, networks,
    /// state under /run/isolab), killed VMs' taps and addresses, and the network
    /// namespaces (with the processes left in them) and IFB devices of killed runs'
    /// neighbours. Idempotent; leaves live ones alone.
    Gc(GcArgs),
    /// Print a completion script for a shell, e.g. `isolab completions bash >
    /// /usr/local/share/bash-completion/completions/isolab` (zsh: a `_isolab` file on
    /// $fpath; fish: ~/.config/fish/completions/isolab.fish).
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff), generated from these definitions: `isolab man |
    /// man -l -`; with --dir, write isolab.1 and one page per subcommand there
    /// (`make quickstart` installs them into /usr/local/share/man/man1 as root).
    Man {
        /// Write every page into this directory instead of printing isolab.1.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Benchmark container start-up: start→exit latency of `tini -- true` in isolab-runtime
    /// and in each engine (same image, tini as PID 1 everywhere, network none, one parent
    /// cgroup), in a shuffled order every round, with the ratios isolab-runtime / engine and
    /// bootstrap CIs, for isolab-runtime's seccomp cache warm and cleared before each start.
    BenchStart(BenchStartArgs),
}

#[derive(Debug, clap::Args)]
pub struct BenchStartArgs {
    /// Measured runs per engine (after 3 warm-up rounds).
    #[arg(long, default_value_t = 50)]
    pub runs: usize,
    /// The image every engine runs.
    #[arg(long, default_value = "/var/lib/isolab/images/bench")]
    pub image: std::path::PathBuf,
    /// Engines to compare with isolab-runtime (default: every container engine of
    /// `isolab list --platforms`).
    #[arg(long, value_delimiter = ',')]
    pub engines: Vec<String>,
    /// Seed of the engines' shuffled order (a new order every round); by default a
    /// random one, printed with the results.
    #[arg(long)]
    pub seed: Option<u64>,
}

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Experiment spec (TOML). Without it, the built-in quick start runs.
    pub spec: Option<PathBuf>,
    /// Continue an interrupted experiment (id or name) instead of starting one.
    #[arg(long, value_name = "EXP", conflicts_with = "spec")]
    pub resume: Option<String>,
    /// With --resume: run more rounds of only the two cells that --a and --b select,
    /// until the comparison of B against A is decided (worse, better or ≈, as
    /// `isolab compare` decides it; worse or better before `max` only at p < 0.001)
    /// or they reach the spec's `max` runs; then print the comparison as `isolab
    /// compare EXP --a … --b …` does. For an experiment without a baseline, whose
    /// cells stopped on their CV alone. Stored runs are kept as they are.
    #[arg(long, requires_all = ["resume", "a", "b"])]
    pub until_decided: bool,
    /// Levels selecting cell A of --until-decided, e.g. `workload=a` (repeat or
    /// comma-separate); they must select exactly one cell.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "LEVELS",
        requires = "until_decided"
    )]
    pub a: Vec<String>,
    /// Levels selecting cell B of --until-decided, e.g. `workload=b`.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "LEVELS",
        requires = "until_decided"
    )]
    pub b: Vec<String>,
    /// Directory for the runs' working directories (a disk-backed file system, so I/O
    /// workloads measure a device).
    #[arg(long, default_value_os_t = default_workdir())]
    pub workdir: PathBuf,
    /// Keep each run's working directory (logs, tool output) for debugging.
    #[arg(long)]
    pub keep_workdirs: bool,
    /// Where to write the HTML report (default: isolab-report-<ID>.html).
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Do not write an HTML report.
    #[arg(long)]
    pub no_report: bool,
    /// Summarise every metric, not only each workload's primary one.
    #[arg(long)]
    pub all_metrics: bool,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, clap::Args)]
pub struct OutputArgs {
    /// Print nothing but errors.
    #[arg(long, short, conflicts_with = "json")]
    pub quiet: bool,
    /// Print events and the summary as JSON lines on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// Experiment spec (TOML).
    pub spec: PathBuf,
    /// Print the expanded matrix as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct ListArgs {
    /// List the built-in workloads instead of experiments.
    #[arg(long, conflicts_with_all = ["shapes", "platforms", "stacks"])]
    pub workloads: bool,
    /// List the built-in service stacks (their components and packages) and the
    /// load generators with the profiles each drives and whether it is installed.
    #[arg(long, conflicts_with_all = ["shapes", "platforms"])]
    pub stacks: bool,
    /// List the built-in shapes instead of experiments.
    #[arg(long, conflicts_with = "platforms")]
    pub shapes: bool,
    /// List the platforms (engines) with their capabilities and whether each is
    /// usable on this host, and why not.
    #[arg(long)]
    pub platforms: bool,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    /// Experiment id or name (the newest with that name).
    pub experiment: String,
    /// Summarise every metric, not only each workload's primary one.
    #[arg(long)]
    pub all_metrics: bool,
    /// List every outlier run (its cell, value and modified z-score) instead of one line
    /// that counts them.
    #[arg(long)]
    pub outliers: bool,
    #[command(flatten)]
    pub format: TableFormatArgs,
}

/// When to colour tables (`--color`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorWhen {
    /// On a terminal, unless NO_COLOR is set to a non-empty value.
    Auto,
    /// Always, even when NO_COLOR is set or stdout is not a terminal.
    Always,
    /// Never.
    Never,
}

/// What makes `compare` exit non-zero (`--fail-on`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FailOn {
    /// A point is worse: exit status 4.
    Worse,
    /// A point is worse or better: exit status 4.
    Changed,
    /// A point is undecided (`?`): exit status 5 (unless one is worse, which wins).
    Undecided,
}

/// How `show` and `compare` print.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TableFormat {
    /// Aligned text tables, coloured on a terminal.
    Text,
    /// GitHub-flavoured Markdown: pipe tables to paste into an issue or a pull request.
    Md,
    /// JSON, the same as --json.
    Json,
}

#[derive(Debug, clap::Args)]
pub struct TableFormatArgs {
    /// Output format: text tables, Markdown (GitHub pipe tables) or JSON [default: text].
    #[arg(long, value_enum, value_name = "FORMAT")]
    pub format: Option<TableFormat>,
    /// Print JSON (the same as --format json).
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
}

impl TableFormatArgs {
    /// The chosen format: --json, else --format, else text.
    pub fn get(&self) -> TableFormat {
        if self.json {
            TableFormat::Json
        } else {
            self.format.unwrap_or(TableFormat::Text)
        }
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ExportFormat {
    /// experiment,run,cell,<factors…>,repetition,metric,unit,direction,value
    Csv,
    /// A JSON array of objects, the levels as an object.
    Json,
    /// Go's benchmark format, for `benchstat -col /placement FILE` (see --help).
    Benchstat,
}

/// `isolab export --help`'s account of the benchstat format.
const BENCHSTAT_HELP: &str = "\
--format benchstat writes Go's benchmark format, which benchstat
(golang.org/x/perf/cmd/benchstat) reads: one line per observation,

  Benchmark<workload>/<factor>=<level>/.../metric=<metric> 1 <value> <unit>

e.g. `Benchmarksysbench-cpu/platform=host/placement=quota/metric=events_per_second
1 1234.5 events/s`: the workload is the name, every other factor a sub-benchmark key
in the cells' order. A `Unit <unit> better=higher|lower` line per unit gives the
metric's direction, and a `cpu:` line the host's cpu. Whitespace and `/` in names
become `_`; units are the metrics' own (`events/s`, `ms`) with whitespace as `_`, a
metric's name when it has no unit, and `<metric>:<unit>` when metrics sharing a unit
disagree on their direction. Then

  benchstat -col /placement isolab.txt
  benchstat -col '/platform@(host docker)' -filter /metric:events_per_second isolab.txt

compare levels, a column each, the first as the base, with benchstat's Mann-Whitney
test (the same p as isolab's unpaired test; isolab's verdicts also control the false
discovery rate and a noise threshold).";

#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// Experiment id or name; with --bundle, one or more.
    #[arg(required = true, num_args = 1..)]
    pub experiments: Vec<String>,
    /// Write the experiments with their spec, environment, tags and every raw run,
    /// series, log and note into FILE, a bundle (an SQLite store of one file) that
    /// `isolab import FILE` reads into any store, so that two sites compare without
    /// sharing a database. An experiment FILE already holds is skipped.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["series", "output"])]
    pub bundle: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "csv")]
    pub format: ExportFormat,
    /// Export the load intervals of service workloads instead of the metrics: one row per
    /// counted run, named request and second, with the run's id, cell levels and
    /// repetition, then request,start_s,users,target_rate,requests,failures and the
    /// latencies latency_{mean,p50,p90,p99,max}_ms (empty or null when not reported).
    /// CSV or JSON only.
    #[arg(long)]
    pub series: bool,
    /// Write to FILE instead of stdout.
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// Experiment id or name.
    pub experiment: String,
    /// Output file (default: isolab-report-<ID>.html).
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Summarise every metric, not only each workload's primary one.
    #[arg(long)]
    pub all_metrics: bool,
}

#[derive(Debug, clap::Args)]
pub struct VerdictArgs {
    /// Significance level of verdicts, after false-discovery control.
    #[arg(long, default_value_t = 0.05)]
    pub alpha: f64,
    /// Noise threshold Δ, a fraction: a significant change is called worse or better
    /// only when its estimate lies beyond ±Δ; a change whose 1 − 2α interval lies
    /// within ±Δ is `≈` (equivalent). Default: the experiment's (or spec's)
    /// `[experiment] noise`, which is 0.02 when the spec does not set it.
    #[arg(long, value_name = "FRACTION")]
    pub noise: Option<f64>,
}

#[derive(Debug, clap::Args)]
pub struct CompareArgs {
    /// One experiment (with --a and --b) or two (A then B); ids or names.
    #[arg(required = true, num_args = 1..=2)]
    pub experiments: Vec<String>,
    /// Levels selecting A's cells, e.g. `placement=quota` (repeat or comma-separate).
    #[arg(long, value_delimiter = ',')]
    pub a: Vec<String>,
    /// Levels selecting B's cells.
    #[arg(long, value_delimiter = ',')]
    pub b: Vec<String>,
    #[command(flatten)]
    pub verdict: VerdictArgs,
    /// Width of the regression histogram's bins, in percent.
    #[arg(long, default_value_t = 5.0)]
    pub bin_width: f64,
    /// Compare every metric, not only each workload's primary one.
    #[arg(long)]
    pub all_metrics: bool,
    /// Exit non-zero for CI: `worse` (status 4 when a point is worse), `changed` (4 when
    /// one is worse or better), `undecided` (5 when one is `?` and none is worse);
    /// repeat or comma-separate. The comparison is printed first either way.
    #[arg(long, value_enum, value_delimiter = ',', value_name = "WHAT")]
    pub fail_on: Vec<FailOn>,
    #[command(flatten)]
    pub format: TableFormatArgs,
}

#[derive(Debug, clap::Args)]
pub struct GateArgs {
    /// A stored experiment (id or name: the newest with that name), or a spec file to run
    /// first and then decide.
    pub target: String,
    /// How many of the latest experiments of the same spec make the reference.
    #[arg(long, value_name = "K", default_value_t = 10)]
    pub history: usize,
    /// Decide against the latest --history experiments tagged TAG (`isolab tag`), e.g.
    /// those of the main branch that passed, instead of the latest of the spec.
    #[arg(long, value_name = "TAG")]
    pub reference: Option<String>,
    /// Accept a reference whose host fingerprint differs in KEY (e.g. `thp`,
    /// `tool.runc`, `kernel`); the drift is then named as a candidate cause. Repeat or
    /// comma-separate.
    #[arg(long, value_delimiter = ',', value_name = "KEY")]
    pub allow_drift: Vec<String>,
    /// Exit 5 when a point is undecided (and none worse).
    #[arg(long)]
    pub strict: bool,
    /// Decide every metric, not only each workload's primary one.
    #[arg(long)]
    pub all_metrics: bool,
    /// Directory for the runs' working directories, when SPEC runs first.
    #[arg(long, default_value_os_t = default_workdir())]
    pub workdir: PathBuf,
    #[command(flatten)]
    pub format: TableFormatArgs,
}

#[derive(Debug, clap::Args)]
pub struct TrendArgs {
    /// Experiment id or name (the newest with that name): its spec's trend up to it.
    pub experiment: String,
    /// The metric to follow (default: each workload's primary one).
    #[arg(long)]
    pub metric: Option<String>,
    #[command(flatten)]
    pub format: TableFormatArgs,
}

#[derive(Debug, clap::Args)]
pub struct TagArgs {
    /// Experiment id or name.
    pub experiment: String,
    /// The tag, e.g. baseline-2026-11; not a number.
    pub tag: String,
    /// Remove the tag instead.
    #[arg(long)]
    pub remove: bool,
}

#[derive(Debug, clap::Args)]
pub struct AdviseArgs {
    /// Experiment id or name (the newest with that name).
    pub experiment: String,
    #[command(flatten)]
    pub verdict: VerdictArgs,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct CalibrateArgs {
    /// Experiment spec to calibrate (default: the built-in quick start).
    pub spec: Option<PathBuf>,
    /// The relative effect to be detected, e.g. 0.03 for 3%.
    #[arg(long, default_value_t = 0.03)]
    pub effect: f64,
    /// The power wanted for that effect.
    #[arg(long, default_value_t = 0.9)]
    pub power: f64,
    #[command(flatten)]
    pub verdict: VerdictArgs,
    /// Directory for the runs' working directories.
    #[arg(long, default_value_os_t = default_workdir())]
    pub workdir: PathBuf,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Subcommand)]
pub enum FleetCommand {
    /// Record a fleet for SPEC in the store and submit it to Slurm: one job of exclusive
    /// nodes, one task per node running this host's experiment.
    Submit(FleetSubmitArgs),
    /// What each node of a fleet's job runs (started by Slurm): this host's experiment
    /// of FLEET, started or resumed.
    #[command(hide = true)]
    Task {
        /// The fleet (id or name).
        fleet: String,
        /// Directory for the runs' working directories on this node.
        #[arg(long, default_value_os_t = default_workdir())]
        workdir: PathBuf,
    },
    /// A fleet's results: every configuration against its baseline within each host,
    /// pooled with the host as a block (flagging effects that differ between hosts),
    /// then each host's own summary table.
    Show {
        /// The fleet (id or name).
        fleet: String,
        /// Print JSON instead of tables.
        #[arg(long)]
        json: bool,
    },
    /// A fleet's HTML report: the pooled comparisons of `fleet show`, then each host's
    /// summary and environment.
    Report {
        /// The fleet (id or name).
        fleet: String,
        /// Output file (default: isolab-fleet-ID.html).
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// A fleet's Slurm job and each host's progress in the store.
    Status {
        /// The fleet (id or name).
        fleet: String,
    },
    /// Cancel a fleet's Slurm job, then run `isolab gc` on its nodes.
    Cancel {
        /// The fleet (id or name).
        fleet: String,
    },
}

#[derive(Debug, clap::Args)]
pub struct FleetSubmitArgs {
    /// Experiment spec (TOML); checked here, and on each host against its cpus.
    pub spec: PathBuf,
    /// The Slurm partition (the cluster's default when not given).
    #[arg(long)]
    pub partition: Option<String>,
    /// How many nodes (hosts) to run on (default 1).
    #[arg(long, conflicts_with = "nodelist")]
    pub nodes: Option<u32>,
    /// Exactly these nodes, comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub nodelist: Vec<String>,
    /// Give each host only a share of the cells instead of every cell: faster, but a
    /// configuration and its baseline may then be measured on different hosts, so the
    /// comparison is confounded with the hosts (every fleet table says so).
    #[arg(long)]
    pub split_cells: bool,
    /// Time limit in Slurm's syntax (e.g. 4:00:00); the partition's when not given.
    #[arg(long)]
    pub time: Option<String>,
    /// The isolab binary on the nodes (default: this one's path, which the nodes must
    /// have too).
    #[arg(long, value_name = "PATH")]
    pub isolab: Option<PathBuf>,
    /// Directory for the runs' working directories on the nodes.
    #[arg(long, default_value = "/var/tmp/isolab")]
    pub workdir: PathBuf,
    /// Where the batch script and the job's output go (default: the current directory;
    /// must be writable on the nodes).
    #[arg(long, value_name = "DIR")]
    pub output_dir: Option<PathBuf>,
    /// Print the batch script; record and submit nothing.
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, Subcommand)]
pub enum StoreCommand {
    /// Copy experiments with every run, series, log and note from the store SRC to the
    /// store DST (each an SQLite file or a postgres:// URL; DST is created if it is a
    /// file). Each experiment is copied in one transaction: whole or not at all. SRC is
    /// only read. An experiment DST already holds (same name, seed and creation time) is
    /// skipped with a note, so a copy can be repeated.
    Copy {
        /// The store to copy from.
        src: PathBuf,
        /// The store to copy into.
        dst: PathBuf,
        /// The experiments to copy (ids or names); all of them when none is given.
        experiments: Vec<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum ImageCommand {
    /// Build a root filesystem into DIR: `busybox` (from Debian's busybox-static, for
    /// tests), `bench` (Debian bookworm through mmdebstrap, with sysbench, fio,
    /// stress-ng and iperf3) or `bench-docker` (bench plus docker.io, for `vm+docker`).
    Build {
        /// Which image.
        #[arg(value_enum)]
        kind: ImageKind,
        /// Where to build it (created; must not exist unless --force).
        dir: PathBuf,
        /// Replace an existing image in DIR (only once the new one is complete).
        #[arg(long)]
        force: bool,
    },
    /// Make sure a recipe image is built: the bench image plus PACKAGES, or the image of
    /// SPEC (bench + its workloads' packages + its [image] packages), built once into
    /// /var/lib/isolab/images/recipe-<hash> and reused by every experiment that needs it.
    /// `isolab run` does this itself; this builds ahead of time.
    Ensure {
        /// The spec whose image to build (without it: the bench image plus --packages).
        #[arg(long, conflicts_with = "packages")]
        spec: Option<PathBuf>,
        /// Debian packages to add to the bench image, comma-separated (e.g. jq,nginx).
        #[arg(long, value_delimiter = ',')]
        packages: Vec<String>,
        /// Also make PATH a symlink to the image (e.g. /var/lib/isolab/images/bench); a real
        /// directory at PATH is left as it is.
        #[arg(long, value_name = "PATH")]
        link: Option<PathBuf>,
    },
    /// Import a container image of one's own into the image cache, once per digest, and
    /// print its root file system: REFERENCE names it as skopeo does,
    /// `docker-archive:FILE` (`docker save`), `oci-archive:FILE[:TAG]`, `oci:DIR[:TAG]`,
    /// `docker-daemon:NAME:TAG` or `containers-storage:NAME[:TAG]`. A spec's `[experiment]
    /// image = "REFERENCE"` does this itself; this imports ahead of time.
    Import {
        /// The image, e.g. docker-archive:/tmp/app.tar.
        reference: String,
    },
    /// List the cached recipe images with their hash and packages, and the imported ones.
    List {
        #[command(flatten)]
        json: JsonArgs,
    },
    /// Pack the root filesystem in DIR: an ext4 image file (for isolab-runtime and
    /// VMs), a tar (for docker/podman import) or an OCI bundle (for runc/crun).
    Pack {
        /// The image directory.
        dir: PathBuf,
        /// Target format.
        #[arg(long, value_enum)]
        to: PackFormat,
        /// Output file (ext4, tar) or bundle directory (oci).
        output: PathBuf,
        /// Size of the ext4 image in bytes (default: used size × 1.3 + 64 MiB).
        #[arg(long)]
        size: Option<u64>,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ImageKind {
    /// Debian's busybox-static in a minimal root, for tests.
    Busybox,
    /// Debian bookworm through mmdebstrap, with sysbench, fio, stress-ng and iperf3.
    Bench,
    /// The bench image plus Debian's docker.io, for `vm+docker` (Docker in the guest).
    BenchDocker,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum PackFormat {
    Ext4,
    Tar,
    Oci,
}

#[derive(Debug, clap::Args)]
pub struct JsonArgs {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct EnvArgs {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Check that KVM runs isolab's VM platforms, as a user with KVM should first: the
    /// CPU's virtualisation extensions, the kvm modules, /dev/kvm, what a boot needs (QEMU,
    /// the cached guest kernel, the bench-docker image: nothing is downloaded),
    /// a probe boot under KVM, then one short experiment on vm(kvm), vm(kvm)+isolab and
    /// vm(kvm)+docker with a cpu quota and pinned cpus (limits read back outside and in
    /// the guest, vCPU threads pinned). Prints a pass/fail table with what to fix; exit 0
    /// when everything passed. Needs root.
    #[arg(long)]
    pub check_kvm: bool,
    /// With --check-kvm on a host where KVM cannot boot: run the platforms' checks under
    /// TCG (emulation) instead, to show that everything but KVM works.
    #[arg(long, value_name = "ACCEL", value_parser = ["tcg"], requires = "check_kvm")]
    pub control: Option<String>,
    /// With --check-kvm: how long the probe boot may take to reach the guest's init
    /// before it is called failed (default 20 s; a KVM boot takes well under 2 s; longer
    /// on a heavily loaded machine, shorter to learn sooner where KVM hangs).
    #[arg(long, value_name = "DURATION", value_parser = parse_boot_timeout, requires = "check_kvm")]
    pub boot_timeout: Option<std::time::Duration>,
}

/// A probe boot's timeout: a duration such as `5s` or `1m` (1 s to 10 min).
fn parse_boot_timeout(text: &str) -> Result<std::time::Duration, String> {
    let d = humantime::parse_duration(text).map_err(|e| format!("{e} (e.g. 5s, 1m)"))?;
    if d < std::time::Duration::from_secs(1) || d > std::time::Duration::from_secs(600) {
        return Err(format!("{text} is outside 1s to 10m"));
    }
    Ok(d)
}

#[derive(Debug, clap::Args)]
pub struct GcArgs {
    /// The working directory base used by `isolab run --workdir`.
    #[arg(long, default_value_os_t = default_workdir())]
    pub workdir: PathBuf,
}

/// The base of the runs' working directories: /var/tmp/isolab as root, /var/tmp/isolab-UID
/// for any other user (whose runs must not meet root's directory, nor another user's).
pub fn default_workdir() -> PathBuf {
    // SAFETY: geteuid has no preconditions and cannot fail.
    match unsafe { libc::geteuid() } {
        0 => PathBuf::from("/var/tmp/isolab"),
        uid => PathBuf::from(format!("/var/tmp/isolab-{uid}")),
    }
}
