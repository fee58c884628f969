//! Long-running services through the platforms: without root on a fake cgroupfs
//! with a scripted launcher, and as root for real on every platform of the
//! registry this host can run (iperf3's server on the host network, limits read
//! back from the service's cgroup, nothing left behind).

use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use isolab_cgroups::{Bytes, CpuQuota, Hierarchy, Limits};
use isolab_lab::platform::{
    Accel, Drivers, Executor, ExitKind, IsolabConfig, Job, Network, PlatformDef, PlatformError,
    PlatformKind, ServiceSpec,
};
use isolab_lab::testing::{FakeCgroupfs, FakeLauncher, Scripted};
use isolab_lab::{Supervisor, SupervisorConfig};

mod common;
use common::leftovers;

const IMAGE: &str = "/var/lib/isolab/images/bench";

/// The host's cgroup mounts. The test of every platform runs crun and Podman, which
/// mount a v1 hugetlb hierarchy (this hybrid host's fix) and unmount it at shutdown; a
/// VM test creating its cgroups in every mounted hierarchy meanwhile keeps the fix
/// from being undone (it stays mounted, and says why). That test takes the lock for
/// writing, the VM tests for reading.
static HOST_MOUNTS: RwLock<()> = RwLock::new(());

fn limits() -> Limits {
    Limits {
        cpu: Some(CpuQuota::from_cpus(1.0, CpuQuota::DEFAULT_PERIOD).unwrap()),
        memory_max: Some(Bytes::mib(512)),
        pids_max: Some(64),
        ..Limits::default()
    }
}

fn job(platform: PlatformDef, name: &str, argv: Vec<String>, workdir: &Path) -> Job {
    Job {
        image: platform.kind.needs_image().then(|| PathBuf::from(IMAGE)),
        platform,
        name: format!("svc{}/{name}", std::process::id()),
        argv,
        prepare: None,
        cleanup: None,
        server: None,
        workdir: workdir.to_path_buf(),
        limits: limits(),
        timeout: Duration::from_secs(60),
        neighbours: None,
        uses_disk: false,
        stack: None,
    }
}

fn fake_platforms(cgroupfs: &Path, launcher: Arc<FakeLauncher>, state: &Path) -> Drivers {
    let host = Supervisor::with_launcher(
        SupervisorConfig {
            hierarchy: FakeCgroupfs::create(cgroupfs).unwrap(),
            proc_root: state.join("proc"),
            cgroup_base: PathBuf::from("isolab"),
            sample_interval: Duration::from_millis(100),
            probe: None,
        },
        launcher,
    );
    Drivers::new(
        host,
        IsolabConfig {
            program: PathBuf::from("isolab-runtime"),
            state_dir: state.join("runtime-state"),
            user_images: None,
        },
    )
}

/// Every platform of this build on the host's real cgroups, below `base`.
fn real_platforms(base: &str) -> Drivers {
    let host = Supervisor::new(SupervisorConfig {
        hierarchy: Hierarchy::detect().unwrap(),
        proc_root: "/proc".into(),
        cgroup_base: PathBuf::from(base),
        sample_interval: Duration::from_millis(100),
        probe: None,
    });
    Drivers::new(host, IsolabConfig::discover())
}

