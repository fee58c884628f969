//! `isolab bench-start`: start-to-exit latency of `true` in a container, per engine,
//! interleaved in one run, printed with ratios against isolab-runtime.
//!
//! Every engine runs the same command on the same image with network `none` and no
//! limits, its container's cgroup below one parent cgroup, in which the benchmark
//! itself runs during the rounds (so each engine's command is born there, as from a
//! shell, with no cgroup write of the harness timed). What is timed is what a
//! user of the engine waits for: preparing the container (isolab's drivers mount
//! the overlay and write the bundle or configuration for runc, crun and LXC;
//! isolab-runtime and the daemons do that inside their own command) and running
//! its foreground command until it exits. Removing the container afterwards is not
//! timed (`docker run --rm` and `podman run --rm` remove it inside their command,
//! so their numbers include it: they are upper bounds).
//!
//! Equal work: every OCI runtime runs the command under Debian's static `tini` as PID 1,
//! bind-mounted read-only at `/.isolab-init` (the arrangement of isolab's runc, crun and youki
//! drivers), isolab-runtime too (its own init then starts tini: the same exec and bind mount
//! as theirs, plus its init). runc and crun compile their seccomp filter on every start;
//! isolab-runtime loads a compiled one from its cache, so it is measured twice: as users run
//! it (cache warm) and as `isolab-runtime (cold seccomp)`, whose cache (in a state directory
//! of its own) is removed before each start, outside the timed part.
//!
//! The engines run in a new shuffled order every round (the seed is printed, and
//! `--seed` repeats it): an engine's time can depend on the one before it (crun's first
//! cgroup attach after a quiet spell waits for an RCU grace period), so a fixed order
//! would favour whichever engine follows another. The medians by preceding engine are
//! printed under the table, so that an order effect shows.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use isolab_cgroups::Cgroup;
use isolab_engines::{Engine, NetworkMode, PreparedImage, RunRequest};
use isolab_stats::{bootstrap_ratio_ci, percentile, Center, Direction, Sample};
use rand::seq::SliceRandom;
use rand::SeedableRng;

use super::Exit;
use crate::cli::BenchStartArgs;
use crate::host;

/// One engine under test.
enum Subject {
    /// isolab-runtime; with `cold`, a state directory whose seccomp cache is removed before
    /// each start.
    Runtime {
        program: PathBuf,
        cold: Option<PathBuf>,
    },
    Driver(Box<dyn Engine>),
}

pub fn bench_start(args: BenchStartArgs) -> Result<Exit> {
    if args.runs < 5 {
        bail!("--runs must be at least 5, got {}", args.runs);
    }
    let hierarchy = host::hierarchy()?;
    let parent_rel = PathBuf::from(format!("isolab/bench-start-pid{}", std::process::id()));
    let parent = Cgroup::create(&hierarchy, &parent_rel)
        .with_context(|| format!("creating cgroup {}", parent_rel.display()))?;
    let result = measure(&args, &parent, &parent_rel);
    let removed = parent.remove();
    let exit = result?;
    removed.context("removing the benchmark's cgroup")?;
    Ok(exit)
}

fn measure(args: &BenchStartArgs, parent: &Cgroup, parent_rel: &Path) -> Result<Exit> {
    let program = isolab_lab::platform::IsolabConfig::discover().program;
    let tini =
        isolab_tools::find_program(isolab_engines::oci::INIT_PROGRAM).with_context(|| {
            format!(
                "{} missing: every runtime runs `true` under it (apt-get install tini)",
                isolab_engines::oci::INIT_PROGRAM
            )
        })?;
    // Beside the default state directory (/run/isolab), on the same file system, so that
    // the two isolab-runtime subjects differ only in the seccomp work.
    let cold_state = RemovedOnDrop(PathBuf::from(format!(
        "/run/isolab-bench-start-cold-{}",
        std::process::id()
    )));
    let subjects = subjects(args, program, &cold_state.0)?;
    let workdir = tempfile_dir()?;
    let (ready, prepared) = prepare(args, subjects)?;
    let seed = args.seed.unwrap_or_else(rand::random);
    let bench = Rounds {
        args,
        ready: &ready,
        prepared: &prepared,
        tini: &tini,
        workdir: &workdir.0,
        parent_rel,
    };
    // This process moves into the parent cgroup for the rounds, so that what it
    // spawns is born there as from a user's shell: attaching each spawn to it would
    // time a write to `cgroup.procs`, which now and then waits for an RCU grace
    // period (8 ms here), and more often for whichever engine follows a quiet spell.
    let entered = parent
        .enter()
        .context("moving the benchmark into its cgroup")?;
    let (times, log) = bench.run(seed)?;
    entered
        .leave()
        .context("moving the benchmark out of its cgroup")?;
    for (_, subject) in &ready {
        if let Subject::Driver(d) = subject {
            if let Err(e) = d.shutdown() {
                eprintln!("warning: {e}");
            }
        }
    }
    print_results(args, seed, &ready, &times, &log)?;
    Ok(Exit::Success)
}

