//! Integration tests: a fake cgroupfs in a temporary directory (with a fake kernel
//! behind the `Syscalls` trait) for v1 and v2, and the real cgroupfs of this host
//! as root (skipped with a printed reason when not root or a controller is missing).

use std::collections::BTreeSet;
use std::fs;
use std::os::fd::AsRawFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use isolab_cgroups::testing::{FakeKernel, V1_UNLIMITED};
use isolab_cgroups::{
    list_below, Bytes, Cgroup, Controller, CpuQuota, CpuWeight, DeviceNumber, Error, Hierarchy,
    HugetlbLimit, IdSet, IoThrottle, Limits, Version,
};

fn read(path: impl AsRef<Path>) -> String {
    fs::read_to_string(path.as_ref()).unwrap_or_else(|e| panic!("{}: {e}", path.as_ref().display()))
}

fn write(path: impl AsRef<Path>, data: &str) {
    fs::write(path.as_ref(), data).unwrap_or_else(|e| panic!("{}: {e}", path.as_ref().display()));
}

/// A pid no real process has (above the default pid_max), for fake trees.
const FAKE_PID: u32 = 4_194_399;

fn set(s: &str) -> IdSet {
    s.parse().unwrap()
}

// ---------------------------------------------------------------------------
// Fake v2

fn fake_v2() -> (tempfile::TempDir, Hierarchy, Arc<FakeKernel>) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        root.join("cgroup.controllers"),
        "cpuset cpu io memory hugetlb pids rdma misc\n",
    );
    // Empty: a plain file cannot merge writes as the kernel does, so the partial
    // case ("memory" already enabled) is covered by a unit test of the v2 module.
    write(root.join("cgroup.subtree_control"), "");
    write(root.join("cgroup.procs"), "1\n");
    let kernel = FakeKernel::new(root, true);
    let h = Hierarchy::v2(root).with_syscalls(kernel.clone());
    (dir, h, kernel)
}

#[test]
fn fake_v2_create_apply_read_stats_remove() {
    let (dir, h, kernel) = fake_v2();
    let root = dir.path();
    assert_eq!(h.version(), Version::V2);
    assert_eq!(h.describe(), format!("v2 at {}", root.display()));

    let cg = Cgroup::create(&h, Path::new("isolab/7/run-12")).unwrap();
    assert_eq!(cg.rel(), Path::new("isolab/7/run-12"));
    let leaf = root.join("isolab/7/run-12");
    assert_eq!(cg.paths(), vec![leaf.as_path()]);
    assert_eq!(
        read(root.join("cgroup.subtree_control")),
        "+cpu +cpuset +memory +pids +io +hugetlb"
    );
    assert_eq!(
        read(root.join("isolab/cgroup.subtree_control")),
        "+cpu +cpuset +memory +pids +io +hugetlb"
    );
    assert_eq!(
        read(root.join("isolab/7/cgroup.subtree_control")),
        "+cpu +cpuset +memory +pids +io +hugetlb"
    );
    assert_eq!(
        read(leaf.join("cgroup.subtree_control")),
        "",
        "the leaf holds processes"
    );

    let dev = DeviceNumber {
        major: 254,
        minor: 0,
    };
    let limits = Limits {
        cpu: Some(CpuQuota::from_cpus(0.5, CpuQuota::DEFAULT_PERIOD).unwrap()),
        cpuset: Some(set("0-1")),
        mems: Some(set("0")),
        memory_max: Some(Bytes::mib(256)),
        memory_swap_max: Some(Bytes(0)),
        pids_max: Some(64),
        io: vec![IoThrottle {
            read_bps: Some(10 << 20),
            write_iops: Some(100),
            ..IoThrottle::unlimited(dev)
        }],
        cpu_weight: Some(CpuWeight::Shares(512)),
        memory_reservation: Some(Bytes::mib(64)),
        hugetlb: vec![HugetlbLimit {
            page_size: "2MB".parse().unwrap(),
            limit: Bytes::mib(8),
        }],
        unified: [("memory.high", "1073741824"), ("pids.max", "65")]
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .into(),
        // Only cgroup v1 has these (a v2 hierarchy refuses them).
        memory_swappiness: None,
        memory_tcp_max: None,
        oom_kill_disabled: false,
    };
    cg.apply(&limits).unwrap();
    assert_eq!(read(leaf.join("cpu.max")), "50000 100000");
    assert_eq!(
        read(leaf.join("cpu.weight")),
        "59",
        "512 shares as a weight"
    );
    assert_eq!(read(leaf.join("memory.low")), "67108864");
    assert_eq!(read(leaf.join("hugetlb.2MB.max")), "8388608");
    assert_eq!(read(leaf.join("memory.high")), "1073741824");
    assert_eq!(read(leaf.join("pids.max")), "65", "unified files win");
    assert_eq!(
        cg.read_unified(limits.unified.keys().map(String::as_str))
            .unwrap(),
        limits.unified
    );
    let read_back = cg.read_limits().unwrap();
    assert_eq!(read_back.cpu_weight, Some(CpuWeight::Weight(59)));
    assert!(read_back.unified.is_empty());
    assert_eq!(
        limits.differences(&read_back),
        ["pids asked 64 read 65".to_string()],
        "512 shares are weight 59; a unified file overrode pids.max"
    );
    let limits = Limits {
        unified: Default::default(),
        ..limits
    };
    cg.apply(&limits).unwrap();
    assert_eq!(read(leaf.join("cpuset.cpus")), "0-1");
    assert_eq!(read(leaf.join("cpuset.mems")), "0");
    assert_eq!(read(leaf.join("memory.max")), "268435456");
    assert_eq!(read(leaf.join("memory.swap.max")), "0");
    assert_eq!(read(leaf.join("pids.max")), "64");
    assert_eq!(read(leaf.join("io.max")), "254:0 rbps=10485760 wiops=100");
    assert_eq!(
        cg.read_limits().unwrap(),
        Limits {
            cpu_weight: Some(CpuWeight::Weight(59)),
            ..limits
        }
    );

    // What the kernel would show after some work.
    write(
        leaf.join("cpu.stat"),
        "usage_usec 1500000\nuser_usec 1000000\nsystem_usec 500000\nnr_periods 30\n\
         nr_throttled 12\nthrottled_usec 250000\n",
    );
    write(leaf.join("memory.current"), "1048576\n");
    write(leaf.join("memory.peak"), "4194304\n");
    write(
        leaf.join("io.stat"),
        "254:0 rbytes=4096 wbytes=8192 rios=1 wios=2 dbytes=0 dios=0\n",
    );
    write(leaf.join("pids.current"), "3\n");
    write(
        leaf.join("cpu.pressure"),
        "some avg10=12.50 avg60=3.00 avg300=1.00 total=123456\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
    );
    fs::remove_file(leaf.join("io.pressure")).unwrap();
    let s = cg.stats().unwrap();
    assert_eq!(s.cpu_usage, Some(Duration::from_millis(1500)));
    assert_eq!(s.cpu_user, Some(Duration::from_secs(1)));
    assert_eq!(s.cpu_system, Some(Duration::from_millis(500)));
    assert_eq!(s.nr_periods, Some(30));
    assert_eq!(s.nr_throttled, Some(12));
    assert_eq!(s.throttled, Some(Duration::from_millis(250)));
    assert_eq!(s.memory_current, Some(Bytes::mib(1)));
    assert_eq!(s.memory_peak, Some(Bytes::mib(4)));
    assert_eq!(s.io_read, Some(Bytes(4096)));
    assert_eq!(s.io_write, Some(Bytes(8192)));
    assert_eq!(s.pids_current, Some(3));
    let psi = s.psi.unwrap();
    assert_eq!(psi.cpu.unwrap().some.avg10, 12.5);
    assert_eq!(psi.cpu.unwrap().some.total, Duration::from_micros(123_456));
    assert!(psi.memory.is_some());
    assert_eq!(psi.io, None, "absent pressure file");

    // An old kernel without memory.peak.
    fs::remove_file(leaf.join("memory.peak")).unwrap();
    assert_eq!(cg.stats().unwrap().memory_peak, None);

    cg.attach(FAKE_PID).unwrap();
    assert_eq!(read(leaf.join("cgroup.procs")), FAKE_PID.to_string());
    assert_eq!(cg.pids().unwrap(), vec![FAKE_PID]);

    cg.kill_all().unwrap();
    assert_eq!(read(leaf.join("cgroup.kill")), "1");
    assert_eq!(
        read(leaf.parent().unwrap().join("cgroup.kill")),
        "",
        "only the leaf was killed"
    );
    assert_eq!(kernel.killed(), vec![FAKE_PID]);
    cg.remove().unwrap();
    assert!(
        !root.join("isolab").exists(),
        "created ancestors are removed"
    );
    assert!(root.join("cgroup.procs").exists(), "the root stays");
}

