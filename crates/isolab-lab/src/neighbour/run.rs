//! Neighbours while they run: each instance started in a cgroup of its own next to
//! the subject's (limits applied and read back), the neighbour network and its
//! rate, the counters at the subject's start, and, after the subject, the stop
//! (kill, counters read, cgroups and network removed) and the telemetry and notes
//! the subject's run gets about them.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use isolab_cgroups::{Cgroup, Hierarchy};
use isolab_store::Telemetry as T;

use crate::platform::launch::{log_path, Launch, Launcher, Process};
use crate::platform::limit::limit;
use crate::platform::process::read_tail;
use crate::platform::{
    DiskTarget, Execution, ExitKind, GuestCpu, Interrupt, Job, NeighbourGuest, NeighbourHost,
    NeighbourJobs, NetTarget, PlatformError,
};

/// Where the neighbours of a run live, as the instance supervisor gives it.
pub(crate) struct NeighbourSite<'a> {
    /// The cgroup layout.
    pub hierarchy: &'a Hierarchy,
    /// The cgroup of each instance, relative to the mounts (`<job>-nb<i>`).
    pub cgroups: Vec<PathBuf>,
    /// Who starts their processes.
    pub launcher: &'a dyn Launcher,
    /// The proc file system (disk and network counters).
    pub proc_root: &'a Path,
}

