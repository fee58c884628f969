//! Real builds and packs on this host, as root: a busybox root runs `sh` in a chroot, its ext4 image
//! lists `/bin` through debugfs, its tar is reproducible, its OCI bundle runs on runc and crun.
//! Tests that need root or a tool skip (`isolab_skip`) with the reason.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use isolab_image::*;
use isolab_tools::find_program;

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Skip (return) with the reason unless running as root with `tools` installed.
macro_rules! require {
    ($($tool:expr),*) => {
        if !is_root() {
            isolab_skip::skip("building and packing images needs root");
            return;
        }
        $(if find_program($tool).is_none() {
            isolab_skip::skip(format!("{} is not installed (scripts/setup.sh installs it)", $tool));
            return;
        })*
    };
}

fn busybox_image(parent: &Path) -> Image {
    let t = Instant::now();
    let img = build_busybox(&BuildOptions {
        dir: parent.join("busybox"),
        force: false,
    })
    .unwrap();
    eprintln!("build_busybox: {:?}", t.elapsed());
    img
}

fn run(cmd: &mut Command) -> (bool, String) {
    let out = cmd.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn busybox_root_runs_sh_in_a_chroot() {
    require!("chroot", "busybox");
    let d = tempfile::tempdir().unwrap();
    let img = busybox_image(d.path());
    let (ok, out) = run(Command::new(find_program("chroot").unwrap()).args([
        img.dir.as_os_str(),
        "/bin/sh".as_ref(),
        "-c".as_ref(),
        "echo ok; id -u; cat /etc/hostname; ls /bin | wc -l".as_ref(),
    ]));
    assert!(ok, "{out}");
    let lines: Vec<&str> = out.lines().map(str::trim).collect();
    assert_eq!(&lines[..3], ["ok", "0", "isolab"], "{out}");
    let applets: usize = lines[3].parse().unwrap();
    assert!(applets > 50, "{applets} entries in /bin");

    let m = std::fs::metadata(img.dir.join("tmp")).unwrap();
    assert_eq!(m.mode() & 0o7777, 0o1777);
    let bb = img.manifest.source(BUSYBOX_PACKAGE).unwrap();
    assert_eq!(
        bb.sha256.as_deref(),
        Some(sha256_file(Path::new("/bin/busybox")).unwrap().as_str())
    );
    assert_eq!(
        bb.version,
        installed_package(Path::new("/var/lib/dpkg/status"), BUSYBOX_PACKAGE)
            .unwrap()
            .version
    );

    // Same inputs, same tree: the digest leaves the manifest's build time out.
    let again = build_busybox(&BuildOptions {
        dir: d.path().join("again"),
        force: false,
    })
    .unwrap();
    assert_eq!(
        tree_digest(&img.dir).unwrap(),
        tree_digest(&again.dir).unwrap()
    );
}

#[test]
fn ext4_image_holds_the_tree() {
    require!("busybox", "mkfs.ext4", "debugfs", "e2fsck");
    let d = tempfile::tempdir().unwrap();
    let img = busybox_image(d.path());
    let file = d.path().join("root.ext4");
    let t = Instant::now();
    let p = pack(
        &img.dir,
        &PackTarget::Ext4 {
            file: file.clone(),
            size: None,
        },
    )
    .unwrap();
    eprintln!("pack ext4: {:?}, {} bytes", t.elapsed(), p.bytes);
    let meta = std::fs::metadata(&file).unwrap();
    assert_eq!(meta.len(), p.bytes);
    assert_eq!(p.bytes % (1 << 20), 0);
    assert!(
        meta.blocks() * 512 < meta.len() / 2,
        "sparse: {} allocated",
        meta.blocks() * 512
    );

    let debugfs = find_program("debugfs").unwrap();
    let (ok, out) = run(Command::new(&debugfs)
        .arg("-R")
        .arg("ls -l /bin")
        .arg(&file));
    assert!(ok, "{out}");
    assert!(out.contains(" busybox") && out.contains(" sh"), "{out}");
    let (_, out) = run(Command::new(&debugfs)
        .arg("-R")
        .arg("stat /bin/sh")
        .arg(&file));
    assert!(out.contains("Fast link dest: \"/bin/busybox\""), "{out}");
    let (_, out) = run(Command::new(&debugfs).arg("-R").arg("stat /tmp").arg(&file));
    assert!(out.contains("Mode:  01777"), "{out}");
    let (ok, out) = run(Command::new(find_program("e2fsck").unwrap())
        .arg("-fn")
        .arg(&file));
    assert!(ok, "e2fsck: {out}");
    let (_, out) = run(Command::new(
        find_program("dumpe2fs").unwrap_or_else(|| PathBuf::from("dumpe2fs")),
    )
    .arg("-h")
    .arg(&file));
    assert!(out.contains("Filesystem volume name:   isolab"), "{out}");
}

#[test]
fn tar_is_reproducible_sorted_and_owned_by_root() {
    require!("busybox");
    let d = tempfile::tempdir().unwrap();
    let img = busybox_image(d.path());
    let file = d.path().join("root.tar");
    let t = Instant::now();
    let a = pack(&img.dir, &PackTarget::Tar { file: file.clone() }).unwrap();
    eprintln!("pack tar: {:?}, {} bytes", t.elapsed(), a.bytes);
    let b = pack(&img.dir, &PackTarget::Tar { file: file.clone() }).unwrap();
    assert_eq!(a.sha256, b.sha256, "a second pack gives the same bytes");

    let mut ar = tar::Archive::new(std::fs::File::open(&file).unwrap());
    let mut paths: Vec<PathBuf> = Vec::new();
    let mut sh_target = None;
    for e in ar.entries().unwrap() {
        let e = e.unwrap();
        let h = e.header();
        let path = e.path().unwrap().into_owned();
        assert_eq!(
            (h.uid().unwrap(), h.gid().unwrap()),
            (0, 0),
            "{}",
            path.display()
        );
        assert_eq!(h.mtime().unwrap(), TAR_MTIME);
        assert!(
            !matches!(h.entry_type(), tar::EntryType::Char | tar::EntryType::Block),
            "device-free"
        );
        if path == Path::new("bin/sh") {
            assert_eq!(h.entry_type(), tar::EntryType::Symlink);
            sh_target = e.link_name().unwrap().map(|l| l.into_owned());
        }
        paths.push(path);
    }
    assert_eq!(sh_target.as_deref(), Some(Path::new("/bin/busybox")));
    // Depth-first, siblings sorted: equal to a sort where '/' ranks below every other byte.
    let mut sorted = paths.clone();
    sorted.sort_by(|x, y| x.components().cmp(y.components()));
    assert_eq!(paths, sorted);
    assert!(paths.iter().any(|p| p == Path::new(MANIFEST_FILE)));

    // What `docker import` does, done by GNU tar: the extracted tree equals the image.
    if let Some(gnu_tar) = find_program("tar") {
        let x = d.path().join("extracted");
        std::fs::create_dir(&x).unwrap();
        let (ok, out) = run(Command::new(gnu_tar)
            .args(["--numeric-owner", "-xpf"])
            .arg(&file)
            .arg("-C")
            .arg(&x));
        assert!(ok, "{out}");
        assert_eq!(tree_digest(&x).unwrap(), tree_digest(&img.dir).unwrap());
    }
}

/// Deletes the container from the runtime's private state directory even when the test fails.
struct Container<'a> {
    runtime: &'a Path,
    root: &'a Path,
    id: &'a str,
}