#[test]
fn fake_v2_kill_uses_cgroup_kill_first() {
    let (_dir, h, kernel) = fake_v2();
    let cg = Cgroup::create(&h, Path::new("k")).unwrap();
    let leaf = cg.paths()[0].to_owned();
    write(
        leaf.join("cgroup.procs"),
        &format!("{FAKE_PID}\n{}\n", FAKE_PID + 1),
    );
    cg.kill_all().unwrap();
    assert_eq!(read(leaf.join("cgroup.kill")), "1");
    // The fake kernel ignores cgroup.kill, so the SIGKILL round took over.
    assert_eq!(kernel.killed(), vec![FAKE_PID, FAKE_PID + 1]);
    assert!(cg.pids().unwrap().is_empty());

    // The calling process itself is never killed.
    write(
        leaf.join("cgroup.procs"),
        &format!("{}\n", std::process::id()),
    );
    let err = cg.kill_all().unwrap_err();
    assert!(matches!(err, Error::ContainsSelf { .. }), "{err}");
    write(leaf.join("cgroup.procs"), "");
    cg.remove().unwrap();
}

#[test]
fn fake_v2_errors_name_path_and_data() {
    let (dir, h, _kernel) = fake_v2();
    let cg = Cgroup::create(&h, Path::new("e")).unwrap();
    let leaf = dir.path().join("e");
    // A cpu.max the kernel rejects: simulate with a file that cannot be written.
    fs::remove_file(leaf.join("cpu.max")).unwrap();
    fs::create_dir(leaf.join("cpu.max")).unwrap();
    let limits = Limits {
        cpu: Some(CpuQuota::from_cpus(0.5, CpuQuota::DEFAULT_PERIOD).unwrap()),
        ..Limits::default()
    };
    let err = cg.apply(&limits).unwrap_err().to_string();
    let expected = format!(
        "cannot write \"50000 100000\" to {}: ",
        leaf.join("cpu.max").display()
    );
    assert!(err.starts_with(&expected), "{err}");
    fs::remove_dir(leaf.join("cpu.max")).unwrap();

    // A controller the parent does not offer.
    write(leaf.join("cgroup.controllers"), "memory\n");
    let err = cg
        .apply(&Limits {
            pids_max: Some(1),
            ..Limits::default()
        })
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::NotEnabled {
                controller: Controller::Pids,
                ..
            }
        ),
        "{err}"
    );
    let text = err.to_string();
    assert!(
        text.contains("`pids`") && text.contains("isolab needs it"),
        "{text}"
    );

    // Creating it again is refused, with the path.
    let err = Cgroup::create(&h, Path::new("e")).unwrap_err();
    assert!(matches!(err, Error::AlreadyExists { .. }), "{err}");
    assert!(err.to_string().contains(&leaf.display().to_string()));

    assert!(matches!(
        Cgroup::create(&h, Path::new("../escape")).unwrap_err(),
        Error::InvalidPath { .. }
    ));
    cg.remove().unwrap();
}

// ---------------------------------------------------------------------------
// Fake v1 (this host's layout: separate cpu and cpuacct, hybrid unified)

fn fake_v1(mounts: &[&str]) -> (tempfile::TempDir, Hierarchy, Arc<FakeKernel>) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for m in mounts {
        fs::create_dir(root.join(m)).unwrap();
        for (name, content) in FakeKernel::v1_files(m) {
            write(root.join(m).join(name), content);
        }
    }
    if mounts.contains(&"cpuset") {
        write(root.join("cpuset/cpuset.cpus"), "0-1\n");
        write(root.join("cpuset/cpuset.mems"), "0\n");
    }
    let kernel = FakeKernel::new(root, false);
    let h = Hierarchy::v1_under(root).with_syscalls(kernel.clone());
    (dir, h, kernel)
}

const ALL_V1: [&str; 9] = [
    "cpu", "cpuacct", "cpuset", "memory", "pids", "blkio", "freezer", "hugetlb", "unified",
];

