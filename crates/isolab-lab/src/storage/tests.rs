//! The storage levels against [`FakeStorageHost`]: what each makes, that it is read
//! back, that everything goes when the storage is dropped (also after a failure), and
//! what `gc` removes.

use super::*;

fn spec(backing: &[&Path], stripes: u32) -> StorageSpec {
    StorageSpec {
        backing: backing.iter().map(|p| p.to_path_buf()).collect(),
        size: isolab_cgroups::Bytes(64 << 20),
        stripes,
        striping: crate::spec::Striping::DeviceMapper,
    }
}

/// The storage of `level` for a run `exp7-pid42-c0-r1` under `base`.
fn make(
    host: &Arc<FakeStorageHost>,
    level: StorageLevel,
    spec: &StorageSpec,
    base: &Path,
    instances: u32,
) -> Result<Mounted<'static>, StorageError> {
    let workdir = base.join("exp7-pid42-c0-r1");
    prepare(
        host.clone(),
        Request {
            level,
            spec,
            base,
            workdir: &workdir,
            instances,
        },
        None,
    )
}

#[test]
fn bind_mounts_nothing_and_says_which_file_system_holds_the_directory() {
    let dir = tempfile::tempdir().unwrap();
    let host = Arc::new(FakeStorageHost::new());
    host.add_mount("/dev/sda1", Path::new("/"), "ext4");
    let m = make(&host, StorageLevel::Bind, &spec(&[], 2), dir.path(), 1).unwrap();
    let facts = m.facts().unwrap();
    assert!(facts.mounts.is_empty() && facts.devices.is_empty());
    assert_eq!(facts.disks, ["ext4 /dev/sda1 at /"]);
    assert_eq!(facts.note(), "storage `bind`; on ext4 /dev/sda1 at /");
    assert!(dir.path().join("exp7-pid42-c0-r1").is_dir());
    drop(m);
    assert!(host.calls().is_empty());
}

#[test]
fn tmpfs_and_layer_mount_at_the_working_directory_and_go_when_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let host = Arc::new(FakeStorageHost::new());
    let wd = dir.path().join("exp7-pid42-c0-r1");
    let m = make(&host, StorageLevel::Tmpfs, &spec(&[], 2), dir.path(), 1).unwrap();
    let facts = m.facts().unwrap();
    assert_eq!(
        facts.mounts,
        [MountFact {
            path: wd.clone(),
            fstype: "tmpfs".into(),
            source: "isolab-storage".into()
        }]
    );
    drop(m);
    assert!(host.is_clean());

    let m = make(&host, StorageLevel::Layer, &spec(&[], 2), dir.path(), 1).unwrap();
    let layers = dir.path().join("exp7-pid42-c0-r1.storage");
    assert!(layers.join("upper").is_dir());
    assert_eq!(m.facts().unwrap().mounts[0].fstype, "overlay");
    let mount = host.calls().pop().unwrap();
    assert_eq!(
        mount,
        format!(
            "mount isolab-storage {} overlay lowerdir={1}/lower,upperdir={1}/upper,workdir={1}/work",
            wd.display(),
            layers.display()
        )
    );
    drop(m);
    assert!(host.is_clean() && !layers.exists());
}

#[test]
fn an_image_is_an_ext4_file_on_a_loop_device_in_the_backing_directory() {
    let dir = tempfile::tempdir().unwrap();
    let disk = tempfile::tempdir().unwrap();
    let host = Arc::new(FakeStorageHost::new());
    let m = make(
        &host,
        StorageLevel::Image,
        &spec(&[disk.path()], 2),
        dir.path(),
        1,
    )
    .unwrap();
    let file = disk.path().join("exp7-pid42-c0-r1.storage/image.ext4");
    let wd = dir.path().join("exp7-pid42-c0-r1");
    assert_eq!(
        host.calls(),
        [
            format!("create {} {}", file.display(), 64 << 20),
            format!("losetup /dev/loop0 {}", file.display()),
            "mkfs.ext4 /dev/loop0".to_owned(),
            format!("mount /dev/loop0 {} ext4 ", wd.display()),
        ]
    );
    let facts = m.facts().unwrap();
    assert_eq!(facts.mounts[0].source, "/dev/loop0");
    assert!(
        facts.note().contains("block devices are loop devices over files, not disks of their own: /dev/loop0 over file"),
        "{}",
        facts.note()
    );
    drop(m);
    assert!(host.is_clean() && !file.exists());
}