impl Drop for Container<'_> {
    fn drop(&mut self) {
        let _ = Command::new(self.runtime)
            .arg("--root")
            .arg(self.root)
            .args(["delete", "-f", self.id])
            .output();
    }
}

/// Run `/bin/true` in the bundle with `runtime`; `Err(reason)` when the host refuses for an
/// environmental reason (printed by the caller as a skip).
fn run_bundle(runtime: &str, bundle: &Path) -> Result<(), String> {
    let path = find_program(runtime).unwrap();
    let state = tempfile::tempdir().unwrap();
    let id = format!("isolab-image-test-{runtime}-{}", std::process::id());
    let _guard = Container {
        runtime: &path,
        root: state.path(),
        id: &id,
    };
    let t = Instant::now();
    let (ok, out) = run(Command::new(&path)
        .arg("--root")
        .arg(state.path())
        .args(["run", "--bundle"])
        .arg(bundle)
        .arg(&id));
    eprintln!("{runtime} run /bin/true: {:?} ok={ok}", t.elapsed());
    if ok {
        return Ok(());
    }
    let environmental = ["hybrid", "cgroup", "mount", "permission denied"];
    let lower = out.to_lowercase();
    if environmental.iter().any(|w| lower.contains(w)) {
        return Err(out);
    }
    panic!("{runtime} failed on the bundle: {out}");
}

/// The hybrid host's cgroup2 mount, whose listed controllers crun refuses.
const UNIFIED: &str = "/sys/fs/cgroup/unified";

