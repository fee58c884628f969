//! The bench roots: Debian bookworm built by mmdebstrap from Debian's packages, with the tools the
//! workloads run (sysbench, fio, stress-ng, iperf3), from the same mirror the host uses, so the
//! tool versions inside equal those on the host. `bench-docker` is the same root plus Debian's
//! `docker.io` (dockerd, containerd, runc), the guest image of the `vm+docker` platform.

use std::path::Path;

use crate::error::ImageError;
use crate::manifest::{Image, ImageKind, Manifest};
use crate::recipe::{
    BENCH_DOCKER_PACKAGES, BENCH_PACKAGES, BENCH_SUITE, DPKG_OPTS, MMDEBSTRAP_OPTS,
};
use crate::skeleton::{self, Staging};
use crate::{apt, apt_failure, dpkg, BuildOptions, HostPaths};
use isolab_tools::{ToolCommand, ToolError, ToolRunner};

/// The packages mmdebstrap installs for `kind` (a bench kind).
fn packages(kind: ImageKind) -> Vec<String> {
    let mut p = BENCH_PACKAGES.to_vec();
    if kind == ImageKind::BenchDocker {
        p.extend(BENCH_DOCKER_PACKAGES);
    }
    p.into_iter().map(str::to_owned).collect()
}

/// The hook that makes /usr/share/man/man1 (see [`mmdebstrap_command`]).
const MAN1_HOOK: &str = "--setup-hook=mkdir -p \"$1/usr/share/man/man1\"";

/// The mmdebstrap invocation that builds `packages` of `suite` into `target` from `mirrors`.
pub(crate) fn mmdebstrap_command(
    suite: &str,
    target: &Path,
    mirrors: &[String],
    packages: &[String],
) -> ToolCommand {
    let mut c = ToolCommand::new("mmdebstrap", "mmdebstrap");
    for o in &MMDEBSTRAP_OPTS[..3] {
        c = c.arg(o);
    }
    c = c
        .arg(format!("--include={}", packages.join(",")))
        .arg(MMDEBSTRAP_OPTS[3]);
    for o in DPKG_OPTS {
        c = c.arg(format!("--dpkgopt={o}"));
    }
    // The man pages are excluded, but OpenJDK's postinst links its man pages into
    // /usr/share/man/man1 with update-alternatives, which fails where that directory is
    // missing: it is made empty before anything is installed. Not part of a recipe's
    // hash: an image that installed without it is the same.
    c = c.arg(MAN1_HOOK).arg(suite).arg(target);
    for m in mirrors {
        c = c.arg(m);
    }
    c
}

/// Build the bench root at `opts.dir`: mirrors from `host.apt_dir`, mmdebstrap through `tools`,
/// package versions read from the new root's `var/lib/dpkg/status`.
pub fn build_bench_with(
    opts: &BuildOptions,
    host: &HostPaths,
    tools: &dyn ToolRunner,
) -> Result<Image, ImageError> {
    build_debian(ImageKind::Bench, opts, host, tools)
}

/// Build the bench root plus Docker ([`BENCH_DOCKER_PACKAGES`]) at `opts.dir`, as
/// [`build_bench_with`] does.
pub fn build_bench_docker_with(
    opts: &BuildOptions,
    host: &HostPaths,
    tools: &dyn ToolRunner,
) -> Result<Image, ImageError> {
    build_debian(ImageKind::BenchDocker, opts, host, tools)
}

fn build_debian(
    kind: ImageKind,
    opts: &BuildOptions,
    host: &HostPaths,
    tools: &dyn ToolRunner,
) -> Result<Image, ImageError> {
    let mirrors = apt::mirror_lines(&host.apt_dir, BENCH_SUITE)?;
    let staging = Staging::new(&opts.dir, opts.force)?;
    let manifest = install_root(
        kind,
        BENCH_SUITE,
        staging.path(),
        &mirrors,
        &packages(kind),
        host,
        tools,
    )?;
    manifest.save(staging.path())?;
    let dir = staging.commit()?;
    Ok(Image {
        dir,
        kind,
        manifest,
    })
}

