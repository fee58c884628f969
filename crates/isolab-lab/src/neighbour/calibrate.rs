//! Calibration: what neighbours are sized against, each measured once per
//! process by an unstored run on the platform — what the subject uses alone (its
//! solo profile), the IOPS of the working directory's disk, and the throughput
//! of the neighbour network.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use isolab_store::Telemetry;

use super::{
    busiest_rx, disk_capacity_command, disk_ios, net_capacity_command, net_rx, parse_fio_iops,
    parse_iperf3_gbps, JsonError, NetNames, SoloProfile, CALIBRATION_IODEPTH,
};
use crate::platform::{
    Execution, Executor, Interrupt, Job, NeighbourJobs, PlatformDef, PlatformError, PlatformKind,
};
use crate::spec::Cell;

/// Runs a subject once without neighbours, unstored, calling its argument when the
/// measurement starts: what [`Calibrations::solo_profile`] measures.
pub(crate) type SoloRun<'a> = &'a dyn Fn(&dyn Fn()) -> Result<Execution, PlatformError>;

/// The calibrations of one runner, each measured at its first use.
#[derive(Debug)]
pub(crate) struct Calibrations {
    /// The proc file system, where disk and network counters are read.
    proc_root: PathBuf,
    /// Cpus (and IOPS, Mbit/s) each subject uses alone, by the key of its cell
    /// without neighbour: for neighbours with a utilisation target.
    solo: RefCell<HashMap<String, SoloProfile>>,
    /// IOPS of the working directory's disk (random 50/50, 32 KiB): for disk
    /// neighbours with a utilisation target.
    disk_iops: RefCell<Option<f64>>,
    /// Throughput of the neighbour network in Mbit/s (one unlimited TCP stream
    /// between its namespaces, or from a guest of a VM platform, by its accelerator
    /// and guest OS): for network neighbours with a utilisation target or a cell that
    /// reserves `net`.
    net_mbps: RefCell<HashMap<String, f64>>,
}

impl Calibrations {
    /// Nothing measured yet; counters are read below `proc_root`.
    pub(crate) fn new(proc_root: PathBuf) -> Calibrations {
        Calibrations {
            proc_root,
            solo: RefCell::default(),
            disk_iops: RefCell::default(),
            net_mbps: RefCell::default(),
        }
    }

    /// What the subject of `cell` uses alone (cpus; IOPS on `disk` when named):
    /// measured once by `run`, an unstored calibration run of the subject without
    /// neighbours, which calls its argument when its measurement starts (a service
    /// stack's, once its components are up and its data loaded): the disk and
    /// network counters are read from there to its end, per second of its `wall`.
    pub(crate) fn solo_profile(
        &self,
        cell: &Cell,
        disk: Option<&str>,
        run: SoloRun<'_>,
    ) -> Result<(SoloProfile, Option<String>), PlatformError> {
        let key: Vec<(String, String)> = cell
            .levels
            .iter()
            .filter(|(f, _)| f != "neighbour" && f != "replica")
            .cloned()
            .collect();
        let key = crate::spec::levels_key(&key);
        if let Some(solo) = self.solo.borrow().get(&key) {
            return Ok((*solo, None));
        }
        let ios = |d: Option<&str>| d.and_then(|d| disk_ios(&self.proc_root, d));
        let start = RefCell::new((ios(disk), net_rx(&self.proc_root)));
        let e = run(&|| *start.borrow_mut() = (ios(disk), net_rx(&self.proc_root)))?;
        let (before, net_before) = start.into_inner();
        let after = ios(disk);
        let net_after = net_rx(&self.proc_root);
        let wall = e.telemetry.get(Telemetry::Wall).filter(|w| *w > 0.0);
        let cpus = match (e.telemetry.get(Telemetry::CpuUsage), wall) {
            (Some(c), Some(w)) => c / w,
            _ => cell.shape.cpus() as f64,
        };
        let disk_iops = match (before, after, wall) {
            (Some(b), Some(a), Some(w)) => a.saturating_sub(b) as f64 / w,
            _ => 0.0,
        };
        let net_gbps = wall.map_or(0.0, |w| {
            busiest_rx(&net_before, &net_after) as f64 * 8.0 / 1e9 / w
        });
        let solo = SoloProfile {
            cpus_used: cpus,
            disk_iops,
            net_gbps,
        };
        self.solo.borrow_mut().insert(key.clone(), solo);
        Ok((
            solo,
            Some(format!(
                "calibration: the subject ({key}) uses {cpus:.2} cpus{}{} alone (one unstored solo run)",
                disk.map(|d| format!(", {disk_iops:.0} IOPS on {d}")).unwrap_or_default(),
                if net_gbps > 0.0 {
                    format!(", {:.0} Mbit/s on its busiest interface", net_gbps * 1000.0)
                } else {
                    String::new()
                }
            )),
        ))
    }

