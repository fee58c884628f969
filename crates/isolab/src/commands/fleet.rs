//! `isolab fleet submit|task|status|cancel`: one experiment run by many hosts through
//! Slurm, into a shared PostgreSQL store (docs/fleet.md).

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use anyhow::{bail, Context, Result};
use isolab_fleet::{batch_script, host_seed, Nodes, Slurm, SlurmRequest};
use isolab_lab::{ExperimentSpec, Source};
use isolab_report::fleet::{Design, HostData};
use isolab_store::{ExperimentStatus, FleetRecord, NewFleet};
use isolab_tools::SystemTools;

use super::run::{execute, Settings, Start};
use super::Exit;
use crate::cli::{FleetCommand, FleetSubmitArgs};
use crate::host;

pub fn fleet(db: &Path, command: FleetCommand) -> Result<Exit> {
    if !host::is_postgres_url(db) {
        bail!(
            "a fleet's hosts must all reach its store, and `{}` is a file on this machine: \
             pass --db postgres://USER@HOST[:PORT]/DATABASE (or set ISOLAB_DB)",
            db.display()
        );
    }
    match command {
        FleetCommand::Submit(args) => submit(db, args),
        FleetCommand::Task { fleet, workdir } => task(db, &fleet, workdir),
        FleetCommand::Show { fleet, json } => show(db, &fleet, json),
        FleetCommand::Report { fleet, output } => report(db, &fleet, output),
        FleetCommand::Status { fleet } => status(db, &fleet),
        FleetCommand::Cancel { fleet } => cancel(db, &fleet),
    }
}

fn submit(db: &Path, args: FleetSubmitArgs) -> Result<Exit> {
    let facts = host::facts()?;
    let spec = super::load_spec(&args.spec, &facts)?;
    let text = std::fs::read_to_string(&args.spec)
        .with_context(|| format!("cannot read spec {}", args.spec.display()))?;
    let output_dir = match args.output_dir {
        Some(dir) => dir,
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    let request = SlurmRequest {
        job_name: format!("isolab-{}", spec.name),
        partition: args.partition.clone(),
        nodes: if args.nodelist.is_empty() {
            Nodes::Count(args.nodes.unwrap_or(1))
        } else {
            Nodes::List(args.nodelist.clone())
        },
        time_limit: args.time.clone(),
        output_dir: output_dir.clone(),
    };
    if args.split_cells && request.node_count() > spec.cells.len() {
        bail!(
            "--split-cells over {} nodes leaves some without a cell: the spec has {} cells; \
             ask for at most {} nodes",
            request.node_count(),
            spec.cells.len(),
            spec.cells.len()
        );
    }
    let isolab = match args.isolab {
        Some(path) => path,
        None => std::env::current_exe().context("cannot find this isolab binary's path")?,
    };
    let task_args = vec!["--workdir".to_owned(), args.workdir.display().to_string()];
    if args.dry_run {
        print!("{}", batch_script(&request, &isolab, 0, &task_args));
        println!("# (dry run: nothing recorded or submitted; the fleet id, 0 here, is assigned on submit)");
        return Ok(Exit::Success);
    }
    let mut store = host::open_store(db)?;
    let fleet = store.create_fleet(&NewFleet {
        name: spec.name.clone(),
        spec_toml: text,
        spec_path: Some(
            std::fs::canonicalize(&args.spec)
                .unwrap_or_else(|_| args.spec.clone())
                .display()
                .to_string(),
        ),
        seed: spec.seed.unwrap_or_else(rand::random),
        created_at: SystemTime::now(),
        scheduler: "slurm".to_owned(),
        request: request.describe(),
        split_cells: args.split_cells,
    })?;
    let script = output_dir.join(format!("isolab-fleet-{fleet}.sh"));
    std::fs::write(&script, batch_script(&request, &isolab, fleet, &task_args))
        .with_context(|| format!("cannot write the batch script {}", script.display()))?;
    let url = db.to_string_lossy();
    let job = Slurm::new(&SystemTools)
        .submit(&script, &[("ISOLAB_DB", url.as_ref())])
        .with_context(|| {
            format!(
                "submitting fleet {fleet} ({}) to Slurm; the fleet is recorded without a \
                 job and can be submitted again",
                spec.name
            )
        })?;
    store.set_fleet_job(fleet, &job)?;
    println!(
        "fleet {fleet} ({}): Slurm job {job}, {}; script {}\nfollow it with `isolab fleet status {fleet}`",
        spec.name,
        request.describe(),
        script.display()
    );
    Ok(Exit::Success)
}

/// This task's share of a split fleet's cells: Slurm's node number of the task and the
/// job's node count, from the environment `srun` gives each task.
fn slurm_share() -> Result<(usize, usize)> {
    let var = |name: &str| -> Result<usize> {
        let value = std::env::var(name).with_context(|| {
            format!(
                "{name} is not set: `isolab fleet task` of a fleet with split cells runs under \
                 Slurm's srun, which tells each task its share"
            )
        })?;
        value
            .trim()
            .parse()
            .with_context(|| format!("{name}=`{value}` is not a number"))
    };
    let (part, parts) = (var("SLURM_NODEID")?, var("SLURM_NNODES")?);
    if parts == 0 || part >= parts {
        bail!("SLURM_NODEID={part} is not below SLURM_NNODES={parts}");
    }
    Ok((part, parts))
}

/// This host's name, as the kernel has it.
fn hostname() -> Result<String> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .context("cannot read /proc/sys/kernel/hostname")?;
    Ok(name.trim().to_owned())
}