/// Starts each neighbour instance of `job` in a cgroup of its own
/// (`<job>-nb<i>`, limits applied and read back), then lets them run for their
/// settle time. Everything started is stopped again on error. `host` says whether
/// they run as processes, in containers or in guests of their own (network
/// neighbours always run as processes: they live in the neighbour namespaces).
pub(crate) fn start_neighbours<'c>(
    site: &NeighbourSite<'_>,
    job: &Job,
    set: &NeighbourJobs,
    interrupt: &Interrupt,
    host: NeighbourHost<'c>,
) -> Result<RunningNeighbours<'c>, PlatformError> {
    // Network neighbours live in the neighbour namespaces, so on the host; neighbour
    // VMs stream to servers on isolab's bridge instead.
    let host = match host {
        NeighbourHost::Guests(_) => host,
        _ if set.network_servers > 0 => NeighbourHost::Processes,
        _ => host,
    };
    let containers = match host {
        NeighbourHost::Containers(c) => Some(c),
        _ => None,
    };
    let guests = match host {
        NeighbourHost::Guests(g) => Some(g),
        _ => None,
    };
    let net = if set.network_servers > 0 {
        let bridged = guests.map(|_| "nbnet");
        Some(neighbour_net(job, set.network_servers, bridged)?)
    } else {
        None
    };
    let mut net_rate = None;
    // Neighbour VMs shape their own taps; processes share namespace a's veth.
    if let (Some(net), Some(mbps), None) = (&net, set.net_rate_mbps, guests) {
        net_rate = Some(rate_limit(net, mbps)?);
    }
    let mut running = RunningNeighbours {
        instances: Vec::new(),
        host,
        ids: Vec::new(),
        excluded: net
            .as_ref()
            .map(|n| n.host_interfaces())
            .unwrap_or_default(),
        net,
        net_rate,
        applied: None,
        disk_start: None,
        net_start: None,
        proc_root: site.proc_root.to_path_buf(),
        facts: Vec::new(),
    };
    for (i, argv) in set.instances.iter().enumerate() {
        let started = (|| {
            let cgroup = Cgroup::create(site.hierarchy, &site.cgroups[i])?;
            let spawned = (|| {
                if let Some(g) = guests {
                    let applied = limit(&cgroup, &g.outer_limits(&set.limits))?;
                    running
                        .applied
                        .get_or_insert(g.recorded_limits(applied, &set.limits));
                    let argv = guest_argv(running.net.as_ref(), argv)?;
                    let mut guest = g.start(job, i, &argv, &cgroup)?;
                    running.facts.extend(guest.facts());
                    running.excluded.extend(guest.host_interfaces());
                    if let Some(rate) = guest.net_rate() {
                        *running.net_rate.get_or_insert(0.0) += rate;
                    }
                    // A cpu stressor's load spread over the guest's vCPUs.
                    let load_pct = set
                        .loads_pct
                        .get(i)
                        .map(|load| load / f64::from(guest.vcpus().max(1)));
                    return Ok(Instance::Guest {
                        guest,
                        at_start: None,
                        load_pct,
                    });
                }
                let applied = limit(&cgroup, &set.limits)?;
                running.applied.get_or_insert(applied);
                let log = format!("neighbour{i}");
                let start = |argv: &[String]| {
                    site.launcher.start(Launch {
                        argv,
                        workdir: &job.workdir,
                        log: &log,
                        cgroup: Some(&cgroup),
                        count: false,
                    })
                };
                match containers {
                    // Limited from outside: the container's cgroup nests in this one.
                    Some(c) => {
                        let id = format!("{}-nb{i}", job.name);
                        start(&c.wrap(&id, argv, cgroup.rel(), &job.workdir)?)
                    }
                    None => start(argv),
                }
                .map(Instance::Process)
            })();
            match spawned {
                Ok(child) => Ok((cgroup, child)),
                Err(e) => {
                    let _ = cgroup.remove();
                    Err(e)
                }
            }
        })();
        if containers.is_some() {
            running.ids.push(format!("{}-nb{i}", job.name));
        }
        match started {
            Ok(instance) => running.instances.push(instance),
            Err(e) => {
                running.stop(None);
                return Err(e);
            }
        }
    }
    // Let them reach their steady state; Ctrl-C cuts the wait short.
    let settled = Instant::now() + set.settle;
    while Instant::now() < settled && !interrupt.is_triggered() {
        std::thread::sleep(Duration::from_millis(20));
    }
    if interrupt.is_triggered() {
        running.stop(None);
        return Err(PlatformError::Interrupted);
    }
    if let Some(DiskTarget { device, .. }) = &set.disk_target {
        running.disk_start =
            crate::neighbour::disk_ios(site.proc_root, device).map(|n| (n, Instant::now()));
    }
    if let (Some(target), Some(net)) = (&set.net_target, &running.net) {
        let direction = target.direction;
        running.net_start = net
            .carried_bytes(direction)
            .ok()
            .map(|neighbours| NetStart {
                direction,
                neighbours,
                host: crate::neighbour::net_rx(site.proc_root)
                    .into_iter()
                    .filter(|(name, _)| !running.excluded.contains(name))
                    .collect(),
                at: Instant::now(),
            });
    }
    // The guests' own cpu counters from here on, the subject's start. A guest's sampler
    // may not have written its first line yet (its shell still starting under TCG): it
    // gets a few seconds more.
    let deadline = Instant::now() + GUEST_SAMPLE_WAIT;
    for (_, instance) in &mut running.instances {
        if let Instance::Guest {
            guest, at_start, ..
        } = instance
        {
            *at_start = guest.guest_cpu();
            while at_start.is_none() && guest.samples() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
                *at_start = guest.guest_cpu();
            }
        }
    }
    for i in 0..running.instances.len() {
        let ended = match &mut running.instances[i].1 {
            Instance::Process(child) => (!child.is_running()).then(|| {
                read_tail(
                    &log_path(&job.workdir, &format!("neighbour{i}"), "stderr"),
                    2000,
                )
            }),
            Instance::Guest { guest, .. } => (!guest.is_running()).then(|| guest.why_ended()),
        };
        if let Some(stderr) = ended {
            running.stop(None);
            return Err(PlatformError::Helper {
                phase: "neighbour",
                command: set.instances[i].join(" "),
                exit: ExitKind::Code(-1),
                stderr,
            });
        }
    }
    Ok(running)
}