    /// The IOPS the working directory's disk sustains (random 50/50 read/write,
    /// 32 KiB, iodepth 16): measured once by an unstored fio run on the host.
    pub(crate) fn disk_capacity(
        &self,
        platform: &dyn Executor,
        interrupt: &Interrupt,
        job: &Job,
        direct: bool,
    ) -> Result<(f64, Option<String>), PlatformError> {
        if let Some(iops) = *self.disk_iops.borrow() {
            return Ok((iops, None));
        }
        let iops = calibrate(
            (platform, interrupt),
            (job, PlatformDef::new(PlatformKind::HOST), None),
            ("disk-capacity", "diskcal", "disk calibration"),
            |workdir| disk_capacity_command(workdir, direct),
            None,
            parse_fio_iops,
        )?;
        *self.disk_iops.borrow_mut() = Some(iops);
        Ok((
            iops,
            Some(format!(
                "calibration: the working directory's disk does {iops:.0} IOPS (fio random 50/50 read/write, 32 KiB, iodepth {}; one unstored run)",
                CALIBRATION_IODEPTH
            )),
        ))
    }

    /// The throughput of the neighbour network (one unlimited TCP stream between
    /// its two namespaces, iperf3): measured once by an unstored run on the host,
    /// with a neighbour network of one server around it. On a VM platform, whose
    /// neighbours are VMs streaming over isolab's bridge, the stream runs from a plain
    /// guest of the platform's accelerator and guest OS to a server on the bridge.
    pub(crate) fn net_capacity(
        &self,
        platform: &dyn Executor,
        interrupt: &Interrupt,
        job: &Job,
    ) -> Result<(f64, Option<String>), PlatformError> {
        let key = match job.platform.accel {
            Some(accel) => format!("{accel:?} {:?}", job.platform.guest),
            None => "host".to_owned(),
        };
        if let Some(mbps) = self.net_mbps.borrow().get(&key) {
            return Ok((*mbps, None));
        }
        let (gbps, through) = match job.platform.accel {
            Some(accel) => (
                net_capacity_in_guest(platform, interrupt, job, accel)?,
                "from a guest over isolab's bridge",
            ),
            None => (
                net_capacity_on_host(platform, interrupt, job)?,
                "between its namespaces",
            ),
        };
        let mbps = gbps * 1000.0;
        self.net_mbps.borrow_mut().insert(key, mbps);
        Ok((
            mbps,
            Some(format!(
                "calibration: the neighbour network carries {mbps:.0} Mbit/s (one unlimited iperf3 TCP stream {through}; one unstored run)"
            )),
        ))
    }
}

/// One unlimited TCP stream between the namespaces of a neighbour network of one
/// server, from the host platform, in Gbit/s.
fn net_capacity_on_host(
    platform: &dyn Executor,
    interrupt: &Interrupt,
    job: &Job,
) -> Result<f64, PlatformError> {
    let names = NetNames::of(std::process::id());
    // A neighbour network of one server, and no neighbour instance.
    let network = NeighbourJobs {
        level: "network calibration".into(),
        instances: Vec::new(),
        limits: isolab_cgroups::Limits::default(),
        target_util_pct: None,
        reachable_util_pct: None,
        disk_target: None,
        net_target: None,
        net_rate_mbps: None,
        settle: Duration::ZERO,
        network_servers: 1,
        loads_pct: Vec::new(),
    };
    calibrate(
        (platform, interrupt),
        (job, PlatformDef::new(PlatformKind::HOST), None),
        ("net-capacity", "netcal", "network calibration"),
        |_| net_capacity_command(&names),
        Some(network),
        parse_iperf3_gbps,
    )
}

/// One unlimited TCP stream from a plain guest of `job`'s VM platform (its
/// accelerator, guest OS and image) to a server of a neighbour network on isolab's
/// bridge, in Gbit/s: what a neighbour VM can send.
fn net_capacity_in_guest(
    platform: &dyn Executor,
    interrupt: &Interrupt,
    job: &Job,
    accel: crate::platform::Accel,
) -> Result<f64, PlatformError> {
    // Not `…-netcal`: that is the calibration guest's own (its tap's lease).
    let net = super::run::neighbour_net(job, 1, Some("netsrv"))?;
    let client = net_capacity_command(net.names());
    let argv = net.guest_client(&client).unwrap_or(client);
    let plain = PlatformDef {
        guest: job.platform.guest.clone(),
        ..PlatformDef::vm(PlatformKind::VM, accel)
    };
    let measured = calibrate(
        (platform, interrupt),
        (job, plain, job.image.clone()),
        ("net-capacity", "netcal", "network calibration"),
        |_| argv,
        None,
        parse_iperf3_gbps,
    );
    let removed = net.remove();
    let gbps = measured?;
    removed.map_err(|e| PlatformError::Helper {
        phase: "network calibration",
        command: "ip netns del … (the neighbour servers' namespace)".into(),
        exit: crate::platform::ExitKind::Code(-1),
        stderr: e.to_string(),
    })?;
    Ok(gbps)
}