/// The subjects: isolab-runtime (cache warm, and cold with its state in `cold_state`),
/// then every engine of the registry, or those `--engine` names in their order.
fn subjects(
    args: &BenchStartArgs,
    program: PathBuf,
    cold_state: &Path,
) -> Result<Vec<(String, Subject)>> {
    let mut subjects: Vec<(String, Subject)> = vec![
        (
            "isolab-runtime".into(),
            Subject::Runtime {
                program: program.clone(),
                cold: None,
            },
        ),
        (
            "isolab-runtime (cold seccomp)".into(),
            Subject::Runtime {
                program,
                cold: Some(cold_state.to_path_buf()),
            },
        ),
    ];
    let mut registry = isolab_engines::registry();
    let known: Vec<&str> = registry.iter().map(|e| e.name()).collect();
    if let Some(unknown) = args.engines.iter().find(|n| !known.contains(&n.as_str())) {
        bail!(
            "unknown engine `{unknown}`: expected one of {}",
            known.join(", ")
        );
    }
    // Every engine by default, in the registry's order; else the order asked.
    let mut chosen: Vec<Box<dyn Engine>> = Vec::new();
    if args.engines.is_empty() {
        chosen = registry;
    } else {
        for name in &args.engines {
            if let Some(i) = registry.iter().position(|e| e.name() == name) {
                chosen.push(registry.swap_remove(i));
            }
        }
    }
    for driver in chosen {
        subjects.push((driver.name().to_owned(), Subject::Driver(driver)));
    }
    Ok(subjects)
}

/// The subjects that are ready, and the image each runs (`None` for isolab-runtime).
type Ready = (Vec<(String, Subject)>, Vec<Option<PreparedImage>>);

/// Readies each engine and imports the image (an engine that is not ready is skipped,
/// and said so); returns the subjects kept, each with its prepared image.
fn prepare(args: &BenchStartArgs, subjects: Vec<(String, Subject)>) -> Result<Ready> {
    let mut prepared = Vec::new();
    let mut ready: Vec<(String, Subject)> = Vec::new();
    for (name, subject) in subjects {
        if let Subject::Driver(d) = &subject {
            if let Err(e) = d.ensure_ready() {
                println!("{name:15} skipped: {e}");
                continue;
            }
            let image = d
                .prepare_image(&args.image)
                .with_context(|| format!("{name}: importing {}", args.image.display()))?;
            println!(
                "{name:15} {} (image {})",
                d.version().unwrap_or_default(),
                image.digest
            );
            prepared.push(Some(image));
        } else {
            prepared.push(None);
        }
        ready.push((name, subject));
    }
    Ok((ready, prepared))
}

/// The measured rounds and what each start needs.
struct Rounds<'a> {
    args: &'a BenchStartArgs,
    ready: &'a [(String, Subject)],
    prepared: &'a [Option<PreparedImage>],
    tini: &'a Path,
    workdir: &'a Path,
    parent_rel: &'a Path,
}

/// Each subject's times (ms) and `(engine, the engine that ran just before it, ms)` of
/// every measured start.
type Measured = (Vec<Vec<f64>>, Vec<(usize, Option<usize>, f64)>);