/// Limits the neighbours' traffic between the host's neighbour namespaces to `mbps`
/// Mbit/s both ways; returns the rate read back.
fn rate_limit(net: &crate::neighbour::NeighbourNet, mbps: u64) -> Result<f64, PlatformError> {
    let read = net.rate_limit(mbps).map_err(|e| PlatformError::Helper {
        phase: "net reservation",
        command: net.rate_limit_command(mbps).join(" "),
        exit: ExitKind::Code(-1),
        stderr: e.to_string(),
    })?;
    if crate::neighbour::rate_differs(mbps, read) {
        return Err(PlatformError::LimitMismatch {
            cgroup: format!("network namespace {}", net.namespace()),
            detail: format!(
                "rate of {} asked {mbps} Mbit/s read {read:.1} Mbit/s",
                net.interface()
            ),
        });
    }
    Ok(read)
}

/// What a neighbour guest runs for instance command `argv`: a network neighbour's
/// client runs in the guest itself, to the servers on the bridge (`net`).
fn guest_argv(
    net: Option<&crate::neighbour::NeighbourNet>,
    argv: &[String],
) -> Result<Vec<String>, PlatformError> {
    let Some(net) = net else {
        return Ok(argv.to_vec());
    };
    net.guest_client(argv).ok_or_else(|| PlatformError::Helper {
        phase: "neighbour",
        command: argv.join(" "),
        exit: ExitKind::Code(-1),
        stderr: "not an iperf3 client of the neighbour network, so no guest can run it".into(),
    })
}

/// The neighbour network of `job` with `servers` iperf3 servers: between two
/// namespaces of this host, or for guests (`bridged`: `Some(suffix)`) on isolab's
/// bridge as `<job>-<suffix>`, the id by which gc finds a dead experiment's.
pub(super) fn neighbour_net(
    job: &Job,
    servers: u32,
    bridged: Option<&str>,
) -> Result<crate::neighbour::NeighbourNet, PlatformError> {
    let made = match bridged {
        Some(suffix) => {
            let id = crate::platform::container_id(
                isolab_engines::ID_PREFIX,
                &format!("{}-{suffix}", job.name),
            )?;
            crate::neighbour::NeighbourNet::create_on_bridge(servers, id.as_str())
        }
        None => crate::neighbour::NeighbourNet::create(servers),
    };
    made.map_err(|e| PlatformError::Helper {
        phase: "neighbour network",
        command: if bridged.is_some() {
            "ip netns add … (the neighbour servers' namespace on isolab's bridge)".into()
        } else {
            "ip netns add … (neighbour namespaces)".into()
        },
        exit: ExitKind::Code(-1),
        stderr: e.to_string(),
    })
}

/// How long the subject's start waits for neighbour guests' first cpu samples.
const GUEST_SAMPLE_WAIT: Duration = Duration::from_secs(5);

/// A neighbour instance in its cgroup: a process (maybe a container's), or a guest with
/// its cpu counters (as it counts them) at the subject's start.
enum Instance {
    Process(Box<dyn Process>),
    Guest {
        guest: Box<dyn NeighbourGuest>,
        /// Its vCPUs' counters when the subject started.
        at_start: Option<GuestCpu>,
        /// How busy its kernel should count its vCPUs, in percent: a cpu stressor's
        /// planned load over their number.
        load_pct: Option<f64>,
    },
}