#[test]
fn a_host_service_is_limited_reachable_and_removed_without_root() {
    let (cgroupfs, state, work) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    // The "server" is this test's own listener, listening in the fake /proc's table of
    // isolab's network namespace; the scripted command runs for an hour.
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    fake_listening(state.path(), port);
    let launcher = Arc::new(
        FakeLauncher::new()
            .on("serve", [Scripted::success("", Duration::from_secs(3600))])
            .on(
                "crash",
                [Scripted {
                    exit: ExitKind::Code(1),
                    stdout: String::new(),
                    stderr: "crash: address in use\n".into(),
                    wall: Duration::ZERO,
                }],
            ),
    );
    let platforms = fake_platforms(cgroupfs.path(), launcher.clone(), state.path());
    let host = PlatformDef::new(PlatformKind::HOST);
    let spec = ServiceSpec {
        port,
        ready_timeout: Duration::from_secs(5),
    };
    let argv = vec!["serve".into(), "--port".into(), port.to_string()];
    let db = job(host.clone(), "c0-r1-db", argv, work.path());
    let service = platforms.start_service(&db, spec).unwrap();
    assert_eq!(service.address, (Ipv4Addr::LOCALHOST, port).into());
    let instance = PathBuf::from(format!("isolab/svc{}/c0-r1-db", std::process::id()));
    assert_eq!(service.cgroup, instance);
    assert_eq!(service.limits_applied, limits());
    assert_eq!(
        launcher.launched()[0].cgroup.as_deref(),
        Some(instance.as_path())
    );
    service.stop().unwrap();

    // A command that exits before it listens fails at once, with its stderr.
    let unused = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let free = unused.local_addr().unwrap().port();
    drop(unused);
    let crash = job(host, "c0-r1-web", vec!["crash".into()], work.path());
    let e = platforms
        .start_service(&crash, ServiceSpec { port: free, ..spec })
        .unwrap_err();
    match &e {
        PlatformError::ServerNotReady {
            port,
            stderr,
            waited,
            ..
        } => {
            assert_eq!(*port, free);
            assert!(stderr.contains("address in use"), "{e}");
            assert!(*waited < Duration::from_secs(5), "{e}");
        }
        other => panic!("expected ServerNotReady, got {other:?}"),
    }

    // Levels no client on the host can reach say why.
    let mut none = PlatformDef::new(PlatformKind::ISOLAB);
    none.network = Network::None;
    let e = platforms
        .start_service(
            &job(none, "c1-r1-db", vec!["serve".into()], work.path()),
            spec,
        )
        .unwrap_err();
    assert!(e.to_string().contains("its network is `none`"), "{e}");

    drop(platforms);
    assert_eq!(
        FakeCgroupfs::cgroups(cgroupfs.path()),
        Vec::<PathBuf>::new()
    );
    drop(listener);
}

/// The fake /proc below `state` with isolab's network namespace's TCP table: one socket
/// listening on `port` on loopback, and one connected from another port.
fn fake_listening(state: &Path, port: u16) {
    let net = state.join("proc/self/net");
    std::fs::create_dir_all(&net).unwrap();
    std::fs::write(
        net.join("tcp"),
        format!(
            "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   \
             0: 0100007F:{port:04X} 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0\n   \
             1: 0100007F:{other:04X} 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0\n",
            other = port.wrapping_add(1),
        ),
    )
    .unwrap();
}