#[test]
fn fake_v1_create_apply_read_stats_remove() {
    let (dir, h, kernel) = fake_v1(&ALL_V1);
    let root = dir.path();
    assert_eq!(h.version(), Version::V1);
    assert_eq!(
        h.describe(),
        format!(
            "v1 under {} (hybrid: PSI from {})",
            root.display(),
            root.join("unified").display()
        )
    );

    let rel = Path::new("isolab/7/run-12");
    let cg = Cgroup::create(&h, rel).unwrap();
    for m in ALL_V1 {
        assert!(root.join(m).join(rel).is_dir(), "{m}");
    }
    assert_eq!(cg.paths().len(), 9);
    assert_eq!(
        cg.path(Controller::Cpuacct),
        Some(root.join("cpuacct").join(rel).as_path())
    );
    // Each new cpuset level got its parent's cpus and mems.
    for level in ["isolab", "isolab/7", "isolab/7/run-12"] {
        assert_eq!(
            read(root.join("cpuset").join(level).join("cpuset.cpus")),
            "0-1",
            "{level}"
        );
        assert_eq!(
            read(root.join("cpuset").join(level).join("cpuset.mems")),
            "0",
            "{level}"
        );
    }

    let fresh = cg.read_limits().unwrap();
    assert_eq!(
        fresh,
        Limits {
            cpuset: Some(set("0-1")),
            mems: Some(set("0")),
            ..Limits::default()
        },
        "unlimited values read as None, the cpuset is always read"
    );

    let dev = DeviceNumber {
        major: 254,
        minor: 0,
    };
    let limits = Limits {
        cpu: Some(CpuQuota::from_cpus(0.5, CpuQuota::DEFAULT_PERIOD).unwrap()),
        cpuset: Some(set("0")),
        mems: None,
        memory_max: Some(Bytes::mib(256)),
        memory_swap_max: Some(Bytes::mib(512)),
        pids_max: Some(64),
        io: vec![IoThrottle {
            read_bps: Some(1 << 20),
            write_bps: Some(2 << 20),
            read_iops: Some(10),
            write_iops: Some(20),
            device: dev,
        }],
        cpu_weight: Some(CpuWeight::Shares(512)),
        memory_reservation: Some(Bytes::mib(64)),
        hugetlb: vec![HugetlbLimit {
            page_size: "1GB".parse().unwrap(),
            limit: Bytes::gib(2),
        }],
        unified: Default::default(),
        memory_swappiness: None,
        memory_tcp_max: None,
        oom_kill_disabled: false,
    };
    cg.apply(&limits).unwrap();
    let leaf = |m: &str| root.join(m).join(rel);
    for (file, value) in [
        ("cpu/cpu.shares", "512"),
        ("memory/memory.soft_limit_in_bytes", "67108864"),
        ("hugetlb/hugetlb.1GB.limit_in_bytes", "2147483648"),
    ] {
        let (controller, file) = file.split_once('/').unwrap();
        assert_eq!(read(leaf(controller).join(file)), value, "{file}");
    }
    assert_eq!(read(leaf("cpu").join("cpu.cfs_period_us")), "100000");
    assert_eq!(read(leaf("cpu").join("cpu.cfs_quota_us")), "50000");
    assert_eq!(read(leaf("cpuset").join("cpuset.cpus")), "0");
    assert_eq!(
        read(leaf("memory").join("memory.limit_in_bytes")),
        "268435456"
    );
    assert_eq!(
        read(leaf("memory").join("memory.memsw.limit_in_bytes")),
        "536870912"
    );
    assert_eq!(read(leaf("pids").join("pids.max")), "64");
    assert_eq!(
        read(leaf("blkio").join("blkio.throttle.read_bps_device")),
        "254:0 1048576"
    );
    assert_eq!(
        read(leaf("blkio").join("blkio.throttle.write_bps_device")),
        "254:0 2097152"
    );
    assert_eq!(
        read(leaf("blkio").join("blkio.throttle.read_iops_device")),
        "254:0 10"
    );
    assert_eq!(
        read(leaf("blkio").join("blkio.throttle.write_iops_device")),
        "254:0 20"
    );
    let mut expected = limits.clone();
    expected.mems = Some(set("0"));
    assert_eq!(cg.read_limits().unwrap(), expected);

    write(leaf("cpuacct").join("cpuacct.usage"), "2500000000\n");
    write(
        leaf("cpuacct").join("cpuacct.stat"),
        "user 200\nsystem 50\n",
    );
    write(
        leaf("cpu").join("cpu.stat"),
        "nr_periods 25\nnr_throttled 20\nthrottled_time 1500000000\n",
    );
    write(leaf("memory").join("memory.usage_in_bytes"), "1048576\n");
    write(
        leaf("memory").join("memory.max_usage_in_bytes"),
        "2097152\n",
    );
    write(
        leaf("blkio").join("blkio.throttle.io_service_bytes_recursive"),
        "254:0 Read 4096\n254:0 Write 8192\n254:0 Sync 0\n254:0 Async 12288\n254:0 Discard 0\n\
         254:0 Total 12288\n8:0 Read 1\n8:0 Write 1\n8:0 Total 2\nTotal 12290\n",
    );
    write(leaf("pids").join("pids.current"), "2\n");
    let s = cg.stats().unwrap();
    assert_eq!(s.cpu_usage, Some(Duration::from_millis(2500)));
    // USER_HZ is 100 on every architecture Linux runs isolab on.
    assert_eq!(s.cpu_user, Some(Duration::from_secs(2)));
    assert_eq!(s.cpu_system, Some(Duration::from_millis(500)));
    assert_eq!(s.nr_periods, Some(25));
    assert_eq!(s.nr_throttled, Some(20));
    assert_eq!(s.throttled, Some(Duration::from_millis(1500)));
    assert_eq!(s.memory_current, Some(Bytes::mib(1)));
    assert_eq!(s.memory_peak, Some(Bytes::mib(2)));
    assert_eq!(s.io_read, Some(Bytes(4097)));
    assert_eq!(s.io_write, Some(Bytes(8193)));
    assert_eq!(s.pids_current, Some(2));
    assert!(s.psi.unwrap().cpu.is_some(), "PSI from the unified dir");

    cg.attach(FAKE_PID).unwrap();
    for m in ALL_V1 {
        assert_eq!(
            read(leaf(m).join("cgroup.procs")),
            FAKE_PID.to_string(),
            "{m}"
        );
    }
    assert_eq!(cg.pids().unwrap(), vec![FAKE_PID]);
    cg.kill_all().unwrap();
    assert_eq!(read(leaf("unified").join("cgroup.kill")), "1");
    assert_eq!(
        read(leaf("freezer").join("freezer.state")),
        "THAWED",
        "frozen, killed, thawed"
    );
    assert_eq!(kernel.killed(), vec![FAKE_PID]);

    cg.remove().unwrap();
    for m in ALL_V1 {
        assert!(!root.join(m).join("isolab").exists(), "{m}");
        assert!(root.join(m).join("cgroup.procs").exists(), "{m}");
    }
}