fn task(db: &Path, fleet: &str, workdir: PathBuf) -> Result<Exit> {
    let store = host::open_store(db)?;
    let id = store.resolve_fleet(fleet)?;
    let record = store.fleet(id)?;
    let host = hostname()?;
    let facts = host::facts()?;
    let spec = ExperimentSpec::parse(
        Source::new(
            record
                .spec_path
                .clone()
                .unwrap_or_else(|| format!("fleet {id}")),
            record.spec_toml.clone(),
        ),
        &facts,
    )
    .with_context(|| format!("fleet {id}'s spec on host {host}"))?;
    let existing = store.fleet_experiment(id, &host)?;
    let mut spec = spec;
    if record.split_cells {
        match existing {
            // A requeued task keeps the share it started with, whatever its node number.
            Some(experiment) => {
                let keys: Vec<String> = store
                    .cells(experiment)?
                    .into_iter()
                    .map(|c| c.key)
                    .collect();
                spec.cells.retain(|c| keys.contains(&c.key()));
            }
            None => {
                let (part, parts) = slurm_share()?;
                spec.cells = std::mem::take(&mut spec.cells)
                    .into_iter()
                    .enumerate()
                    .filter(|(position, _)| position % parts == part)
                    .map(|(_, cell)| cell)
                    .collect();
                println!(
                    "host {host}: fleet {id} splits its cells across {parts} hosts; this host \
                     runs share {} of {parts} ({} cells)",
                    part + 1,
                    spec.cells.len()
                );
            }
        }
    }
    let start = match existing {
        Some(experiment) => {
            if store.experiment(experiment)?.status == ExperimentStatus::Complete {
                println!("host {host}: experiment {experiment} of fleet {id} is already complete");
                return Ok(Exit::Success);
            }
            Start::Resume(experiment)
        }
        None => Start::Fleet {
            fleet: id,
            host: host.clone(),
            seed: host_seed(record.seed, &host),
        },
    };
    let (_store, outcome) = execute(
        store,
        &spec,
        start,
        &Settings {
            workdir,
            keep_workdirs: false,
            quiet: true,
            json: false,
        },
    )?;
    println!(
        "host {host}: experiment {} of fleet {id} is {} ({} runs this time, {} failed cells)",
        outcome.experiment, outcome.status, outcome.runs, outcome.failed_cells
    );
    Ok(match outcome.status {
        ExperimentStatus::Interrupted => Exit::Interrupted,
        _ if outcome.failed_cells > 0 => Exit::FailedCells,
        _ => Exit::Success,
    })
}

/// Fleet `fleet`'s record and each host's experiment, read from the store.
fn load(db: &Path, fleet: &str) -> Result<(FleetRecord, Vec<HostData>)> {
    let store = host::existing_store(db)?;
    let id = store.resolve_fleet(fleet)?;
    let record = store.fleet(id)?;
    let mut hosts = Vec::new();
    for h in &record.hosts {
        let data = isolab_report::ExperimentData::load(&store, h.experiment)?;
        let options = super::summary_options(&data, false);
        hosts.push(HostData {
            host: h.host.clone(),
            data,
            options,
        });
    }
    Ok((record, hosts))
}

/// How fleet `record`'s cells were spread over its hosts.
fn design(record: &FleetRecord) -> Design {
    if record.split_cells {
        Design::Split
    } else {
        Design::Blocked
    }
}

fn report(db: &Path, fleet: &str, output: Option<PathBuf>) -> Result<Exit> {
    let (record, hosts) = load(db, fleet)?;
    let points = isolab_report::fleet::pooled(&hosts, 0.95, design(&record));
    let analyses: Vec<_> = hosts
        .iter()
        .map(|h| super::analyse(&h.data, false))
        .collect();
    let html = isolab_report::html::fleet_html(
        record.id,
        &record.name,
        &record.request,
        design(&record),
        &points,
        &hosts,
        &analyses,
    );
    let path = output.unwrap_or_else(|| PathBuf::from(format!("isolab-fleet-{}.html", record.id)));
    std::fs::write(&path, html)
        .with_context(|| format!("cannot write the fleet's report to {}", path.display()))?;
    println!("{}", path.display());
    Ok(Exit::Success)
}

