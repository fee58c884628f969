//! `isolab run`: run (or resume) an experiment, print its table, write its report.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use isolab_lab::assets::{AssetCache, PreparedAssets, DEBIAN_SOURCES, DEFAULT_ASSET_ROOT};
use isolab_lab::spec::QUICK_START;
use isolab_lab::{ExperimentSpec, Interrupt, Outcome, Runner, RunnerConfig, Source};
use isolab_store::ExperimentStatus;
use isolab_store::Store;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use super::Exit;
use crate::cli::RunArgs;
use crate::host;
use crate::progress::Progress;

mod until_decided;

/// How to run, apart from the spec.
pub struct Settings {
    pub workdir: PathBuf,
    pub keep_workdirs: bool,
    pub quiet: bool,
    pub json: bool,
}

/// Which experiment a run stores into.
pub enum Start {
    /// A new experiment.
    New,
    /// The stored experiment with this id, resumed.
    Resume(i64),
    /// The stored experiment with this id, continued until one comparison is decided.
    UntilDecided(i64, isolab_lab::runner::UntilDecided),
    /// This host's new experiment of a fleet, shuffled with `seed`.
    Fleet {
        fleet: isolab_store::FleetId,
        host: String,
        seed: u64,
    },
}

/// Runs (or resumes) `spec` into `store` on the host, with signal handling and
/// progress; returns the store and the outcome.
pub fn execute(
    mut store: Store,
    spec: &ExperimentSpec,
    start: Start,
    settings: &Settings,
) -> Result<(Store, Outcome)> {
    let facts = host::facts()?;
    // Without root, this claims the caller's delegated cgroup until `release` below.
    let cgroups = host::Cgroups::find(&host::needed_controllers(spec), true)?;
    let needs_image = spec.cells.iter().any(|c| c.platform.kind.needs_image());
    // An image of one's own is imported (once per digest) and run from its root file system.
    let imported;
    let spec = match spec.image_ref.as_ref().filter(|_| needs_image) {
        Some(reference) => {
            let image = super::image::import_own(reference, settings.quiet || settings.json)?;
            imported = ExperimentSpec {
                image_config: image.manifest.imported.map(|r| r.config),
                image: image.dir,
                ..spec.clone()
            };
            &imported
        }
        None => spec,
    };
    if let Some(recipe) = spec.recipe.as_ref().filter(|_| needs_image) {
        super::image::ensure_recipe(recipe, settings.quiet || settings.json)?;
    }
    for recipe in &spec.guest_recipes {
        super::image::ensure_recipe(recipe, settings.quiet || settings.json)?;
    }
    host::preflight(&cgroups)?;
    host::preflight_engines(spec)?;
    let assets = prepare_assets(spec, settings.quiet || settings.json)?;

    let interrupt = Arc::new(Interrupt::new().context("cannot create the interrupt pipe")?);
    let mut signals =
        Signals::new([SIGINT, SIGTERM, SIGHUP]).context("cannot install signal handlers")?;
    let handle = signals.handle();
    let on_signal = Arc::clone(&interrupt);
    let signal_thread = std::thread::spawn(move || {
        if signals.forever().next().is_some() {
            on_signal.trigger();
        }
    });

    let mut environment = host::environment(Some(spec), Some(&cgroups.hierarchy));
    environment.extend(assets.environment());
    let platform = host::platform(cgroups.hierarchy.clone(), &cgroups.base, spec.probe);
    // Engines made ready (a daemon started, the image imported) before the first
    // run, so that a missing one fails once, with what to do.
    let mut levels: Vec<isolab_lab::platform::PlatformDef> = Vec::new();
    for c in &spec.cells {
        if !levels.contains(&c.platform) {
            levels.push(c.platform.clone());
        }
    }
    environment.extend(
        isolab_lab::Executor::prepare(
            &platform,
            &levels,
            needs_image.then_some(spec.image.as_path()),
        )
        .context("preparing the spec's platforms")?,
    );
    let config = RunnerConfig {
        workdir_base: settings.workdir.clone(),
        keep_workdirs: settings.keep_workdirs,
        cpus: facts.cpus.clone(),
        topology: isolab_lab::topology::Topology::read(std::path::Path::new("/sys"), &facts.cpus),
        assets,
        storage_host: std::sync::Arc::new(isolab_lab::storage::SystemStorageHost),
    };
    let mut progress = Progress::new(settings.quiet, settings.json);
    let outcome = {
        let mut runner = Runner::new(&platform, &mut store, &mut progress, &interrupt, config);
        match start {
            Start::Resume(id) => runner.resume(id, spec),
            Start::UntilDecided(id, until) => runner.until_decided(id, spec, until),
            Start::New => runner.start(spec, environment),
            Start::Fleet { fleet, host, seed } => {
                runner.start_in_fleet(spec, environment, fleet, &host, seed)
            }
        }
    };
    progress.finish();
    handle.close();
    let _ = signal_thread.join();
    // The platforms remove their cgroups when dropped, before the delegated cgroup is given
    // back.
    drop(platform);
    cgroups.release();
    Ok((store, outcome?))
}