#[test]
fn fake_v1_without_hybrid_and_comounted_cpu() {
    let (dir, h, _kernel) = fake_v1(&["cpu,cpuacct", "memory"]);
    let root = dir.path();
    // The co-mounted hierarchy holds the files of both controllers.
    for (name, content) in FakeKernel::v1_files("cpu")
        .into_iter()
        .chain(FakeKernel::v1_files("cpuacct"))
    {
        write(root.join("cpu,cpuacct").join(name), content);
    }
    assert_eq!(h.describe(), format!("v1 under {}", root.display()));
    let kernel = FakeKernel::new(root, false);
    let h = h.with_syscalls(kernel);
    let cg = Cgroup::create(&h, Path::new("x")).unwrap();
    assert_eq!(cg.paths().len(), 2);
    // mkdir of the fake kernel knows only single-controller names; add the files.
    for (name, content) in FakeKernel::v1_files("cpu")
        .into_iter()
        .chain(FakeKernel::v1_files("cpuacct"))
    {
        write(root.join("cpu,cpuacct/x").join(name), content);
    }
    cg.apply(&Limits {
        cpu: Some(CpuQuota::from_cpus(1.5, CpuQuota::DEFAULT_PERIOD).unwrap()),
        ..Limits::default()
    })
    .unwrap();
    assert_eq!(read(root.join("cpu,cpuacct/x/cpu.cfs_quota_us")), "150000");
    let s = cg.stats().unwrap();
    assert_eq!(s.cpu_usage, Some(Duration::ZERO));
    assert_eq!(s.psi, None, "no unified mount, no PSI");
    assert_eq!(s.pids_current, None, "pids is not mounted");

    // A limit whose controller is missing is refused before anything is written.
    let err = cg
        .apply(&Limits {
            memory_max: Some(Bytes::mib(1)),
            pids_max: Some(10),
            ..Limits::default()
        })
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::NotMounted {
                controller: Controller::Pids
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("isolab needs it"), "{err}");
    assert_eq!(
        read(root.join("memory/x/memory.limit_in_bytes")),
        V1_UNLIMITED
    );

    // Huge page limits need a hugetlb hierarchy; cgroup v2 files are refused on v1.
    let err = cg
        .apply(&Limits {
            memory_reservation: Some(Bytes::mib(1)),
            hugetlb: vec![HugetlbLimit {
                page_size: "2MB".parse().unwrap(),
                limit: Bytes::mib(2),
            }],
            ..Limits::default()
        })
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::NotMounted {
                controller: Controller::Hugetlb
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("huge page limits"), "{err}");
    let err = cg
        .apply(&Limits {
            cpu_weight: Some(CpuWeight::Shares(512)),
            unified: [("memory.high".to_string(), "1G".to_string())].into(),
            ..Limits::default()
        })
        .unwrap_err();
    assert!(matches!(err, Error::UnifiedOnV1 { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("memory.high") && text.contains("cgroup v1 host"),
        "{text}"
    );
    assert_eq!(
        read(root.join("cpu,cpuacct/x/cpu.shares")),
        "1024\n",
        "nothing was written"
    );
    assert_eq!(
        read(root.join("memory/x/memory.soft_limit_in_bytes")),
        V1_UNLIMITED
    );
    cg.remove().unwrap();
    assert!(!root.join("memory/x").exists());
}

#[test]
fn fake_v2_refuses_bad_unified_names_and_missing_hugetlb_before_writing() {
    let (dir, h, _kernel) = fake_v2();
    let cg = Cgroup::create(&h, Path::new("u")).unwrap();
    let leaf = dir.path().join("u");
    let with_unified = |name: &str| Limits {
        cpu_weight: Some(CpuWeight::Shares(2048)),
        unified: [(name.to_string(), "1".to_string())].into(),
        ..Limits::default()
    };
    for bad in ["../memory.high", "memory.high/x", "cgroup.procs", "memory"] {
        let err = cg.apply(&with_unified(bad)).unwrap_err();
        assert!(matches!(err, Error::UnifiedName { .. }), "{bad}: {err}");
        assert!(err.to_string().contains(bad), "{err}");
    }
    let err = cg.apply(&with_unified("rdma.max")).unwrap_err();
    assert!(
        matches!(&err, Error::UnifiedNotEnabled { controller, .. } if controller == "rdma"),
        "{err}"
    );
    // A controller the cgroup has not enabled: hugetlb missing from cgroup.controllers.
    write(leaf.join("cgroup.controllers"), "cpu memory pids\n");
    let err = cg
        .apply(&Limits {
            hugetlb: vec![HugetlbLimit {
                page_size: "2MB".parse().unwrap(),
                limit: Bytes::mib(2),
            }],
            ..with_unified("memory.high")
        })
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::NotEnabled {
                controller: Controller::Hugetlb,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(
        read(leaf.join("cpu.weight")),
        "100\n",
        "nothing was written"
    );
    cg.remove().unwrap();
}

#[test]
fn fake_create_rolls_back_on_error() {
    let (dir, h, _kernel) = fake_v1(&["cpuset", "memory"]);
    let root = dir.path();
    // A parent cpuset without cpuset.mems makes the copy fail half-way.
    fs::remove_file(root.join("cpuset/cpuset.mems")).unwrap();
    let err = Cgroup::create(&h, Path::new("isolab/1")).unwrap_err();
    assert!(err.to_string().contains("cpuset.mems"), "{err}");
    assert!(!root.join("cpuset/isolab").exists());
    assert!(!root.join("memory/isolab").exists());
}

#[test]
fn fake_attacher_writes_zero_in_the_child() {
    let (dir, h, _kernel) = fake_v1(&ALL_V1);
    let cg = Cgroup::create(&h, Path::new("att")).unwrap();
    let attacher = cg.attacher().unwrap();
    assert_eq!(attacher.len(), ALL_V1.len());
    let mut cmd = Command::new("true");
    // SAFETY: attach_self only calls write(2) on pre-opened descriptors.
    unsafe { cmd.pre_exec(move || attacher.attach_self()) };
    assert!(cmd.status().unwrap().success());
    // v1: the thread's own `tasks` (no threadgroup lock); cgroup2: `cgroup.procs`.
    for m in ALL_V1 {
        let file = if m == "unified" {
            "cgroup.procs"
        } else {
            "tasks"
        };
        assert_eq!(read(dir.path().join(m).join("att").join(file)), "0", "{m}");
    }
    write(dir.path().join("unified/att/cgroup.procs"), "");
    cg.remove().unwrap();
}

#[test]
fn fake_clone_target_splits_cgroup2_from_v1() {
    let (dir, h, _kernel) = fake_v1(&ALL_V1);
    let cg = Cgroup::create(&h, Path::new("ct")).unwrap();
    let target = cg.clone_target().unwrap();
    let v2 = target.v2_dir.as_ref().expect("the unified directory");
    let link = fs::read_link(format!("/proc/self/fd/{}", v2.as_raw_fd())).unwrap();
    assert_eq!(link, dir.path().join("unified/ct"));
    assert_eq!(target.v1.len(), ALL_V1.len() - 1);
    for i in 0..target.v1.len() {
        let path = target.v1.path(i).unwrap();
        assert_eq!(path.file_name().unwrap(), "tasks", "{}", path.display());
        assert!(!path.starts_with(dir.path().join("unified")));
    }
    drop(target);
    cg.remove().unwrap();

    let (_dir, h, _kernel) = fake_v2();
    let cg = Cgroup::create(&h, Path::new("ct")).unwrap();
    let target = cg.clone_target().unwrap();
    assert!(target.v2_dir.is_some());
    assert!(target.v1.is_empty());
    drop(target);
    cg.remove().unwrap();
}

#[test]
fn fake_enter_moves_the_caller_and_leave_moves_it_back() {
    let (dir, h, _kernel) = fake_v1(&ALL_V1);
    let cg = Cgroup::create(&h, Path::new("bench")).unwrap();
    let pid = std::process::id().to_string();
    let entered = cg.enter().unwrap();
    for m in ALL_V1 {
        assert_eq!(
            read(dir.path().join(m).join("bench/cgroup.procs")),
            pid,
            "{m}"
        );
    }
    entered.leave().unwrap();
    for m in ALL_V1 {
        // The fake kernel says the caller came from each hierarchy's root.
        assert_eq!(read(dir.path().join(m).join("cgroup.procs")), pid, "{m}");
        write(dir.path().join(m).join("bench/cgroup.procs"), "");
    }
    cg.remove().unwrap();

    // Dropping the guard moves back too.
    let (dir, h, _kernel) = fake_v2();
    let cg = Cgroup::create(&h, Path::new("bench")).unwrap();
    drop(cg.enter().unwrap());
    assert_eq!(read(dir.path().join("cgroup.procs")), pid);
}

#[test]
fn fake_gc_lists_deepest_first_and_removes() {
    let (dir, h, _kernel) = fake_v1(&ALL_V1);
    let root = dir.path();
    let a = Cgroup::create(&h, Path::new("isolab/1/a")).unwrap();
    let b = Cgroup::create(&h, Path::new("isolab/1/a/b")).unwrap();
    let c = Cgroup::create(&h, Path::new("isolab/2")).unwrap();
    // A leftover that exists in only one controller (a removal interrupted half-way).
    fs::create_dir(root.join("pids/isolab/3")).unwrap();
    write(root.join("pids/isolab/3/cgroup.procs"), "");
    drop((a, b, c)); // a SIGKILLed isolab leaves them behind

    let list = list_below(&h, Path::new("isolab")).unwrap();
    let expected: Vec<PathBuf> = [
        "isolab/1/a/b",
        "isolab/1/a",
        "isolab/1",
        "isolab/2",
        "isolab/3",
    ]
    .iter()
    .map(PathBuf::from)
    .collect();
    assert_eq!(list, expected);

    // Removing a parent first fails clearly.
    let err = Cgroup::open(&h, Path::new("isolab/1"))
        .unwrap()
        .remove()
        .unwrap_err();
    assert!(matches!(err, Error::RemoveDir { .. }), "{err}");

    for rel in &list {
        Cgroup::open(&h, rel).unwrap().remove().unwrap();
    }
    assert!(list_below(&h, Path::new("isolab")).unwrap().is_empty());
    Cgroup::open(&h, Path::new("isolab"))
        .unwrap()
        .remove()
        .unwrap();
    for m in ALL_V1 {
        assert!(!root.join(m).join("isolab").exists(), "{m}");
    }

    // An already-removed cgroup is a clear error, both to open and to remove.
    let err = Cgroup::open(&h, Path::new("isolab/2")).unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err}");
    assert!(err.to_string().contains("already removed"), "{err}");
    let d = Cgroup::create(&h, Path::new("twice")).unwrap();
    let d2 = Cgroup::open(&h, Path::new("twice")).unwrap();
    d.remove().unwrap();
    let err = d2.remove().unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err}");
}

// ---------------------------------------------------------------------------
// The real cgroupfs (root only)

fn is_root() -> bool {
    // SAFETY: geteuid(2) cannot fail and touches no memory.
    unsafe { libc::geteuid() == 0 }
}

/// Removes an empty cgroup directory on drop.
struct RemoveDir(PathBuf);

impl Drop for RemoveDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir(&self.0);
    }
}