/// A stack's measurement beside two cpu neighbours on the fake host: they start
/// first, each in a cgroup of its own with their limits, run during it, are
/// described in its execution and go after it, also when it fails; a VM says it
/// runs none.
#[test]
fn neighbours_run_beside_a_measurement_and_go_after_it_without_root() {
    use isolab_lab::platform::{Execution, Interrupt, NeighbourJobs};
    let (cgroupfs, state, work) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let launcher = Arc::new(FakeLauncher::new().on(
        "stress-ng",
        [Scripted::success("", Duration::from_secs(3600))],
    ));
    let platforms = fake_platforms(cgroupfs.path(), launcher.clone(), state.path());
    let interrupt = Interrupt::new().unwrap();
    let mut subject = job(
        PlatformDef::new(PlatformKind::HOST),
        "c0-r1",
        Vec::new(),
        work.path(),
    );
    let neighbour_limits = Limits {
        cpuset: Some("0".parse().unwrap()),
        ..Limits::default()
    };
    subject.neighbours = Some(NeighbourJobs {
        level: "cpu*2".into(),
        instances: vec![vec!["stress-ng".into(), "--cpu".into(), "1".into()]; 2],
        limits: neighbour_limits.clone(),
        target_util_pct: None,
        reachable_util_pct: None,
        disk_target: None,
        net_target: None,
        net_rate_mbps: None,
        settle: Duration::from_millis(10),
        network_servers: 0,
        loads_pct: Vec::new(),
    });
    let scope = PathBuf::from(format!("isolab/svc{}", std::process::id()));
    let nb = |i: usize| scope.join(format!("c0-r1-nb{i}"));
    let measured = || Execution {
        exit: ExitKind::Code(0),
        stdout: String::new(),
        stderr: String::new(),
        wall: Duration::from_millis(1),
        started: std::time::Instant::now(),
        limits_applied: Limits::default(),
        neighbour_limits: None,
        telemetry: std::iter::empty().collect(),
        series: Vec::new(),
        notes: Vec::new(),
    };
    let mut during = Vec::new();
    let e = platforms
        .beside_neighbours(&subject, &interrupt, &mut || {
            during = FakeCgroupfs::cgroups(cgroupfs.path());
            Ok(measured())
        })
        .unwrap();
    // Both ran during the measurement, limited, in their own cgroups.
    assert!(
        during.contains(&nb(0)) && during.contains(&nb(1)),
        "{during:?}"
    );
    let launched = launcher.launched();
    assert_eq!(launched.len(), 2);
    for (i, l) in launched.iter().enumerate() {
        assert_eq!(l.cgroup.as_deref(), Some(nb(i).as_path()));
        assert_eq!(l.log, format!("neighbour{i}"));
    }
    assert_eq!(e.telemetry.get_named("neighbours"), Some(2.0));
    assert_eq!(e.telemetry.get_named("neighbours_in_containers"), Some(0.0));
    assert!(e.telemetry.get_named("neighbours_cpu_s").is_some());
    let left = FakeCgroupfs::cgroups(cgroupfs.path());
    assert!(!left.contains(&nb(0)) && !left.contains(&nb(1)), "{left:?}");

    // A measurement that fails keeps its error; its neighbours go all the same.
    let e = platforms
        .beside_neighbours(&subject, &interrupt, &mut || {
            Err(PlatformError::Component {
                component: "db".into(),
                what: "exited while it was measured".into(),
            })
        })
        .unwrap_err();
    assert!(
        e.to_string().contains("exited while it was measured"),
        "{e}"
    );
    assert_eq!(launcher.launched().len(), 4);
    let left = FakeCgroupfs::cgroups(cgroupfs.path());
    assert!(!left.contains(&nb(0)) && !left.contains(&nb(1)), "{left:?}");

    // In a VM the neighbours are VMs of their own: without an image for their guests
    // that fails before the measurement, and leaves no neighbour cgroup.
    let mut in_vm = subject.clone();
    in_vm.platform = PlatformDef::vm(PlatformKind::VM, Accel::Tcg);
    in_vm.image = None;
    let e = platforms
        .beside_neighbours(&in_vm, &interrupt, &mut || {
            panic!("measured without its neighbour VMs")
        })
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("no image was given for the guest's disk"),
        "{e}"
    );
    let left = FakeCgroupfs::cgroups(cgroupfs.path());
    assert!(!left.contains(&nb(0)) && !left.contains(&nb(1)), "{left:?}");
    drop(platforms);
    assert_eq!(
        FakeCgroupfs::cgroups(cgroupfs.path()),
        Vec::<PathBuf>::new()
    );
}