impl Rounds<'_> {
    /// Runs 3 warm-up rounds and `--runs` measured ones, each in a new order shuffled
    /// with `seed`.
    fn run(&self, seed: u64) -> Result<Measured> {
        let mut times: Vec<Vec<f64>> = vec![Vec::new(); self.ready.len()];
        let mut log: Vec<(usize, Option<usize>, f64)> = Vec::new();
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut previous: Option<usize> = None;
        let total = self.args.runs + 3;
        for round in 0..total {
            for i in shuffled(self.ready.len(), &mut rng) {
                let ms = self.start(round, i)?;
                if round >= 3 {
                    times[i].push(ms);
                    log.push((i, previous, ms));
                }
                previous = Some(i);
            }
        }
        Ok((times, log))
    }

    /// One start of subject `i` in `round`: ms from preparing the container to the
    /// exit of its command (removing it afterwards is not timed).
    fn start(&self, round: usize, i: usize) -> Result<f64> {
        let (name, subject) = &self.ready[i];
        let id: isolab_runtime::ContainerId =
            format!("isolab-bench-{}-{i}-{round}", std::process::id()).parse()?;
        let request = RunRequest {
            id: id.clone(),
            argv: vec!["true".into()],
            workdir: self.workdir.to_path_buf(),
            network: NetworkMode::None,
            limits: isolab_cgroups::Limits::default(),
            cgroup_parent: self.parent_rel.to_path_buf(),
            env: Vec::new(),
        };
        if let Subject::Runtime {
            cold: Some(state), ..
        } = subject
        {
            // Not timed: the next start compiles its seccomp filter, as runc's and crun's do.
            let cache = state.join(isolab_runtime::security::seccomp::cache::DIR_NAME);
            match std::fs::remove_dir_all(&cache) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(e).with_context(|| format!("removing {}", cache.display()))
                }
                _ => {}
            }
        }
        let started = Instant::now();
        let argv = match (subject, &self.prepared[i]) {
            (Subject::Runtime { program, cold }, _) => {
                self.runtime_argv(program, cold.as_deref(), &id)
            }
            (Subject::Driver(d), Some(image)) => d
                .run_command(&request, image)
                .with_context(|| format!("{name}: preparing a container"))?,
            (Subject::Driver(_), None) => unreachable_prepared(name)?,
        };
        let status = spawn(&argv)?;
        let elapsed = started.elapsed();
        if let Subject::Driver(d) = subject {
            d.remove(&request)
                .with_context(|| format!("{name}: removing container {id}"))?;
        }
        if !status {
            bail!("{name}: `{}` failed", argv.join(" "));
        }
        Ok(elapsed.as_secs_f64() * 1000.0)
    }

    /// `isolab-runtime run` of `tini -- true` as container `id` (with `cold`, in that
    /// state directory).
    fn runtime_argv(
        &self,
        program: &Path,
        cold: Option<&Path>,
        id: &isolab_runtime::ContainerId,
    ) -> Vec<String> {
        let mut a = vec![program.display().to_string(), "run".into()];
        if let Some(state) = cold {
            a.extend(["--state-dir".into(), state.display().to_string()]);
        }
        a.extend([
            "--id".into(),
            id.to_string(),
            "--rootfs-type".into(),
            "overlay".into(),
            "--cgroup-parent".into(),
            self.parent_rel.display().to_string(),
            "--network".into(),
            "none".into(),
            "--bind".into(),
            format!(
                "{}:{}:ro",
                self.tini.display(),
                isolab_engines::oci::INIT_PATH
            ),
            self.args.image.display().to_string(),
            "--".into(),
            isolab_engines::oci::INIT_PATH.into(),
            "--".into(),
            "true".into(),
        ]);
        a
    }
}

/// The table of the results: each subject's median, p5, p95 and mean, its ratios
/// against isolab-runtime, then the medians by preceding engine.
fn print_results(
    args: &BenchStartArgs,
    seed: u64,
    ready: &[(String, Subject)],
    times: &[Vec<f64>],
    log: &[(usize, Option<usize>, f64)],
) -> Result<()> {
    println!();
    println!(
        "start→exit of `tini -- true` (tini as PID 1 in every runtime), N={} each, interleaved in a shuffled order every round (seed {seed}; after 3 warm-up rounds), network none, no limits; `cold seccomp`: isolab-runtime's filter cache removed before each start; ms",
        args.runs
    );
    println!(
        "{:29} {:>8} {:>8} {:>8} {:>8}   isolab-runtime ÷ engine, medians [95% bootstrap CI]: cache warm; cold seccomp",
        "engine", "median", "p5", "p95", "mean"
    );
    for (i, (name, subject)) in ready.iter().enumerate() {
        let t = &times[i];
        let q = |p: f64| percentile(t, p).unwrap_or(f64::NAN);
        let mean = t.iter().sum::<f64>() / t.len().max(1) as f64;
        let ratio = match subject {
            Subject::Runtime { .. } => String::new(),
            Subject::Driver(_) => format!(
                "{}; {}",
                median_ratio(&times[0], t)?,
                median_ratio(&times[1], t)?
            ),
        };
        println!(
            "{name:29} {:>8.1} {:>8.1} {:>8.1} {:>8.1}   {ratio}",
            q(50.0),
            q(5.0),
            q(95.0),
            mean
        );
    }
    let names: Vec<&str> = ready.iter().map(|(n, _)| n.as_str()).collect();
    print!("{}", predecessor_table(&names, log));
    Ok(())
}