/// Puts a cgroup2 root's `cgroup.subtree_control` back as it was on drop: controllers a
/// test enabled there are disabled again.
struct SubtreeControl {
    file: PathBuf,
    before: Vec<String>,
}

impl SubtreeControl {
    fn keep(root: &Path) -> SubtreeControl {
        let file = root.join("cgroup.subtree_control");
        let before = fs::read_to_string(&file)
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        SubtreeControl { file, before }
    }
}

impl Drop for SubtreeControl {
    fn drop(&mut self) {
        let now = fs::read_to_string(&self.file).unwrap_or_default();
        for added in now
            .split_whitespace()
            .filter(|c| !self.before.iter().any(|b| b == c))
        {
            let _ = fs::write(&self.file, format!("-{added}"));
        }
    }
}

/// Removes every directory below `base` in `roots` on drop, killing what is inside,
/// so that a failing test leaves nothing in /sys/fs/cgroup.
struct Cleanup {
    dirs: Vec<PathBuf>,
}

impl Cleanup {
    fn new(h: &Hierarchy, base: &str) -> Cleanup {
        let mut roots = BTreeSet::new();
        for c in [
            Controller::Cpu,
            Controller::Cpuacct,
            Controller::Cpuset,
            Controller::Memory,
            Controller::Pids,
            Controller::Blkio,
            Controller::Freezer,
            Controller::Io,
        ] {
            if let Some(m) = h.mount(c) {
                roots.insert(m.to_owned());
            }
        }
        roots.extend(h.unified().map(Path::to_owned));
        Cleanup {
            dirs: roots.into_iter().map(|r| r.join(base)).collect(),
        }
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        for top in &self.dirs {
            let mut all = Vec::new();
            let mut stack = vec![top.clone()];
            while let Some(d) = stack.pop() {
                if !d.is_dir() {
                    continue;
                }
                for e in fs::read_dir(&d).into_iter().flatten().flatten() {
                    if e.file_type().is_ok_and(|t| t.is_dir()) {
                        stack.push(e.path());
                    }
                }
                all.push(d);
            }
            all.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
            for d in all {
                let _ = fs::write(d.join("freezer.state"), "THAWED");
                for pid in fs::read_to_string(d.join("cgroup.procs"))
                    .unwrap_or_default()
                    .lines()
                {
                    if let Ok(pid) = pid.trim().parse::<i32>() {
                        // SAFETY: kill(2) with a positive pid read from the test's own cgroup.
                        unsafe { libc::kill(pid, libc::SIGKILL) };
                    }
                }
                let start = Instant::now();
                while fs::remove_dir(&d).is_err() && start.elapsed() < Duration::from_secs(2) {
                    thread::sleep(Duration::from_millis(20));
                }
                if d.exists() {
                    eprintln!("cleanup: could not remove {}", d.display());
                }
            }
        }
    }
}