#[test]
fn every_usable_platform_runs_a_real_service_with_its_limits_read_back() {
    let _mounts = HOST_MOUNTS.write().unwrap_or_else(|e| e.into_inner());
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        isolab_skip::skip("services need root to create cgroups");
        return;
    }
    if !Path::new(IMAGE).join("bin/sh").exists() || isolab_tools::find_program("iperf3").is_none() {
        isolab_skip::skip(format!(
            "needs the bench image at {IMAGE} and iperf3 (make image)"
        ));
        return;
    }
    let base = format!("isolab-svctest-{}", std::process::id());
    let platforms = real_platforms(&base);
    let work = tempfile::tempdir().unwrap();
    // On the host network, and on a bridge at the container's own address (VM levels
    // serve on a bridge too: `a_vm_serves_on_its_guest_address_and_leaves_nothing`).
    let (mut served, mut bridged) = (Vec::new(), Vec::new());
    for (network, run) in [(Network::Host, "r1"), (Network::Bridge, "r2")] {
        for (i, (info, availability)) in isolab_lab::platform::availability().iter().enumerate() {
            let caps = info.capabilities;
            let vm_bridge = network == Network::Bridge && caps.vm;
            if !caps.services || !caps.has_network(network) || vm_bridge {
                continue;
            }
            if !availability.usable {
                if network == Network::Host {
                    isolab_skip::skip(format!(
                        "platform {} is not usable: {}",
                        info.kind, availability.detail
                    ));
                }
                continue;
            }
            let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let mut level = PlatformDef::new(info.kind);
            level.network = network;
            let argv = ["iperf3", "-s", "-p", &port.to_string()]
                .map(String::from)
                .to_vec();
            let job = job(level, &format!("c{i}-{run}-db"), argv, work.path());
            let spec = ServiceSpec {
                port,
                ready_timeout: Duration::from_secs(60),
            };
            let what = format!("{} on network {network:?}", info.kind);
            let service = platforms
                .start_service(&job, spec)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(
                service.address.ip().is_loopback(),
                network == Network::Host,
                "{what}: {}",
                service.address
            );
            // Ready by its listening socket, not by a probe's connection: iperf3 took a
            // probe as a client and listened again only after it, refusing a client
            // that came in between; the first connection now finds it listening.
            TcpStream::connect(service.address)
                .unwrap_or_else(|e| panic!("{what}, {}: {e}", service.address));
            assert!(
                limits().differences(&service.limits_applied).is_empty(),
                "{what}: {:?}",
                service.limits_applied
            );
            assert!(
                service.cgroup.starts_with(&base),
                "{what}: {}",
                service.cgroup.display()
            );
            service
                .stop()
                .unwrap_or_else(|e| panic!("{what}: stopping: {e}"));
            match network {
                Network::Host => served.push(info.kind.to_string()),
                _ => bridged.push(info.kind.to_string()),
            }
        }
    }
    drop(platforms);
    eprintln!("served on {served:?}, on a bridge on {bridged:?}");
    assert!(served.contains(&"host".to_owned()), "{served:?}");
    assert!(bridged.contains(&"isolab".to_owned()), "{bridged:?}");
    let left = leftovers(&base);
    assert!(left.is_empty(), "cgroups left: {left:?}");
}

/// Whether this host can run VM services (root for cgroups and taps, iperf3 on the
/// host); skips the calling test with the reason when not.
fn vm_services_here() -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        isolab_skip::skip("VM services need root (cgroups, taps)");
        return false;
    }
    if isolab_tools::find_program("iperf3").is_none() {
        isolab_skip::skip("needs iperf3 on the host (scripts/setup.sh installs it)");
        return false;
    }
    true
}

/// The VM levels whose services this host can run, with the image each needs.
fn vm_levels() -> Vec<(PlatformDef, &'static str)> {
    let usable: Vec<PlatformKind> = isolab_lab::platform::availability()
        .into_iter()
        .filter(|(info, a)| {
            if info.capabilities.vm && !a.usable {
                isolab_skip::skip(format!(
                    "platform {} is not usable: {}",
                    info.kind, a.detail
                ));
            }
            info.capabilities.vm && a.usable
        })
        .map(|(info, _)| info.kind)
        .collect();
    let mut levels = Vec::new();
    for (name, image) in [
        ("vm", IMAGE),
        ("vm+isolab", IMAGE),
        ("vm+docker", DOCKER_IMAGE),
    ] {
        let kind = PlatformKind::parse(name).unwrap();
        if !usable.contains(&kind) {
            continue;
        }
        if !Path::new(image).join("bin/sh").exists() {
            isolab_skip::skip(format!(
                "platform {name}: no image at {image} (make image-debug)"
            ));
            continue;
        }
        let runtime = IsolabConfig::discover().program;
        if kind == PlatformKind::VM_ISOLAB && !runtime.is_file() {
            isolab_skip::skip(format!(
                "platform {name}: {} missing (cargo build -p isolab-runtime)",
                runtime.display()
            ));
            continue;
        }
        levels.push((PlatformDef::vm(kind, Accel::Tcg), image));
    }
    levels
}