/// Neighbour instances while they run: each cgroup with its process or guest.
pub(crate) struct RunningNeighbours<'c> {
    instances: Vec<(Cgroup, Instance)>,
    /// Where they run; for containers, the container ids (to collect after).
    host: NeighbourHost<'c>,
    ids: Vec<String>,
    /// The namespaces network neighbours stream between.
    net: Option<crate::neighbour::NeighbourNet>,
    /// Interfaces of the host's namespace that carry only the neighbours' traffic
    /// (neighbour VMs' taps, the bridged servers' veth): not counted as the subject's.
    excluded: Vec<String>,
    /// The rate of the neighbours' interface read back, Mbit/s (`net` reservation).
    net_rate: Option<f64>,
    /// The first instance's limits as read back (every instance has the same).
    applied: Option<isolab_cgroups::Limits>,
    /// Operations completed on the target disk when the subject started.
    disk_start: Option<(u64, Instant)>,
    /// Network counters when the subject started (network utilisation target).
    net_start: Option<NetStart>,
    /// The proc file system (disk and network counters).
    proc_root: PathBuf,
    /// What the host read back about their guests (vCPU affinity).
    facts: Vec<String>,
}

/// Network counters at the subject's start.
struct NetStart {
    /// Which way the neighbours' traffic flows.
    direction: crate::neighbour::NetDirection,
    /// Bytes the neighbour network had carried that way.
    neighbours: u64,
    /// Bytes each interface of the host's namespace had received (the subject's
    /// traffic), but those of the neighbours only (an interface without a count here
    /// is not counted after).
    host: Vec<(String, u64)>,
    at: Instant,
}

/// Received Mbit/s while the subject and its neighbours ran.
#[derive(Debug, Clone, Copy)]
struct NetMbps {
    /// By the neighbours' interface.
    neighbours: f64,
    /// By the host's busiest interface (the subject's traffic).
    subject: f64,
}

/// What the neighbours did, read before their cgroups were removed.
pub(crate) struct StoppedNeighbours {
    /// The counters of each instance.
    stats: Vec<Option<isolab_cgroups::Stats>>,
    /// IOPS on the target disk while subject and neighbours ran.
    disk_iops: Option<f64>,
    /// Mbit/s of the neighbours and of the subject while both ran.
    net_mbps: Option<NetMbps>,
    /// The rate of the neighbours' interface, Mbit/s.
    net_rate: Option<f64>,
    /// Their limits as read back.
    applied: Option<isolab_cgroups::Limits>,
    /// Whether they ran in containers of the subject's platform.
    in_containers: bool,
    /// Whether they ran in guests of their own.
    in_guests: bool,
    /// The busy share of each guest's vCPUs while the subject ran, as the guest
    /// counted it, in percent.
    guest_util: Vec<f64>,
    /// For cpu stressors: the share each of those guests was planned to be busy.
    guest_load: Vec<f64>,
    /// What the host read back about them, and problems while stopping.
    notes: Vec<String>,
}