#[test]
fn oci_bundle_runs_on_runc_and_crun() {
    require!("busybox");
    let d = tempfile::tempdir().unwrap();
    let img = busybox_image(d.path());
    let bundle = d.path().join("bundle");
    let t = Instant::now();
    let p = pack(
        &img.dir,
        &PackTarget::Oci {
            bundle: bundle.clone(),
        },
    )
    .unwrap();
    eprintln!("pack oci: {:?}, {} bytes", t.elapsed(), p.bytes);
    assert_eq!(p.sha256, tree_digest(&img.dir).unwrap(), "faithful copy");

    let config = bundle.join(OCI_CONFIG);
    let mut spec = oci_spec::runtime::Spec::load(&config).unwrap();
    let mut process = spec.process().clone().unwrap();
    process.set_args(Some(vec!["/bin/true".into()]));
    spec.set_process(Some(process));
    spec.save(&config).unwrap();

    let mut ran = 0;
    for runtime in ["runc", "crun"] {
        if find_program(runtime).is_none() {
            isolab_skip::skip(format!(
                "{runtime} is not installed (apt-get install {runtime})"
            ));
            continue;
        }
        match run_bundle(runtime, &bundle) {
            Ok(()) => ran += 1,
            Err(reason) if runtime == "crun" && reason.contains("hybrid mode") => {
                eprintln!(
                    "crun refused hybrid cgroups ({}); retrying with cgroup2's controllers in v1 hierarchies for the run",
                    reason.trim()
                );
                let unified = Path::new(UNIFIED);
                let listed = isolab_cgroups::cgroup2_listed(unified);
                match isolab_cgroups::borrow_listed(Path::new("/sys/fs/cgroup"), unified) {
                    Ok(borrowed) => {
                        let second = run_bundle(runtime, &bundle);
                        drop(borrowed);
                        assert_eq!(
                            isolab_cgroups::cgroup2_listed(unified),
                            listed,
                            "the controllers are back in cgroup2 after their v1 hierarchies"
                        );
                        match second {
                            Ok(()) => ran += 1,
                            Err(r) => isolab_skip::skip(format!(
                                "crun failed for an environmental reason even with v1 hierarchies: {r}"
                            )),
                        }
                    }
                    Err(e) => isolab_skip::skip(format!(
                        "crun: cannot mount a v1 hierarchy for cgroup2's controllers: {e}"
                    )),
                }
            }
            Err(reason) => isolab_skip::skip(format!(
                "{runtime} failed for an environmental reason on this host: {reason}"
            )),
        }
    }
    eprintln!("bundle ran on {ran} runtime(s)");
}