const DOCKER_IMAGE: &str = "/var/lib/isolab/images/bench-docker";

#[test]
fn a_vm_serves_on_its_guest_address_and_leaves_nothing() {
    let _mounts = HOST_MOUNTS.read().unwrap_or_else(|e| e.into_inner());
    if !vm_services_here() {
        return;
    }
    // isolab's bridge goes with the last VM on it (unless something else uses it).
    let bridge_before = std::path::Path::new("/sys/class/net/isolab0").exists();
    let levels = vm_levels();
    let base = format!("isolab-vmsvctest-{}", std::process::id());
    let work = tempfile::tempdir().unwrap();
    let mut served = Vec::new();
    for (i, (level, image)) in levels.into_iter().enumerate() {
        // One Platforms per image: the VM platforms prepare one disk for all levels.
        let platforms = real_platforms(&base);
        let port = 5201 + i as u16;
        let argv = ["iperf3", "-s", "-p", &port.to_string()]
            .map(String::from)
            .to_vec();
        let workdir = work.path().join(format!("w{i}"));
        std::fs::create_dir(&workdir).unwrap();
        let mut job = job(level.clone(), &format!("c{i}-r1-db"), argv, &workdir);
        job.image = Some(PathBuf::from(image));
        let spec = ServiceSpec {
            port,
            ready_timeout: Duration::from_secs(60),
        };
        let started = std::time::Instant::now();
        let service = platforms
            .start_service(&job, spec)
            .unwrap_or_else(|e| panic!("{}: {e}", level.name));
        let ready = started.elapsed();
        let guest = match service.address.ip() {
            std::net::IpAddr::V4(ip) => ip,
            other => panic!("{}: {other}", level.name),
        };
        assert!(
            isolab_runtime::network::Ipv4Subnet::parse(isolab_runtime::network::DEFAULT_SUBNET)
                .unwrap()
                .contains(guest),
            "{}: {guest}",
            level.name
        );
        assert_eq!(service.address.port(), port);
        let tap = isolab_runtime::network::tap_name(
            guest,
            isolab_runtime::network::Ipv4Subnet::parse(isolab_runtime::network::DEFAULT_SUBNET)
                .unwrap(),
        );
        assert!(
            Path::new("/sys/class/net").join(&tap).exists(),
            "{}: tap {tap}",
            level.name
        );
        assert!(service.cgroup.starts_with(&base), "{}", level.name);
        assert!(
            limits().differences(&service.limits_applied).is_empty(),
            "{}: {:?}",
            level.name,
            service.limits_applied
        );
        // The instance in every hierarchy (v2, or each v1 controller).
        let mut qemu_pids: Vec<u32> = std::iter::once(PathBuf::from("/sys/fs/cgroup"))
            .chain(leftovers(""))
            .flat_map(|h| {
                std::fs::read_to_string(h.join(&service.cgroup).join("cgroup.procs"))
                    .unwrap_or_default()
                    .lines()
                    .filter_map(|l| l.parse().ok())
                    .collect::<Vec<u32>>()
            })
            .collect();
        qemu_pids.sort_unstable();
        qemu_pids.dedup();
        assert!(
            !qemu_pids.is_empty(),
            "{}: QEMU in the instance",
            level.name
        );

        assert!(service.is_running(), "{}: the guest runs", level.name);
        let bits = iperf3_client(guest, port).unwrap_or_else(|e| panic!("{}: {e}", level.name));
        assert!(bits > 0.0, "{}: {bits}", level.name);
        eprintln!(
            "{}: ready after {ready:.1?} at {}, iperf3 -c from the host: {:.0} Mbit/s",
            level.name,
            service.address,
            bits / 1e6
        );
        service
            .stop()
            .unwrap_or_else(|e| panic!("{}: stopping: {e}", level.name));
        assert!(
            !Path::new("/sys/class/net").join(&tap).exists(),
            "{}: tap {tap} left",
            level.name
        );
        for pid in qemu_pids {
            assert!(
                !Path::new(&format!("/proc/{pid}")).exists(),
                "{}: process {pid} left",
                level.name
            );
        }
        let leases = std::fs::read_dir("/run/isolab/cni/ipam/isolab0")
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| {
                std::fs::read_to_string(e.path())
                    .unwrap_or_default()
                    .contains(&format!("svc{}-c{i}-r1-db", std::process::id()))
            })
            .count();
        assert_eq!(leases, 0, "{}: address lease left", level.name);
        assert!(
            !PathBuf::from(format!("{}.vm", workdir.display())).exists(),
            "{}: run directory left",
            level.name
        );
        if level.kind == PlatformKind::VM {
            // A service that exits before it listens fails with its stderr from the guest.
            let argv = ["sh", "-c", "echo no-such-service >&2; exit 3"]
                .map(String::from)
                .to_vec();
            let crash = self::job(level.clone(), &format!("c{i}-r2-db"), argv, &workdir);
            match platforms.start_service(&crash, spec) {
                Err(PlatformError::ServerNotReady { stderr, .. }) => {
                    assert!(stderr.contains("no-such-service"), "{stderr}")
                }
                other => panic!("{}: expected ServerNotReady, got {other:?}", level.name),
            }
        }
        drop(platforms);
        served.push(level.name);
    }
    eprintln!("served on {served:?}");
    let left = leftovers(&base);
    assert!(left.is_empty(), "cgroups left: {left:?}");
    let records: Vec<_> = std::fs::read_dir("/run/isolab/cni/attachments/isolab0")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(&format!("svc{}-", std::process::id())))
        .collect();
    assert!(records.is_empty(), "network records left: {records:?}");
    if !bridge_before {
        assert!(
            !std::path::Path::new("/sys/class/net/isolab0").exists(),
            "bridge isolab0 left after the last VM"
        );
    }
}