impl RunningNeighbours<'_> {
    /// Kills every instance, reads its counters, removes its cgroup.
    pub(crate) fn stop(self, disk: Option<&str>) -> StoppedNeighbours {
        let proc_root = &self.proc_root;
        let disk_iops = match (self.disk_start, disk) {
            (Some((before, at)), Some(device)) => crate::neighbour::disk_ios(proc_root, device)
                .map(|after| {
                    after.saturating_sub(before) as f64 / at.elapsed().as_secs_f64().max(1e-3)
                }),
            _ => None,
        };
        let net_mbps = match (&self.net_start, &self.net) {
            (Some(start), Some(net)) => net.carried_bytes(start.direction).ok().map(|now| {
                let secs = start.at.elapsed().as_secs_f64().max(1e-3);
                let host =
                    crate::neighbour::busiest_rx(&start.host, &crate::neighbour::net_rx(proc_root));
                let mbps = |bytes: u64| bytes as f64 * 8.0 / 1e6 / secs;
                NetMbps {
                    neighbours: mbps(now.saturating_sub(start.neighbours)),
                    subject: mbps(host),
                }
            }),
            _ => None,
        };
        let mut stopped = StoppedNeighbours {
            stats: Vec::new(),
            disk_iops,
            net_mbps,
            net_rate: self.net_rate,
            applied: self.applied,
            in_containers: matches!(self.host, NeighbourHost::Containers(_)),
            in_guests: matches!(self.host, NeighbourHost::Guests(_)),
            guest_util: Vec::new(),
            guest_load: Vec::new(),
            notes: self.facts,
        };
        for (i, (cgroup, instance)) in self.instances.into_iter().enumerate() {
            match instance {
                Instance::Guest {
                    guest,
                    at_start,
                    load_pct,
                } => {
                    let util = at_start.zip(guest.guest_cpu());
                    if let Some(util) = util.and_then(|(before, after)| before.util_pct(after)) {
                        stopped.guest_util.push(util);
                        stopped.guest_load.extend(load_pct);
                    }
                    // QEMU is the cgroup's: kill it there, then let the guest go.
                    let _ = cgroup.kill_all();
                    if let Err(e) = guest.remove() {
                        stopped
                            .notes
                            .push(format!("removing neighbour guest {i}: {e}"));
                    }
                }
                Instance::Process(child) => {
                    child.signal_group(libc::SIGKILL);
                    // A container's processes sit in cgroups nested in the instance's.
                    let h = cgroup.hierarchy().clone();
                    let mut nested =
                        isolab_cgroups::list_below(&h, cgroup.rel()).unwrap_or_default();
                    nested.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
                    for rel in nested {
                        if let Ok(c) = Cgroup::open(&h, &rel) {
                            let _ = c.kill_all();
                        }
                    }
                    let _ = cgroup.kill_all();
                    let _ = child.reap();
                }
            }
            stopped.stats.push(cgroup.stats().ok());
            if let (NeighbourHost::Containers(c), Some(id)) = (self.host, self.ids.get(i)) {
                if let Err(e) = c.collect(id) {
                    stopped
                        .notes
                        .push(format!("collecting neighbour container {id}: {e}"));
                }
            }
            if let Err(e) = cgroup.remove() {
                stopped
                    .notes
                    .push(format!("removing a neighbour's cgroup: {e}"));
            }
        }
        if let Some(net) = self.net {
            if let Err(e) = net.remove() {
                stopped
                    .notes
                    .push(format!("removing the neighbour network: {e}"));
            }
        }
        stopped
    }
}