#[test]
fn dedicated_gives_each_instance_a_device_and_shared_stripes_one_for_all() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let host = Arc::new(FakeStorageHost::new());
    let wd = dir.path().join("exp7-pid42-c0-r1");

    let m = make(
        &host,
        StorageLevel::Dedicated,
        &spec(&[a.path(), b.path()], 2),
        dir.path(),
        3,
    )
    .unwrap();
    let facts = m.facts().unwrap();
    let targets: Vec<&Path> = facts.mounts.iter().map(|f| f.path.as_path()).collect();
    assert_eq!(targets, [wd.join("i0"), wd.join("i1"), wd.join("i2")]);
    let sources: Vec<&str> = facts.mounts.iter().map(|f| f.source.as_str()).collect();
    assert_eq!(sources, ["/dev/loop0", "/dev/loop1", "/dev/loop2"]);
    // Instances take the backing directories in turn.
    assert!(b.path().join("exp7-pid42-c0-r1.storage/i1.ext4").exists());
    assert!(a.path().join("exp7-pid42-c0-r1.storage/i2.ext4").exists());
    drop(m);
    assert!(host.is_clean());

    let host = Arc::new(FakeStorageHost::new());
    let m = make(
        &host,
        StorageLevel::Shared,
        &spec(&[a.path(), b.path()], 2),
        dir.path(),
        3,
    )
    .unwrap();
    let calls = host.calls();
    // 64 MiB over 2 stripes: 65536 sectors each, 128-sector chunks.
    assert!(calls.contains(&"dmsetup create isolab-exp7-pid42-c0-r1 0 131072 striped 2 128 /dev/loop0 0 /dev/loop1 0".to_owned()), "{calls:?}");
    let facts = m.facts().unwrap();
    assert_eq!(facts.mounts.len(), 1);
    assert_eq!(
        facts.mounts[0].source,
        "/dev/mapper/isolab-exp7-pid42-c0-r1"
    );
    assert!(
        facts.note().contains(
            "not disks of their own, with a device-mapper target over them: /dev/loop0 over file"
        ),
        "{}",
        facts.note()
    );
    assert!(facts.devices[2].starts_with("device-mapper `striped` /dev/mapper/isolab-exp7-pid42-c0-r1 over /dev/loop0, /dev/loop1 in 64 KiB chunks"), "{:?}", facts.devices);
    drop(m);
    assert!(host.is_clean());
    let last: Vec<String> = host.calls().into_iter().rev().take(4).collect();
    assert_eq!(
        last,
        [
            "losetup -d /dev/loop0".to_owned(),
            "losetup -d /dev/loop1".to_owned(),
            "dmsetup remove isolab-exp7-pid42-c0-r1".to_owned(),
            format!("umount {}", wd.display()),
        ]
    );

    // Striped by btrfs instead: one file system over the loop devices, mounted from
    // the first with every device named.
    let host = Arc::new(FakeStorageHost::new());
    let btrfs = StorageSpec {
        striping: crate::spec::Striping::Btrfs,
        ..spec(&[a.path(), b.path()], 2)
    };
    let m = make(&host, StorageLevel::Shared, &btrfs, dir.path(), 3).unwrap();
    let calls = host.calls();
    assert!(
        calls.contains(&"mkfs.btrfs raid0 /dev/loop0 /dev/loop1".to_owned()),
        "{calls:?}"
    );
    assert!(
        calls.contains(&format!(
            "mount /dev/loop0 {} btrfs device=/dev/loop0,device=/dev/loop1",
            wd.display()
        )),
        "{calls:?}"
    );
    let facts = m.facts().unwrap();
    assert_eq!(
        (
            facts.mounts[0].fstype.as_str(),
            facts.mounts[0].source.as_str()
        ),
        ("btrfs", "/dev/loop0")
    );
    assert!(
        facts.devices[2].starts_with("btrfs raid0"),
        "{:?}",
        facts.devices
    );
    assert!(!calls.iter().any(|c| c.starts_with("dmsetup")), "{calls:?}");
    drop(m);
    assert!(host.is_clean());
}

#[test]
fn a_failure_half_way_removes_what_was_made() {
    let dir = tempfile::tempdir().unwrap();
    let host = Arc::new(FakeStorageHost::new());
    host.fail_mkfs();
    let err = make(&host, StorageLevel::Shared, &spec(&[], 3), dir.path(), 1).unwrap_err();
    assert!(
        err.to_string().starts_with(
            "storage `shared`: `mkfs.ext4 /dev/mapper/isolab-exp7-pid42-c0-r1` failed"
        ),
        "{err}"
    );
    assert!(host.is_clean());
    assert!(!dir.path().join("exp7-pid42-c0-r1.storage").exists());
}

#[test]
fn a_mount_table_that_disagrees_fails_the_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let host = Arc::new(FakeStorageHost::new());
    let m = make(&host, StorageLevel::Tmpfs, &spec(&[], 2), dir.path(), 1).unwrap();
    // Something mounts over the working directory.
    host.add_mount("/dev/sdb1", &dir.path().join("exp7-pid42-c0-r1"), "xfs");
    let err = m.facts().unwrap_err().to_string();
    assert!(
        err.contains("the mount table shows xfs /dev/sdb1 at"),
        "{err}"
    );
    assert!(
        err.ends_with("not tmpfs isolab-storage: another program changed it"),
        "{err}"
    );
}