/// Kills and reaps a child on drop.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The real hierarchy of this host when it is of `version` with the controllers the tests
/// use, or `None` after a skip naming what is missing. The v1 tests run for real on the
/// hybrid hosts isolab is developed on, the v2 tests on pure cgroup v2 hosts and in the test
/// guest of `crates/isolab/tests/cgroup_v2.rs` (`make test` runs both).
fn real(version: Version) -> Option<Hierarchy> {
    let h = real_any()?;
    if h.version() != version {
        isolab_skip::skip(match version {
            Version::V1 => format!(
                "needs cgroup v1 controllers; this host is pure cgroup v2 ({})",
                h.describe()
            ),
            Version::V2 => format!(
                "needs a pure cgroup v2 host; this host is {} (crates/isolab/tests/cgroup_v2.rs \
                 runs this test in a pure cgroup v2 guest)",
                h.describe()
            ),
        });
        return None;
    }
    let needed: &[Controller] = match version {
        Version::V1 => &[
            Controller::Cpu,
            Controller::Cpuacct,
            Controller::Cpuset,
            Controller::Memory,
            Controller::Pids,
        ],
        Version::V2 => &[
            Controller::Cpu,
            Controller::Cpuset,
            Controller::Memory,
            Controller::Pids,
            Controller::Io,
        ],
    };
    // v1: a hierarchy per controller; v2: the root's cgroup.controllers.
    let available = |c: &Controller| match version {
        Version::V1 => h.mount(*c).is_some(),
        Version::V2 => h.unified().is_some_and(|root| {
            fs::read_to_string(root.join("cgroup.controllers"))
                .unwrap_or_default()
                .split_whitespace()
                .any(|name| name == c.name())
        }),
    };
    if let Some(c) = needed.iter().find(|c| !available(c)) {
        isolab_skip::skip(format!(
            "the {version} controller {c} is not available on {}",
            h.describe()
        ));
        return None;
    }
    Some(h)
}

/// This host's hierarchy, whichever version, for the tests whose behaviour is the same.
fn real_any() -> Option<Hierarchy> {
    if !is_root() {
        isolab_skip::skip("the real cgroup test needs root");
        return None;
    }
    match Hierarchy::detect() {
        Ok(h) => Some(h),
        Err(e) => {
            isolab_skip::skip(format!("no cgroup hierarchy detected: {e}"));
            None
        }
    }
}

/// The block device of `/` ("254:0" for the first virtio disk), for an io throttle.
fn root_device() -> Option<DeviceNumber> {
    use std::os::unix::fs::MetadataExt;
    let dev = fs::metadata("/").ok()?.dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    // A partition is throttled through its whole disk; this suite's hosts use whole disks.
    Path::new(&format!("/sys/dev/block/{major}:{minor}/device"))
        .exists()
        .then_some(DeviceNumber { major, minor })
}

#[test]
fn real_v1_limits_throttle_and_cleanup() {
    let Some(h) = real(Version::V1) else { return };
    limits_throttle_and_cleanup(&h, "v1");
}

#[test]
fn real_v2_limits_throttle_and_cleanup() {
    let Some(h) = real(Version::V2) else { return };
    limits_throttle_and_cleanup(&h, "v2");
}

/// Creates a cgroup, applies cpu quota, cpuset, memory, pids and an io throttle, reads them
/// back, runs a busy loop in it (throttled to half a cpu, on cpu 0), reads the stats, and
/// removes it with the loop still inside.
fn limits_throttle_and_cleanup(h: &Hierarchy, tag: &str) {
    let base = format!("isolab-test-{}-{tag}", std::process::id());
    let _cleanup = Cleanup::new(h, &base);
    let rel = PathBuf::from(&base).join("a");
    let cg = Cgroup::create(h, &rel).unwrap();
    let paths: Vec<PathBuf> = cg.paths().into_iter().map(Path::to_owned).collect();
    for p in &paths {
        assert!(p.is_dir(), "{}", p.display());
    }
    if let Some(unified) = h.unified() {
        assert!(unified.join(&rel).is_dir(), "the unified dir is created");
    }

    let mut limits = Limits {
        cpu: Some(CpuQuota::from_cpus(0.5, CpuQuota::DEFAULT_PERIOD).unwrap()),
        cpuset: Some(set("0")),
        memory_max: Some(Bytes::mib(256)),
        pids_max: Some(64),
        ..Limits::default()
    };
    // real(V2) checked that the io controller is there.
    let io = h.version() == Version::V2 || h.mount(Controller::Blkio).is_some();
    match root_device() {
        Some(dev) if io => limits.io.push(IoThrottle {
            read_bps: Some(10 << 20),
            write_iops: Some(1000),
            ..IoThrottle::unlimited(dev)
        }),
        _ => isolab_skip::skip(format!(
            "the io throttle part: no io controller on {} or / is not on a whole disk",
            h.describe()
        )),
    }
    cg.apply(&limits).unwrap();
    let read_back = cg.read_limits().unwrap();
    let mut expected = limits.clone();
    expected.mems = read_back.mems.clone();
    match h.version() {
        // v1 copies the parent's memory nodes into a new cpuset (it refuses tasks without).
        Version::V1 => assert!(read_back.mems.as_ref().is_some_and(|m| !m.is_empty())),
        // v2 leaves cpuset.mems empty, inheriting the parent's: nothing was applied.
        Version::V2 => assert_eq!(read_back.mems, None),
    }
    assert_eq!(read_back, expected);
    if h.version() == Version::V2 {
        let leaf = h.unified().unwrap().join(&rel);
        assert!(!read(leaf.join("cpuset.mems.effective")).trim().is_empty());
        assert_eq!(read(leaf.join("cpu.max")).trim(), "50000 100000");
        assert_eq!(read(leaf.join("cpuset.cpus.effective")).trim(), "0");
        assert_eq!(read(leaf.join("memory.max")).trim(), "268435456");
        assert_eq!(read(leaf.join("pids.max")).trim(), "64");
        if let Some(dev) = limits.io.first().map(|t| t.device) {
            let io_max = read(leaf.join("io.max"));
            assert!(
                io_max.contains(&format!(
                    "{}:{} rbps=10485760 wbps=max riops=max wiops=1000",
                    dev.major, dev.minor
                )),
                "{io_max}"
            );
        }
    }

    let attacher = cg.attacher().unwrap();
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "while :; do :; done"]);
    // SAFETY: attach_self only calls write(2) on pre-opened descriptors.
    unsafe { cmd.pre_exec(move || attacher.attach_self()) };
    let mut child = Reaped(cmd.spawn().unwrap());
    let pid = child.0.id();
    assert_eq!(cg.pids().unwrap(), vec![pid]);
    let cpus_allowed = read(format!("/proc/{pid}/status"))
        .lines()
        .find(|l| l.starts_with("Cpus_allowed_list:"))
        .map(|l| l.split_whitespace().last().unwrap_or_default().to_owned());
    assert_eq!(
        cpus_allowed.as_deref(),
        Some("0"),
        "the child runs on the cpuset"
    );

    let before = cg.stats().unwrap();
    let t0 = Instant::now();
    thread::sleep(Duration::from_millis(1200));
    let after = cg.stats().unwrap();
    let elapsed = t0.elapsed();
    let used = after.cpu_usage.unwrap() - before.cpu_usage.unwrap();
    eprintln!("used {used:?} of cpu in {elapsed:?} with a quota of 0.5 cpus; {after:?}");
    assert!(after.cpu_usage.unwrap() > Duration::ZERO);
    assert!(after.nr_throttled.unwrap() > 0, "{after:?}");
    assert!(after.throttled.unwrap() > Duration::ZERO, "{after:?}");
    // Loose: the machine is shared with builds, but the quota is a hard ceiling.
    assert!(
        used < elapsed.mul_f64(0.5) + Duration::from_millis(150),
        "{used:?} in {elapsed:?}"
    );
    assert!(used > elapsed.mul_f64(0.05), "{used:?} in {elapsed:?}");
    assert!(after.memory_current.is_some() && after.memory_peak.is_some());
    assert!(after.pids_current.unwrap() >= 1);
    if io {
        assert!(
            after.io_read.is_some() && after.io_write.is_some(),
            "{after:?}"
        );
    }
    if h.unified().is_some() {
        assert!(after.psi.is_some_and(|p| p.cpu.is_some()), "PSI");
    }

    cg.remove().unwrap();
    let status = child.0.wait().unwrap();
    assert_eq!(status.signal(), Some(libc::SIGKILL));
    for p in &paths {
        assert!(!p.exists(), "{} is left behind", p.display());
        assert!(
            !p.parent().unwrap().exists(),
            "created ancestor {} is left behind",
            p.display()
        );
    }
}