fn show(db: &Path, fleet: &str, json: bool) -> Result<Exit> {
    let (record, hosts) = load(db, fleet)?;
    let id = record.id;
    let points = isolab_report::fleet::pooled(&hosts, 0.95, design(&record));
    if json {
        println!(
            "{}",
            super::json::document(
                "fleet",
                &serde_json::json!({ "fleet": id, "name": record.name, "hosts": record.hosts.iter().map(|h| (&h.host, h.experiment)).collect::<Vec<_>>(), "pooled": points })
            )?
        );
        return Ok(Exit::Success);
    }
    match design(&record) {
        Design::Blocked => println!(
            "fleet {id} ({}): {}; each configuration against its baseline within each \
             host, pooled with the host as a block",
            record.name,
            isolab_report::fleet::hosts(hosts.len())
        ),
        Design::Split => println!(
            "fleet {id} ({}): {}, each with a share of the cells\nwarning: {}",
            record.name,
            isolab_report::fleet::hosts(hosts.len()),
            isolab_report::fleet::SPLIT_WARNING
        ),
    }
    if points.is_empty() {
        println!("no configuration could be compared with its baseline on any host yet");
    } else {
        print!(
            "{}",
            isolab_report::fleet::pooled_table(&points, design(&record)).render(super::color())
        );
        let differing = points
            .iter()
            .filter(|p| p.comparison.heterogeneity.is_some_and(|h| h.differs()))
            .count();
        if differing > 0 {
            println!(
                "{differing} configurations have an effect that differs between hosts: \
                 their pooled ratio describes no single host; read the per-host ratios"
            );
        }
    }
    for h in &hosts {
        let analysis = super::analyse(&h.data, false);
        println!("\nhost {} (experiment {}):", h.host, h.data.record.id);
        let report = isolab_report::Report::new(&h.data, &analysis);
        print!(
            "{}",
            report.text(isolab_report::Reach::Host, super::color().into())
        );
    }
    Ok(Exit::Success)
}

fn status(db: &Path, fleet: &str) -> Result<Exit> {
    let store = host::existing_store(db)?;
    let id = store.resolve_fleet(fleet)?;
    let record = store.fleet(id)?;
    println!(
        "fleet {id} ({}): {}, seed {}",
        record.name, record.request, record.seed
    );
    match &record.job_id {
        None => println!("  not submitted (no Slurm job recorded)"),
        Some(job) => match Slurm::new(&SystemTools).job(job) {
            Ok(Some(j)) => println!(
                "  Slurm job {job}: {} (reason {}), nodes {}, run time {}, exit code {}",
                j.state, j.reason, j.nodes, j.run_time, j.exit_code
            ),
            Ok(None) => println!("  Slurm job {job}: ended (Slurm no longer knows it)"),
            Err(e) => println!("  Slurm job {job}: cannot ask Slurm ({e})"),
        },
    }
    if record.hosts.is_empty() {
        println!("  no host has started yet");
    }
    for h in &record.hosts {
        let e = store.experiment(h.experiment)?;
        let counted = store
            .runs(h.experiment)?
            .iter()
            .filter(|r| r.is_counted())
            .count();
        println!(
            "  {}: experiment {} {}, {counted} counted runs",
            h.host, h.experiment, e.status
        );
    }
    Ok(Exit::Success)
}

fn cancel(db: &Path, fleet: &str) -> Result<Exit> {
    let store = host::existing_store(db)?;
    let id = store.resolve_fleet(fleet)?;
    let record = store.fleet(id)?;
    let Some(job) = record.job_id else {
        bail!(
            "fleet {id} ({}) was never submitted: nothing to cancel",
            record.name
        );
    };
    let slurm = Slurm::new(&SystemTools);
    let nodes = slurm.job(&job)?.map(|j| j.nodes);
    slurm.cancel(&job)?;
    println!("fleet {id}: Slurm job {job} cancelled");
    if let Some(nodes) = nodes.filter(|n| !n.is_empty() && n != "(null)") {
        let isolab = std::env::current_exe().context("cannot find this isolab binary's path")?;
        let out = slurm
            .run_on_nodes(&nodes, None, &[&isolab.display().to_string(), "gc"])
            .with_context(|| format!("running `isolab gc` on {nodes} after the cancel"))?;
        print!("{out}");
        println!("fleet {id}: `isolab gc` ran on {nodes}");
    }
    Ok(Exit::Success)
}