/// `ours ÷ theirs` of the medians with its 95% bootstrap interval, e.g. `0.47× [0.44, 0.50]`.
fn median_ratio(ours: &[f64], theirs: &[f64]) -> Result<String> {
    let a = Sample::new(ours.to_vec()).context("no measurements of isolab-runtime")?;
    let b = Sample::new(theirs.to_vec()).context("no measurements")?;
    let (ma, mb) = (
        percentile(ours, 50.0).unwrap_or(f64::NAN),
        percentile(theirs, 50.0).unwrap_or(f64::NAN),
    );
    Ok(
        match bootstrap_ratio_ci(&b, &a, Center::Median, Direction::Lower, 0.95, 2000, 1) {
            Some(ci) => format!("{:.2}× [{:.2}, {:.2}]", ma / mb, ci.low, ci.high),
            None => format!("{:.2}×", ma / mb),
        },
    )
}

/// The indices `0..n` in a random order.
fn shuffled(n: usize, rng: &mut impl rand::Rng) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    order.shuffle(rng);
    order
}

/// The median of each engine's starts by the engine that ran just before it (rows: the
/// engine; columns: its predecessor; `-` where that pair never ran), from `log`'s
/// `(engine, predecessor, ms)`.
fn predecessor_table(names: &[&str], log: &[(usize, Option<usize>, f64)]) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nmedian ms by the engine that ran just before (rows: engine; columns: before it)"
    );
    let width = names.iter().map(|n| n.len()).max().unwrap_or(6).max(6);
    let _ = write!(out, "{:width$}", "");
    for n in names {
        let _ = write!(out, " {n:>width$}");
    }
    out.push('\n');
    for (i, name) in names.iter().enumerate() {
        let _ = write!(out, "{name:width$}");
        for p in 0..names.len() {
            let t: Vec<f64> = log
                .iter()
                .filter(|(e, before, _)| *e == i && *before == Some(p))
                .map(|(_, _, ms)| *ms)
                .collect();
            match percentile(&t, 50.0) {
                Some(m) => {
                    let _ = write!(out, " {:>width$}", format!("{m:.1} ({})", t.len()));
                }
                None => {
                    let _ = write!(out, " {:>width$}", "-");
                }
            }
        }
        out.push('\n');
    }
    out
}

fn unreachable_prepared(name: &str) -> Result<Vec<String>> {
    bail!("{name}: the image was not prepared")
}

fn tempfile_dir() -> Result<RemovedOnDrop> {
    let dir = std::env::temp_dir().join(format!("isolab-bench-start-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(RemovedOnDrop(dir))
}

/// A directory of the benchmark's, removed with what is in it when the benchmark ends,
/// also by an error.
struct RemovedOnDrop(PathBuf);

impl Drop for RemovedOnDrop {
    fn drop(&mut self) {
        match std::fs::remove_dir_all(&self.0) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                eprintln!("warning: cannot remove {}: {e}", self.0.display())
            }
            _ => {}
        }
    }
}

/// Runs `argv`, output discarded; whether it exited 0.
fn spawn(argv: &[String]) -> Result<bool> {
    let (program, rest) = argv.split_first().context("empty command")?;
    let mut command = Command::new(program);
    command
        .args(rest)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let status = command
        .status()
        .with_context(|| format!("starting {program}"))?;
    Ok(status.success())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_round_runs_every_engine_once_in_an_order_the_seed_repeats() {
        let mut a = rand::rngs::StdRng::seed_from_u64(7);
        let mut b = rand::rngs::StdRng::seed_from_u64(7);
        let mut firsts = std::collections::BTreeSet::new();
        for _ in 0..50 {
            let order = shuffled(9, &mut a);
            assert_eq!(order, shuffled(9, &mut b));
            let mut sorted = order.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..9).collect::<Vec<_>>());
            firsts.insert(order[0]);
        }
        // Not a fixed order: in 50 rounds more than one engine goes first.
        assert!(firsts.len() > 1, "{firsts:?}");
    }

    #[test]
    fn the_predecessor_table_holds_the_median_of_each_pair() {
        let log = [
            (1, Some(0), 10.0),
            (1, Some(0), 30.0),
            (1, Some(0), 20.0),
            (0, Some(1), 4.0),
            (0, None, 99.0),
        ];
        let t = predecessor_table(&["isolab-runtime", "crun"], &log);
        let rows: Vec<&str> = t.lines().skip_while(|l| !l.starts_with("median")).collect();
        assert!(
            rows[1].contains("isolab-runtime") && rows[1].contains("crun"),
            "{t}"
        );
        assert!(
            rows[2].starts_with("isolab-runtime") && rows[2].ends_with("4.0 (1)"),
            "{t}"
        );
        assert!(
            rows[3].starts_with("crun") && rows[3].contains("20.0 (3)"),
            "{t}"
        );
        assert!(rows[3].trim_end().ends_with('-'), "{t}");
    }
}