#[test]
fn real_unified_cgroup2_kill_and_psi() {
    // The hybrid layout's controller-less cgroup2 mount; a pure v2 host's kill and PSI are
    // tested by real_v2_kill_all_stops_a_fork_loop and real_v2_limits_throttle_and_cleanup.
    let Some(detected) = real(Version::V1) else {
        return;
    };
    let Some(root) = detected.unified() else {
        isolab_skip::skip(format!(
            "a hybrid test: this v1 host has no controller-less cgroup2 mount ({})",
            detected.describe()
        ));
        return;
    };
    // Treated as a v2 hierarchy, creating enables what its root offers in the root's
    // subtree_control. The cgroup2 root offers hugetlb once it is back in cgroup2, and
    // a hugetlb cgroup made there (and still dying after its removal) keeps the
    // hybrid-cgroup fix of crun and Podman from moving hugetlb to v1 for every later
    // test. So the test's hierarchy is rooted one level down, in a directory of its
    // own that offers no controller; the root's subtree_control is put back too.
    let _subtree = SubtreeControl::keep(root);
    let top = root.join(format!("isolab-test-{}-v2root", std::process::id()));
    fs::create_dir(&top).unwrap();
    let _top = RemoveDir(top.clone());
    let h = Hierarchy::v2(&top);
    let base = format!("isolab-test-{}-v2", std::process::id());
    let _cleanup = Cleanup::new(&h, &base);
    let rel = PathBuf::from(&base).join("a");
    let cg = Cgroup::create(&h, &rel).unwrap();
    let leaf = top.join(&rel);
    assert!(leaf.is_dir());
    assert_eq!(
        fs::read_to_string(top.join("cgroup.controllers"))
            .unwrap()
            .trim(),
        "",
        "the test's root offers no controller"
    );

    let mut child = Reaped(Command::new("sleep").arg("30").spawn().unwrap());
    let pid = child.0.id();
    cg.attach(pid).unwrap();
    assert_eq!(cg.pids().unwrap(), vec![pid]);
    let s = cg.stats().unwrap();
    assert!(s.psi.is_some(), "{s:?}");
    assert!(s.cpu_usage.is_some(), "{s:?}");

    // No controllers on this mount: limits are refused with a clear error.
    if !read(root.join("cgroup.controllers")).contains("pids") {
        let err = cg
            .apply(&Limits {
                pids_max: Some(8),
                ..Limits::default()
            })
            .unwrap_err();
        assert!(
            matches!(
                err,
                Error::NotEnabled {
                    controller: Controller::Pids,
                    ..
                }
            ),
            "{err}"
        );
    }

    cg.kill_all().unwrap();
    assert!(cg.pids().unwrap().is_empty());
    assert_eq!(child.0.wait().unwrap().signal(), Some(libc::SIGKILL));
    cg.remove().unwrap();
    assert!(!leaf.exists());
    assert!(!top.join(&base).exists());
}

#[test]
fn real_gc_of_leftovers() {
    let Some(h) = real_any() else { return };
    let base = format!("isolab-test-{}-gc", std::process::id());
    let _cleanup = Cleanup::new(&h, &base);
    let deep = Cgroup::create(&h, &PathBuf::from(&base).join("1/a")).unwrap();
    let other = Cgroup::create(&h, &PathBuf::from(&base).join("2")).unwrap();
    let child = Reaped(Command::new("sleep").arg("30").spawn().unwrap());
    deep.attach(child.0.id()).unwrap();
    drop((deep, other)); // as if isolab had been SIGKILLed

    let list = list_below(&h, Path::new(&base)).unwrap();
    let expected: Vec<PathBuf> = ["1/a", "1", "2"]
        .iter()
        .map(|r| PathBuf::from(&base).join(r))
        .collect();
    assert_eq!(list, expected);
    for rel in &list {
        Cgroup::open(&h, rel).unwrap().remove().unwrap();
    }
    Cgroup::open(&h, Path::new(&base))
        .unwrap()
        .remove()
        .unwrap();
    assert!(list_below(&h, Path::new(&base)).unwrap().is_empty());
    let err = Cgroup::open(&h, &PathBuf::from(&base).join("2")).unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{err}");
    for dir in Cleanup::new(&h, &base).dirs.iter() {
        assert!(!dir.exists(), "{}", dir.display());
    }
    drop(child);
}

#[test]
fn real_v1_without_cgroup_kill_stops_a_fork_loop() {
    let Some(detected) = real(Version::V1) else {
        return;
    };
    if detected.mount(Controller::Freezer).is_none() {
        isolab_skip::skip("the v1 freezer is not mounted");
        return;
    }
    // This host's layout without its cgroup2 mount: pure v1, so kill_all has to
    // use the freezer and SIGKILL rounds instead of cgroup.kill.
    let mountinfo: String = read("/proc/self/mountinfo")
        .lines()
        .filter(|l| !l.contains(" - cgroup2 "))
        .map(|l| format!("{l}\n"))
        .collect();
    let h = Hierarchy::from_mountinfo(&mountinfo).unwrap();
    assert_eq!(h.unified(), None);
    kill_all_stops_a_fork_loop(&detected, &h, "fork");
}

#[test]
fn real_v2_kill_all_stops_a_fork_loop() {
    let Some(h) = real(Version::V2) else { return };
    // cgroup.kill (Linux 5.14+) ends the loop in one write.
    kill_all_stops_a_fork_loop(&h, &h, "fork-v2");
}