/// Install `packages` of Debian `suite` from `mirrors` into the empty directory `root` with
/// mmdebstrap, make it a root the runtime accepts, and describe it: a manifest of `kind` (not
/// saved yet) with every installed package and its version (from the root's dpkg status), the
/// mmdebstrap version, and the packages whose versions differ from the host's. A package apt
/// cannot install fails with [`ImageError::UnknownPackages`] or
/// [`ImageError::UnmetDependencies`] naming it.
pub(crate) fn install_root(
    kind: ImageKind,
    suite: &str,
    root: &Path,
    mirrors: &[String],
    packages: &[String],
    host: &HostPaths,
    tools: &dyn ToolRunner,
) -> Result<Manifest, ImageError> {
    tools
        .run(&mmdebstrap_command(suite, root, mirrors, packages))
        .map_err(|e| match &e {
            ToolError::Failed { stderr, .. } => {
                apt_failure::explain(stderr, suite).unwrap_or(ImageError::Tool(e))
            }
            _ => ImageError::Tool(e),
        })?;

    skeleton::make_root_dirs(root)?;
    skeleton::write_identity(root)?;

    let mut manifest = Manifest::new(kind);
    manifest.suite = Some(suite.into());
    manifest.mirrors = mirrors.to_vec();
    manifest.tools = dpkg::installed_package(&host.dpkg_status, "mmdebstrap")
        .into_iter()
        .collect();
    manifest.sources = dpkg::installed_packages(&root.join("var/lib/dpkg/status"))?;
    if let Ok(on_host) = dpkg::installed_packages(&host.dpkg_status) {
        manifest.host_differences = dpkg::version_differences(&manifest.sources, &on_host);
    }
    Ok(manifest)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use isolab_tools::ToolOutput;
    use std::cell::RefCell;
    use std::path::PathBuf;

    /// Plays mmdebstrap: writes a tiny dpkg status into the target.
    pub(crate) struct FakeMmdebstrap(pub(crate) RefCell<Vec<ToolCommand>>);
    impl ToolRunner for FakeMmdebstrap {
        fn run(&self, cmd: &ToolCommand) -> Result<ToolOutput, ToolError> {
            self.0.borrow_mut().push(cmd.clone());
            let target = PathBuf::from(&cmd.args[cmd.args.len() - 4]);
            std::fs::create_dir_all(target.join("var/lib/dpkg")).unwrap();
            std::fs::create_dir_all(target.join("etc")).unwrap();
            std::fs::write(target.join("etc/hostname"), "buildhost\n").unwrap();
            std::fs::write(
                target.join("var/lib/dpkg/status"),
                "Package: sysbench\nStatus: install ok installed\nVersion: 1.0.20\n\nPackage: fio\nStatus: install ok installed\nVersion: 3.33\n",
            )
            .unwrap();
            Ok(ToolOutput::default())
        }
    }

    /// Host paths under `d` with a one-line apt sources file naming three mirror lines.
    pub(crate) fn fake_host(d: &std::path::Path) -> HostPaths {
        let apt = d.join("apt");
        std::fs::create_dir_all(&apt).unwrap();
        std::fs::write(
            apt.join("sources.list"),
            "deb http://m/debian bookworm main\ndeb http://m/debian bookworm-updates main\ndeb http://m/security bookworm-security main\n",
        )
        .unwrap();
        HostPaths {
            busybox: d.join("busybox"),
            dpkg_status: d.join("status"),
            apt_dir: apt,
        }
    }

    #[test]
    fn command_and_manifest() {
        let d = tempfile::tempdir().unwrap();
        let host = fake_host(d.path());
        std::fs::write(
            &host.dpkg_status,
            "Package: mmdebstrap\nStatus: install ok installed\nVersion: 1.3.5-7\n",
        )
        .unwrap();
        let runner = FakeMmdebstrap(RefCell::new(Vec::new()));
        let dir = d.path().join("bench");
        let img = build_bench_with(
            &BuildOptions {
                dir: dir.clone(),
                force: false,
            },
            &host,
            &runner,
        )
        .unwrap();
        let cmds = runner.0.borrow();
        let line = cmds[0].display();
        assert!(line.starts_with("mmdebstrap --variant=apt --format=directory --components=main --include=sysbench,fio,stress-ng,iperf3 "), "{line}");
        assert!(line.ends_with("'deb http://m/debian bookworm main' 'deb http://m/debian bookworm-updates main' 'deb http://m/security bookworm-security main'"), "{line}");
        let names: Vec<&str> = img
            .manifest
            .sources
            .iter()
            .map(|s| s.name.as_str())
            .collect();
        assert_eq!(names, ["fio", "sysbench"]);
        assert_eq!(img.manifest.tools[0].version, "1.3.5-7");
        assert_eq!(img.manifest.suite.as_deref(), Some("bookworm"));
        assert_eq!(img.manifest.mirrors.len(), 3);
        assert_eq!(
            std::fs::read_to_string(dir.join("etc/hostname")).unwrap(),
            "isolab\n"
        );
        assert!(dir.join("tmp").is_dir() && dir.join("proc").is_dir());
    }

    #[test]
    fn bench_docker_adds_docker_io_and_names_its_kind() {
        let d = tempfile::tempdir().unwrap();
        let host = fake_host(d.path());
        let runner = FakeMmdebstrap(RefCell::new(Vec::new()));
        let img = build_bench_docker_with(
            &BuildOptions {
                dir: d.path().join("bench-docker"),
                force: false,
            },
            &host,
            &runner,
        )
        .unwrap();
        let line = runner.0.borrow()[0].display();
        assert!(
            line.contains(" --include=sysbench,fio,stress-ng,iperf3,docker.io "),
            "{line}"
        );
        assert_eq!(img.kind, ImageKind::BenchDocker);
        let reopened = Image::open(&img.dir).unwrap();
        assert_eq!(reopened.manifest.kind, ImageKind::BenchDocker);
        let json = std::fs::read_to_string(img.dir.join(crate::MANIFEST_FILE)).unwrap();
        assert!(json.contains(r#""kind": "bench-docker""#), "{json}");
    }

    #[test]
    fn no_mirror_fails_before_creating_anything() {
        let d = tempfile::tempdir().unwrap();
        let host = HostPaths {
            apt_dir: d.path().join("empty-apt"),
            ..fake_host(d.path())
        };
        let runner = FakeMmdebstrap(RefCell::new(Vec::new()));
        let err = build_bench_with(
            &BuildOptions {
                dir: d.path().join("bench"),
                force: false,
            },
            &host,
            &runner,
        )
        .unwrap_err();
        assert!(matches!(err, ImageError::NoMirror { .. }), "{err}");
        assert!(runner.0.borrow().is_empty());
        assert!(!d.path().join("bench").exists());
    }
}