impl StoppedNeighbours {
    /// Adds the neighbours' telemetry and limits to the subject's run: their cpu time, and for
    /// a utilisation target, the target and what the host sampler measured, with a
    /// note when they are more than 5 percentage points apart.
    pub(crate) fn describe(self, job: &Job, execution: &mut Execution) {
        let Some(set) = &job.neighbours else { return };
        execution.neighbour_limits = self.applied.clone();
        let stats: Vec<&isolab_cgroups::Stats> = self.stats.iter().flatten().collect();
        let sum = |f: &dyn Fn(&isolab_cgroups::Stats) -> Option<f64>| {
            let v: Vec<f64> = stats.iter().filter_map(|s| f(s)).collect();
            (!v.is_empty()).then(|| v.iter().sum::<f64>())
        };
        let t = &mut execution.telemetry;
        let cpu = sum(&|s| s.cpu_usage.map(|d| d.as_secs_f64())).unwrap_or(0.0);
        t.push(T::NeighboursCpu, cpu);
        t.push(T::Neighbours, self.stats.len() as f64);
        t.push(
            T::NeighboursInContainers,
            if self.in_containers { 1.0 } else { 0.0 },
        );
        if self.in_guests {
            t.push(T::NeighboursInVms, 1.0);
        }
        let mean = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
        let guest_util = mean(&self.guest_util);
        t.push_some(T::NeighbourGuestUtil, guest_util);
        // Seed 001's stress VMs ran at a load inside: judged as their kernels counted it
        // (a guest's planned load is kept only with its count, so both cover the same VMs).
        if let (Some(load), Some(busy)) = (mean(&self.guest_load), guest_util) {
            t.push(T::NeighbourGuestLoad, load);
            note_off_target(&mut execution.notes, &set.level, load, busy, || {
                format!("inside its VMs (planned load over the vCPUs), the kernels counted {busy:.1}% busy")
            });
        }
        t.push_some(
            T::NeighboursMemoryPeak,
            stats
                .iter()
                .filter_map(|s| s.memory_peak.map(|b| b.0 as f64))
                .reduce(f64::max),
        );
        t.push_some(T::NeighboursIoRead, sum(&|s| s.io_read.map(|b| b.0 as f64)));
        t.push_some(
            T::NeighboursIoWrite,
            sum(&|s| s.io_write.map(|b| b.0 as f64)),
        );
        t.push_some(
            T::NeighboursThrottled,
            sum(&|s| s.throttled.map(|d| d.as_secs_f64())),
        );
        t.push_some(T::NeighboursNetRate, self.net_rate);
        // The io reservation's throttle of each instance, to compare with what they did.
        for io in &set.limits.io {
            t.push_some(T::NeighbourReadIopsLimit, io.read_iops.map(|r| r as f64));
            t.push_some(T::NeighbourWriteIopsLimit, io.write_iops.map(|w| w as f64));
        }
        execution.notes.extend(self.notes);
        if let (
            Some(NetTarget {
                capacity_mbps: capacity,
                target_pct: target,
                ..
            }),
            Some(NetMbps {
                neighbours,
                subject,
            }),
        ) = (set.net_target, self.net_mbps)
        {
            let achieved = 100.0 * (neighbours + subject) / capacity;
            let t = &mut execution.telemetry;
            t.push(T::NeighbourTargetUtil, target);
            t.push(T::NeighbourAchievedUtil, achieved);
            t.push(T::NeighboursNetMbps, neighbours);
            t.push(T::SubjectNetMbps, subject);
            note_off_target(&mut execution.notes, &set.level, target, achieved, || {
                format!("neighbours {neighbours:.0} + subject {subject:.0} Mbit/s, {achieved:.1}% of {capacity:.0}")
            });
        }
        if let (
            Some(DiskTarget {
                capacity_iops: capacity,
                target_pct: target,
                ..
            }),
            Some(iops),
        ) = (&set.disk_target, self.disk_iops)
        {
            let achieved = 100.0 * iops / capacity;
            let t = &mut execution.telemetry;
            t.push(T::NeighbourTargetUtil, *target);
            t.push(T::NeighbourAchievedUtil, achieved);
            t.push(T::DiskIops, iops);
            note_off_target(&mut execution.notes, &set.level, *target, achieved, || {
                format!("the disk did {iops:.0} IOPS, {achieved:.1}% of its {capacity:.0}")
            });
        }
        if let Some(requested) = set.target_util_pct {
            let t = &mut execution.telemetry;
            t.push(T::NeighbourTargetUtil, requested);
            t.push_some(T::NeighbourReachableUtil, set.reachable_util_pct);
            let target = set.reachable_util_pct.unwrap_or(requested);
            if let Some(achieved) = t.get(T::HostUtil) {
                t.push(T::NeighbourAchievedUtil, achieved);
                note_off_target(&mut execution.notes, &set.level, target, achieved, || {
                    format!("host utilisation {achieved:.1}%")
                });
            }
        }
    }
}

/// Notes that neighbour `level` missed its `target` (percent): `achieved` is more
/// than [`crate::neighbour::OFF_TARGET_POINTS`] points away; `seen` says what was
/// measured.
fn note_off_target(
    notes: &mut Vec<String>,
    level: &str,
    target: f64,
    achieved: f64,
    seen: impl FnOnce() -> String,
) {
    if crate::neighbour::off_target(target, achieved) {
        notes.push(format!(
            "neighbour {level} off target: {} against {target:.1}% (more than {} points apart)",
            seen(),
            crate::neighbour::OFF_TARGET_POINTS
        ));
    }
}