/// Slow (2–5 minutes, downloads about 100 MB from the Debian mirror): run by hand with
/// `cargo test -p isolab-image --test image -- --ignored bench --nocapture`.
#[test]
#[ignore = "slow: mmdebstrap downloads ~100 MB; run with --ignored"]
fn bench_root_has_the_tools() {
    require!("mmdebstrap", "chroot", "mkfs.ext4");
    let parent = std::env::var_os("ISOLAB_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let d = tempfile::tempdir_in(parent).unwrap();
    let dir = d.path().join("bench");
    let t = Instant::now();
    let img = build_bench(&BuildOptions {
        dir: dir.clone(),
        force: false,
    })
    .unwrap();
    let took = t.elapsed();
    let host = Path::new("/var/lib/dpkg/status");
    for tool in BENCH_PACKAGES {
        let v = img
            .manifest
            .source(tool)
            .unwrap_or_else(|| panic!("{tool} not in the manifest"));
        if let Some(h) = installed_package(host, tool) {
            eprintln!("{tool}: image {} host {}", v.version, h.version);
        }
    }
    let (ok, out) = run(Command::new(find_program("chroot").unwrap()).args([
        dir.as_os_str(),
        "/bin/sh".as_ref(),
        "-c".as_ref(),
        "sysbench --version && fio --version && stress-ng --version && iperf3 --version | head -1"
            .as_ref(),
    ]));
    assert!(ok, "{out}");
    let (_, du) = run(Command::new("du").args(["-sb"]).arg(&dir));
    eprintln!(
        "build_bench: {took:?}, {} packages, {du}tools:\n{out}",
        img.manifest.sources.len()
    );

    let t = Instant::now();
    let p = pack(
        &dir,
        &PackTarget::Ext4 {
            file: d.path().join("bench.ext4"),
            size: None,
        },
    )
    .unwrap();
    eprintln!("pack ext4: {:?}, {} bytes", t.elapsed(), p.bytes);
    let t = Instant::now();
    let p = pack(
        &dir,
        &PackTarget::Tar {
            file: d.path().join("bench.tar"),
        },
    )
    .unwrap();
    eprintln!("pack tar: {:?}, {} bytes", t.elapsed(), p.bytes);
    let t = Instant::now();
    let p = pack(
        &dir,
        &PackTarget::Oci {
            bundle: d.path().join("bundle"),
        },
    )
    .unwrap();
    eprintln!("pack oci: {:?}, {} bytes", t.elapsed(), p.bytes);
    assert_eq!(
        p.sha256,
        tree_digest(&dir).unwrap(),
        "faithful copy of a Debian root"
    );
}

/// Slow (minutes, downloads about 150 MB): the `bench-docker` recipe installs a working `dockerd`.
/// Run by hand with `cargo test -p isolab-image --test image -- --ignored bench_docker --nocapture`;
/// with `ISOLAB_BENCH_DOCKER_DIR=DIR` (absent or empty) the image is built there and kept, e.g.
/// `/var/lib/isolab/images/bench-docker` for the `vm+docker` tests.
#[test]
#[ignore = "slow: mmdebstrap downloads ~150 MB; run with --ignored"]
fn bench_docker_root_has_dockerd() {
    require!("mmdebstrap", "chroot");
    let temp = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let dir = std::env::var_os("ISOLAB_BENCH_DOCKER_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| temp.path().join("bench-docker"));
    let t = Instant::now();
    let img = build_bench_docker(&BuildOptions {
        dir: dir.clone(),
        force: false,
    })
    .unwrap();
    let took = t.elapsed();
    assert_eq!(img.kind, ImageKind::BenchDocker);
    for p in BENCH_PACKAGES.iter().chain(BENCH_DOCKER_PACKAGES) {
        assert!(img.manifest.source(p).is_some(), "{p} not in the manifest");
    }
    let (ok, out) = run(Command::new(find_program("chroot").unwrap()).args([
        dir.as_os_str(),
        "/bin/sh".as_ref(),
        "-c".as_ref(),
        "sysbench --version && dockerd --version && docker --version && runc --version | head -1"
            .as_ref(),
    ]));
    assert!(ok, "{out}");
    let (_, du) = run(Command::new("du").args(["-sb"]).arg(&dir));
    eprintln!(
        "build_bench_docker: {took:?}, {} packages, {du}tools:\n{out}",
        img.manifest.sources.len()
    );
}

/// A recipe image (bench + `jq`) is built once into the real cache,
/// `/var/lib/isolab/images/recipe-<hash>`, and returned from it afterwards: the first run on a
/// machine builds it (about 1.5–2 minutes with mmdebstrap), every later run (the cache key is
/// the recipe's hash) finds it at once.
#[test]
fn recipe_is_built_once_then_cached() {
    require!("mmdebstrap", "chroot");
    let cache = Path::new(DEFAULT_CACHE_ROOT);
    let recipe = Recipe::bench().with(["jq"]).unwrap();
    let t = Instant::now();
    let first = ensure(&recipe, cache).unwrap();
    eprintln!(
        "ensure {} (first call on this machine builds): {:?}",
        recipe.dir_name(),
        t.elapsed()
    );
    assert_eq!(first.dir, cache.join(recipe.dir_name()));
    assert_eq!(first.kind, ImageKind::Recipe);
    let t = Instant::now();
    let second = ensure(&recipe, cache).unwrap();
    let took = t.elapsed();
    assert!(took.as_secs() < 2, "the cached image took {took:?}");
    assert_eq!(second.manifest, first.manifest);
    let rec = second.manifest.recipe.as_ref().unwrap();
    assert_eq!(rec.hash, recipe.hash());
    assert!(second.manifest.source("jq").is_some());
    assert!(second.manifest.source("sysbench").is_some());
    let (ok, out) = run(Command::new(find_program("chroot").unwrap()).args([
        first.dir.as_os_str(),
        "/usr/bin/jq".as_ref(),
        "--version".as_ref(),
    ]));
    assert!(ok && out.starts_with("jq-"), "{out}");
    for d in &second.manifest.host_differences {
        eprintln!("warning: {d}");
    }
    assert!(cached_recipes(cache)
        .unwrap()
        .iter()
        .any(|i| i.dir == first.dir));
}

/// A package Debian does not have fails the build with an error naming it, and leaves no
/// directory in the cache. Slow on every run (about 1.5 minutes: mmdebstrap installs the
/// essential packages before apt finds out; failures are not cached), so run by hand with
/// `cargo test -p isolab-image --test image -- --ignored unknown_package --nocapture`.
#[test]
#[ignore = "slow: 1.5 minutes of mmdebstrap on every run; run with --ignored"]
fn unknown_package_fails_and_leaves_nothing() {
    require!("mmdebstrap");
    let cache = tempfile::tempdir().unwrap();
    let recipe = Recipe::bench().with(["isolab-no-such-package"]).unwrap();
    let t = Instant::now();
    let err = ensure(&recipe, cache.path()).unwrap_err();
    eprintln!("failed after {:?}: {err}", t.elapsed());
    assert!(
        matches!(&err, ImageError::UnknownPackages { packages, .. } if packages == &["isolab-no-such-package"]),
        "{err}"
    );
    assert!(
        err.to_string().contains("`isolab-no-such-package`"),
        "{err}"
    );
    let dirs: Vec<PathBuf> = std::fs::read_dir(cache.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    assert!(dirs.is_empty(), "left behind: {dirs:?}");
}