/// The assets of `spec`'s workloads in the cache, each built first when missing, with
/// a progress line on standard error unless `quiet`.
pub fn prepare_assets(spec: &ExperimentSpec, quiet: bool) -> Result<PreparedAssets> {
    let mut cache = AssetCache::new(
        DEFAULT_ASSET_ROOT,
        &isolab_tools::SystemTools,
        &isolab_lab::environment::SystemTools,
    );
    // A script that fetches a source package (the `httpd` asset) gets the mirrors
    // the images come from; a host without them fails only such a script.
    if let Ok(lines) = isolab_image::mirror_lines(Path::new("/etc/apt"), isolab_image::BENCH_SUITE)
    {
        let src: Vec<String> = lines
            .iter()
            .map(|l| l.replacen("deb ", "deb-src ", 1))
            .collect();
        cache = cache.with_env(DEBIAN_SOURCES, src.join("\n"));
    }
    let t = std::time::Instant::now();
    let workloads = spec.cells.iter().map(|c| &c.workload);
    let assets = PreparedAssets::prepare(workloads, &cache, &mut |def, work| {
        if !quiet {
            let what = def.description.replace("{work}", &work.to_string());
            eprintln!("asset {} (work {work}): {what}", def.name);
        }
    })
    .context("preparing the workloads' assets")?;
    if !quiet {
        for a in assets.iter() {
            let how = if a.built { "built" } else { "in the cache" };
            eprintln!(
                "asset {} {how}: {} ({} bytes)",
                a.name,
                a.dir.display(),
                a.bytes
            );
        }
        if assets.iter().any(|a| a.built) {
            eprintln!("assets ready in {:.1?}", t.elapsed());
        }
    }
    Ok(assets)
}

pub fn run(db: &Path, args: RunArgs) -> Result<Exit> {
    if args.until_decided {
        return until_decided::run(db, args);
    }
    let facts = host::facts()?;
    let store = host::open_store(db)?;

    // The spec: a file, the quick start, or the one stored with the experiment to resume.
    let (spec, resume) = match &args.resume {
        Some(exp) => {
            let id = store.resolve(exp)?;
            let record = store.experiment(id)?;
            if record.status == ExperimentStatus::Complete {
                println!(
                    "experiment {id} ({}) is already complete: nothing to resume",
                    record.name
                );
                return Ok(Exit::Success);
            }
            (super::stored_spec(&record, &facts)?, Some(id))
        }
        None => match &args.spec {
            Some(path) => (super::load_spec(path, &facts)?, None),
            None => (
                ExperimentSpec::parse(Source::new("built-in quick-start", QUICK_START), &facts)?,
                None,
            ),
        },
    };
    if !args.output.quiet && !args.output.json {
        for w in &spec.warnings {
            eprintln!("warning: {w}");
        }
        for d in &spec.dropped {
            eprintln!("dropped cell {}: {}", d.key, d.reason);
        }
    }
    let (store, outcome) = execute(
        store,
        &spec,
        resume.map_or(Start::New, Start::Resume),
        &Settings::of(&args),
    )?;

    if outcome.status == ExperimentStatus::Interrupted {
        return Ok(interrupted(&store, db, &outcome, ""));
    }

    let data = isolab_report::ExperimentData::load(&store, outcome.experiment)?;
    let analysis = super::analyse(&data, args.all_metrics);
    if args.output.json {
        println!(
            "{}",
            super::json::line(
                &serde_json::json!({ "event": "summary", "experiment": outcome.experiment, "analysis": analysis })
            )?
        );
    } else if !args.output.quiet {
        println!(
            "\nexperiment {} ({}): {} runs this time",
            outcome.experiment, spec.name, outcome.runs
        );
        let report = isolab_report::Report::new(&data, &analysis);
        print!(
            "{}",
            report.text(isolab_report::Reach::Run, super::color().into())
        );
    }
    write_report(&args, &data, &analysis)?;
    Ok(ending(&outcome))
}

impl Settings {
    /// The settings `args` ask for.
    fn of(args: &RunArgs) -> Self {
        Settings {
            workdir: args.workdir.clone(),
            keep_workdirs: args.keep_workdirs,
            quiet: args.output.quiet,
            json: args.output.json,
        }
    }
}

/// Says that `outcome`'s experiment was interrupted and how to resume it (the same
/// command: `--resume EXP` and `again`); the interrupted exit status.
fn interrupted(store: &Store, db: &Path, outcome: &Outcome, again: &str) -> Exit {
    eprintln!(
        "interrupted: experiment {id} stopped after {} runs this time; every completed run is stored in {}.\nresume with: isolab run --resume {id}{}{again}",
        outcome.runs,
        store.location(),
        if db == Path::new("isolab.db") { String::new() } else { format!(" --db {}", store.location()) },
        id = outcome.experiment,
    );
    Exit::Interrupted
}

/// Writes the HTML report of `data` unless `args` say not to.
fn write_report(
    args: &RunArgs,
    data: &isolab_report::ExperimentData,
    analysis: &isolab_report::Analysis,
) -> Result<()> {
    if args.no_report {
        return Ok(());
    }
    let path = args
        .report
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("isolab-report-{}.html", data.record.id)));
    let html = isolab_report::html::html(data, analysis);
    std::fs::write(&path, html)
        .with_context(|| format!("cannot write the report to {}", path.display()))?;
    if !args.output.quiet && !args.output.json {
        println!("report: {}", path.display());
    }
    Ok(())
}

/// The exit status of a finished `outcome`: failed cells (said on standard error) or
/// success.
fn ending(outcome: &Outcome) -> Exit {
    if outcome.failed_cells > 0 {
        eprintln!(
            "{} cells failed; `isolab show {}` says why",
            outcome.failed_cells, outcome.experiment
        );
        return Exit::FailedCells;
    }
    Exit::Success
}