/// Seed 003's container host: two components of one stack run on `vm(tcg)+isolab` share
/// one guest (one address, one QEMU), each a container of isolab-runtime listed in it; the
/// first stopped leaves the second serving; the last stopped takes the guest, its tap and
/// its cgroup along.
#[test]
fn a_stacks_components_share_one_guest_on_a_vm_engine() {
    let _mounts = HOST_MOUNTS.read().unwrap_or_else(|e| e.into_inner());
    if !vm_services_here() {
        return;
    }
    let Some((level, image)) = vm_levels()
        .into_iter()
        .find(|(l, _)| l.kind == PlatformKind::VM_ISOLAB)
    else {
        isolab_skip::skip("vm+isolab is not usable here (said above)");
        return;
    };
    assert_eq!(
        level.stack_guests,
        Some(isolab_lab::platform::StackGuests::Shared)
    );
    let base = format!("isolab-sharedtest-{}", std::process::id());
    let platforms = real_platforms(&base);
    let work = tempfile::tempdir().unwrap();
    let workdir = work.path().join("w");
    std::fs::create_dir(&workdir).unwrap();
    let total = Limits {
        memory_max: Some(Bytes::mib(1024)),
        ..limits()
    };
    let run = format!("svc{}/c0-r1", std::process::id());
    let mut services = Vec::new();
    for (k, component) in ["db", "web"].into_iter().enumerate() {
        let port = 5301 + k as u16;
        let argv = ["iperf3", "-s", "-p", &port.to_string()]
            .map(String::from)
            .to_vec();
        let mut job = job(level.clone(), &format!("c0-r1-{component}"), argv, &workdir);
        job.image = Some(PathBuf::from(image));
        job.stack = Some(isolab_lab::platform::StackPlace {
            run: run.clone(),
            component: component.into(),
            total: total.clone(),
        });
        let spec = ServiceSpec {
            port,
            ready_timeout: Duration::from_secs(90),
        };
        let service = platforms
            .start_service(&job, spec)
            .unwrap_or_else(|e| panic!("{component}: {e}"));
        assert!(
            service.shares_guest() && service.is_running(),
            "{component}"
        );
        services.push(service);
    }
    let (db, web) = (&services[0], &services[1]);
    // One guest: one address, one QEMU cgroup; a container each.
    assert_eq!(db.address.ip(), web.address.ip());
    assert_eq!(db.cgroup, web.cgroup);
    let facts = web.guest_facts();
    assert_eq!(facts["arrangement"], "shared", "{facts}");
    assert_eq!(facts["address"], db.address.ip().to_string(), "{facts}");
    assert_eq!(facts["container"], "stack-web", "{facts}");
    let containers = facts["containers"].as_str().unwrap();
    assert!(
        containers.contains("stack-db") && containers.contains("stack-web"),
        "{containers}"
    );
    // QEMU's counters are counted once, with the first component.
    assert!(db.stats().is_some_and(|s| s.cpu_usage.is_some()));
    assert!(web.stats().is_none());
    let guest = match web.address.ip() {
        std::net::IpAddr::V4(ip) => ip,
        other => panic!("{other}"),
    };
    for s in &services {
        let bits = iperf3_client(guest, s.address.port()).unwrap_or_else(|e| panic!("{e}"));
        assert!(bits > 0.0);
    }
    let tap = isolab_runtime::network::tap_name(
        guest,
        isolab_runtime::network::Ipv4Subnet::parse(isolab_runtime::network::DEFAULT_SUBNET)
            .unwrap(),
    );
    let mut services = services.into_iter();
    let db = services.next().unwrap();
    let web = services.next().unwrap();
    db.stop().unwrap();
    assert!(
        web.is_running(),
        "web stops with db: {}",
        web.stderr_tail(500)
    );
    assert!(iperf3_client(guest, web.address.port()).unwrap() > 0.0);
    assert!(Path::new("/sys/class/net").join(&tap).exists());
    web.stop().unwrap();
    assert!(
        !Path::new("/sys/class/net").join(&tap).exists(),
        "tap {tap} left"
    );
    drop(services);
    drop(platforms);
    let left = leftovers(&base);
    assert!(left.is_empty(), "cgroups left: {left:?}");
    let dirs: Vec<_> = std::fs::read_dir(work.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n.to_string_lossy().ends_with(".vm"))
        .collect();
    assert!(dirs.is_empty(), "run directories left: {dirs:?}");
}