/// A shell forking short-lived children in a cgroup of `h` is stopped by `kill_all`, and the
/// cgroup removed (`detected` is the host's full layout, for the cleanup).
fn kill_all_stops_a_fork_loop(detected: &Hierarchy, h: &Hierarchy, tag: &str) {
    let base = format!("isolab-test-{}-{tag}", std::process::id());
    let _cleanup = Cleanup::new(detected, &base);
    let cg = Cgroup::create(h, &PathBuf::from(&base).join("bomb")).unwrap();
    cg.apply(&Limits {
        pids_max: Some(2000),
        ..Limits::default()
    })
    .unwrap();
    let attacher = cg.attacher().unwrap();
    let mut cmd = Command::new("sh");
    // Short-lived children: the shell keeps forking while kill_all runs.
    cmd.args(["-c", "while :; do sleep 0.05 & done"]);
    // SAFETY: attach_self only calls write(2) on pre-opened descriptors.
    unsafe { cmd.pre_exec(move || attacher.attach_self()) };
    let mut child = Reaped(cmd.spawn().unwrap());
    thread::sleep(Duration::from_millis(300));
    let before = cg.pids().unwrap().len();
    assert!(before > 1, "the loop forked ({before} processes)");
    let t0 = Instant::now();
    cg.kill_all().unwrap();
    eprintln!("killed {before}+ processes in {:?}", t0.elapsed());
    assert!(cg.pids().unwrap().is_empty());
    assert_eq!(child.0.wait().unwrap().signal(), Some(libc::SIGKILL));
    let paths: Vec<PathBuf> = cg.paths().into_iter().map(Path::to_owned).collect();
    cg.remove().unwrap();
    for p in paths {
        assert!(!p.exists(), "{}", p.display());
        assert!(!p.parent().unwrap().exists(), "{}", p.display());
    }
}

/// v2's "no internal processes": a command started in an instance cgroup waits in its
/// process leaf, so that a runtime it starts can nest a container's cgroup with controllers
/// in the instance cgroup (with the command in the instance cgroup itself, enabling them
/// failed with EBUSY); removing the instance removes leaf and container cgroup too.
#[test]
fn real_v2_process_leaf_lets_a_container_cgroup_nest() {
    let Some(h) = real(Version::V2) else { return };
    let base = format!("isolab-test-{}-leaf", std::process::id());
    let _cleanup = Cleanup::new(&h, &base);
    let instance = Cgroup::create(&h, &PathBuf::from(&base).join("c0-r1")).unwrap();
    instance
        .apply(&Limits {
            cpu: Some(CpuQuota::from_cpus(1.0, CpuQuota::DEFAULT_PERIOD).unwrap()),
            ..Limits::default()
        })
        .unwrap();
    let leaf = instance.process_leaf().unwrap().expect("a leaf on v2");
    assert_eq!(
        leaf.rel(),
        instance.rel().join(isolab_cgroups::PROCESS_LEAF)
    );
    let attacher = leaf.attacher().unwrap();
    let mut cmd = Command::new("sleep");
    cmd.arg("30");
    // SAFETY: attach_self only calls write(2) on pre-opened descriptors.
    unsafe { cmd.pre_exec(move || attacher.attach_self()) };
    let mut child = Reaped(cmd.spawn().unwrap());
    // What isolab-runtime does with --cgroup-parent: a container cgroup with limits below.
    let container = Cgroup::create(&h, &instance.rel().join("rt-x")).unwrap();
    container
        .apply(&Limits {
            pids_max: Some(16),
            memory_max: Some(Bytes::mib(64)),
            ..Limits::default()
        })
        .unwrap();
    assert_eq!(leaf.pids().unwrap(), vec![child.0.id()]);
    // Opened again, the same leaf.
    let again = instance.process_leaf().unwrap().unwrap();
    assert_eq!(again.rel(), leaf.rel());
    let top = h.unified().unwrap().join(instance.rel());
    drop((container, leaf, again));
    instance.remove().unwrap();
    assert_eq!(child.0.wait().unwrap().signal(), Some(libc::SIGKILL));
    assert!(!top.exists(), "{} left", top.display());
}

#[test]
fn the_process_leaf_is_v2_only() {
    let (_dir, h, _kernel) = fake_v1(&["cpu", "memory"]);
    let cg = Cgroup::create(&h, Path::new("isolab/1/c0-r1")).unwrap();
    assert!(cg.process_leaf().unwrap().is_none());
}

/// Runs in a process of its own (spawned by the test below with
/// `ISOLAB_ENTER_HELPER` set): moving the whole test process would move the
/// other tests' threads and children too.
#[test]
fn real_enter_helper() {
    let Ok(base) = std::env::var("ISOLAB_ENTER_HELPER") else {
        return;
    };
    let h = Hierarchy::detect().unwrap();
    let rel = PathBuf::from(&base).join("bench");
    let cg = Cgroup::create(&h, &rel).unwrap();
    let entered = cg.enter().unwrap();
    let child = Command::new("cat")
        .arg("/proc/self/cgroup")
        .output()
        .unwrap();
    let inside = String::from_utf8_lossy(&child.stdout).into_owned();
    let own_inside = read("/proc/self/cgroup");
    entered.leave().unwrap();
    let own_after = read("/proc/self/cgroup");
    cg.remove().unwrap();
    println!("CHILD\n{inside}OWN-INSIDE\n{own_inside}OWN-AFTER\n{own_after}END");
}

#[test]
fn real_enter_puts_what_the_caller_spawns_in_the_cgroup_and_leave_returns() {
    let Some(h) = real_any() else { return };
    let base = format!("isolab-test-{}-enter", std::process::id());
    let _cleanup = Cleanup::new(&h, &base);
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "real_enter_helper",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("ISOLAB_ENTER_HELPER", &base)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let section = |name: &str| -> String {
        let start = text.find(&format!("{name}\n")).unwrap() + name.len() + 1;
        let rest = &text[start..];
        let end = rest
            .find(|c: char| c.is_ascii_uppercase())
            .unwrap_or(rest.len());
        rest[..end].to_owned()
    };
    let want = format!("/{base}/bench");
    for (what, listing) in [
        ("child", section("CHILD")),
        ("caller", section("OWN-INSIDE")),
    ] {
        // v1: one line per hierarchy; pure v2: only the `0::` line checked below.
        let controllers: &[&str] = match h.version() {
            Version::V1 => &["memory", "cpu", "pids"],
            Version::V2 => &[],
        };
        for controller in controllers {
            let line = listing
                .lines()
                .find(|l| {
                    l.split(':')
                        .nth(1)
                        .is_some_and(|cs| cs.split(',').any(|c| c == *controller))
                })
                .unwrap_or_else(|| panic!("{what}: no {controller} line in {listing}"));
            assert!(line.ends_with(&want), "{what}: {line}");
        }
        if h.unified().is_some() {
            assert!(
                listing.lines().any(|l| l == format!("0::{want}")),
                "{what}: {listing}"
            );
        }
    }
    assert!(!section("OWN-AFTER").contains(&want), "{text}");
}