#[test]
fn gc_removes_the_storage_of_dead_runs_only() {
    let dir = tempfile::tempdir().unwrap();
    let host = Arc::new(FakeStorageHost::new());
    let dead = make(&host, StorageLevel::Shared, &spec(&[], 2), dir.path(), 1).unwrap();
    // A run of a live isolab (pid 43) and a mount of someone else.
    host.alive(43);
    let live_wd = dir.path().join("exp8-pid43-c0-r1");
    prepare(
        host.clone(),
        Request {
            level: StorageLevel::Image,
            spec: &spec(&[], 2),
            base: dir.path(),
            workdir: &live_wd,
            instances: 1,
        },
        None,
    )
    .map(std::mem::forget)
    .unwrap();
    host.add_mount("/dev/sdb1", Path::new("/srv"), "xfs");
    // The dead run's isolab was killed: its guard never ran.
    std::mem::forget(dead);
    let removed = gc(&*host);
    assert_eq!(removed.len(), 5, "{removed:?}");
    assert!(removed[0].starts_with("storage mount ") && removed[0].ends_with("exp7-pid42-c0-r1"));
    assert_eq!(removed[1], "device-mapper device isolab-exp7-pid42-c0-r1");
    assert!(
        removed[2].starts_with("loop device /dev/loop0 over "),
        "{removed:?}"
    );
    assert!(
        removed[3].starts_with("storage directory ")
            && removed[3].ends_with("exp7-pid42-c0-r1.storage"),
        "{removed:?}"
    );
    assert!(
        removed[4].starts_with("loop device /dev/loop1 over "),
        "{removed:?}"
    );
    let mounts: Vec<PathBuf> = host.mounts().into_iter().map(|m| m.mount_point).collect();
    assert_eq!(mounts, [live_wd, PathBuf::from("/srv")]);
    assert_eq!(host.loops().len(), 1);
    assert!(host.dm_names().is_empty());
}

/// Volumes of a fake engine: directories under a temporary directory.
struct FakeVolumes {
    root: PathBuf,
    calls: std::sync::Mutex<Vec<String>>,
}

impl Volumes for FakeVolumes {
    fn create_volume(&self, name: &str) -> Result<PathBuf, super::VolumeError> {
        self.calls.lock().unwrap().push(format!("create {name}"));
        let dir = self.root.join(name).join("_data");
        std::fs::create_dir_all(&dir).unwrap();
        Ok(dir)
    }

    fn remove_volume(&self, name: &str) -> Result<(), super::VolumeError> {
        self.calls.lock().unwrap().push(format!("remove {name}"));
        std::fs::remove_dir_all(self.root.join(name)).unwrap();
        Ok(())
    }
}

#[test]
fn a_volume_is_the_engines_directory_bound_at_the_working_directory_and_removed_after() {
    let dir = tempfile::tempdir().unwrap();
    let engine = tempfile::tempdir().unwrap();
    let host = Arc::new(FakeStorageHost::new());
    host.add_mount("/dev/vdb", engine.path(), "xfs");
    let volumes = FakeVolumes {
        root: engine.path().to_path_buf(),
        calls: Default::default(),
    };
    let workdir = dir.path().join("exp7-pid42-c0-r1");
    let spec = spec(&[], 2);
    let request = Request {
        level: StorageLevel::Volume,
        spec: &spec,
        base: dir.path(),
        workdir: &workdir,
        instances: 1,
    };
    let m = prepare(host.clone(), request, Some(&volumes)).unwrap();
    let facts = m.facts().unwrap();
    assert_eq!(
        facts.mounts,
        [MountFact {
            path: workdir.clone(),
            fstype: "xfs".into(),
            source: "/dev/vdb".into()
        }]
    );
    let data = engine.path().join("isolab-exp7-pid42-c0-r1/_data");
    assert_eq!(
        facts.devices,
        [format!(
            "named volume isolab-exp7-pid42-c0-r1 at {}",
            data.display()
        )]
    );
    drop(m);
    assert_eq!(
        *volumes.calls.lock().unwrap(),
        [
            "create isolab-exp7-pid42-c0-r1",
            "remove isolab-exp7-pid42-c0-r1"
        ]
    );
    let mounts: Vec<PathBuf> = host.mounts().into_iter().map(|m| m.mount_point).collect();
    assert_eq!(mounts, [engine.path()]);
    // Without an engine's volumes, the level is refused, never replaced.
    let err = prepare(host.clone(), request, None).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("storage `volume` is made by a platform's engine"),
        "{err}"
    );
}