/// Runs `iperf3 -c GUEST -p PORT -t 2 -J` and returns the received bits per second;
/// retries while the server re-listens after the readiness probe's session
/// (connection refused, reset or closed while it tears that session down) for up to 30 s:
/// in a TCG guest the teardown took more than one retry in CI.
fn iperf3_client(guest: Ipv4Addr, port: u16) -> Result<f64, String> {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let out = std::process::Command::new("iperf3")
            .args([
                "-c",
                &guest.to_string(),
                "-p",
                &port.to_string(),
                "-t",
                "2",
                "-J",
            ])
            .output()
            .map_err(|e| format!("iperf3: {e}"))?;
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| {
            format!(
                "iperf3 -J printed no JSON ({e}): {}",
                String::from_utf8_lossy(&out.stderr)
            )
        })?;
        if let Some(error) = json["error"].as_str() {
            // A session that meets the server while it tears down the readiness probe's is
            // reset, or closed once its control message is read (slower in a TCG guest).
            let transient = [
                "Connection refused",
                "reset by peer",
                "control socket has closed",
            ]
            .iter()
            .any(|t| error.contains(t));
            if transient && std::time::Instant::now() < deadline {
                eprintln!("iperf3 -c {guest}: {error}; again");
                std::thread::sleep(Duration::from_millis(300));
                continue;
            }
            return Err(format!("iperf3 -c {guest}: {error}"));
        }
        return json["end"]["sum_received"]["bits_per_second"]
            .as_f64()
            .ok_or_else(|| format!("no end.sum_received.bits_per_second in {json}"));
    }
}