/// Runs one calibration command next to `job` on platform `on` (with its image),
/// unstored: in the directory `dir` of its working directory (removed after), as
/// job `<job>-<suffix>`, with `neighbours` around it; `parse` reads the measure
/// from its output, and a failure to is a `phase` error.
fn calibrate(
    (platform, interrupt): (&dyn Executor, &Interrupt),
    (job, on, image): (&Job, PlatformDef, Option<PathBuf>),
    (dir, suffix, phase): (&str, &str, &'static str),
    argv: impl FnOnce(&Path) -> Vec<String>,
    neighbours: Option<NeighbourJobs>,
    parse: fn(&str) -> Result<f64, JsonError>,
) -> Result<f64, PlatformError> {
    let workdir = job.workdir.join(dir);
    std::fs::create_dir_all(&workdir).map_err(|source| PlatformError::Io {
        action: "cannot create working directory",
        path: workdir.clone(),
        source,
    })?;
    let calibration = Job {
        platform: on,
        image,
        name: format!("{}-{suffix}", job.name),
        argv: argv(&workdir),
        prepare: None,
        cleanup: None,
        server: None,
        workdir: workdir.clone(),
        limits: isolab_cgroups::Limits::default(),
        timeout: Duration::from_secs(120),
        neighbours,
        uses_disk: false,
        stack: None,
    };
    let e = platform.execute(&calibration, interrupt)?;
    let _ = std::fs::remove_dir_all(&workdir);
    parse(&e.stdout).map_err(|err| PlatformError::Helper {
        phase,
        command: calibration.argv.join(" "),
        exit: e.exit,
        stderr: err.to_string(),
    })
}

#[cfg(all(test, feature = "testing"))]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::platform::{Drivers, IsolabConfig, Supervisor, SupervisorConfig};
    use crate::testing::{FakeCgroupfs, FakeLauncher, Scripted};

    #[test]
    fn the_disk_is_calibrated_once_by_an_unstored_fio_run_on_the_host() {
        let cgroupfs = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        let fio = include_str!("testdata/fio-randrw-libaio.json");
        let launcher = Arc::new(
            FakeLauncher::new().on("fio", [Scripted::success(fio, Duration::from_secs(10))]),
        );
        let supervisor = Supervisor::with_launcher(
            SupervisorConfig {
                hierarchy: FakeCgroupfs::create(cgroupfs.path()).unwrap(),
                proc_root: work.path().join("proc"),
                cgroup_base: PathBuf::from("isolab"),
                sample_interval: Duration::from_millis(100),
                probe: None,
            },
            launcher.clone(),
        );
        let host = Drivers::new(supervisor, IsolabConfig::discover());
        let job = Job {
            platform: PlatformDef::new(PlatformKind::HOST),
            image: None,
            name: "exp1-pid1/c0-r1".into(),
            argv: vec!["true".into()],
            prepare: None,
            cleanup: None,
            server: None,
            workdir: work.path().to_path_buf(),
            limits: isolab_cgroups::Limits::default(),
            timeout: Duration::from_secs(60),
            neighbours: None,
            uses_disk: true,
            stack: None,
        };
        let calibrations = Calibrations::new(work.path().join("proc"));
        let interrupt = Interrupt::new().unwrap();
        let (iops, note) = calibrations
            .disk_capacity(&host, &interrupt, &job, false)
            .unwrap();
        assert!(
            (iops - (11450.274863 + 11363.818091)).abs() < 1e-6,
            "{iops}"
        );
        assert_eq!(
            note.unwrap(),
            "calibration: the working directory's disk does 22814 IOPS (fio random 50/50 read/write, 32 KiB, iodepth 16; one unstored run)"
        );
        // Measured once per process; the calibration's directory is gone.
        let (again, note) = calibrations
            .disk_capacity(&host, &interrupt, &job, false)
            .unwrap();
        assert_eq!((again, note), (iops, None));
        let launched = launcher.launched();
        assert_eq!(launched.len(), 1);
        assert_eq!(
            launched[0].cgroup.as_deref(),
            Some(std::path::Path::new("isolab/exp1-pid1/c0-r1-diskcal"))
        );
        assert!(!work.path().join("disk-capacity").exists());
    }
}
