//! The busybox root: Debian's static busybox with its applets as symlinks, for tests and start-up
//! benchmarks (a few MB, built in well under a second).

use std::path::{Component, Path, PathBuf};

use crate::error::{ImageError, IoContext};
use crate::manifest::{Image, ImageKind, Manifest, Source};
use crate::skeleton::{self, Staging};
use crate::{dpkg, tree, BuildOptions, HostPaths};
use isolab_tools::{ToolCommand, ToolRunner};

/// The Debian package the busybox binary comes from.
pub const BUSYBOX_PACKAGE: &str = "busybox-static";

/// Where busybox lives inside the image; every applet symlink points here.
const BUSYBOX_IN_IMAGE: &str = "bin/busybox";

const PASSWD: &str =
    "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n";
const GROUP: &str = "root:x:0:\nnogroup:x:65534:\n";

/// Build a busybox root at `opts.dir` from the host's busybox (`host.busybox`), listing applets
/// with `busybox --list-full` through `tools`.
pub fn build_busybox_with(
    opts: &BuildOptions,
    host: &HostPaths,
    tools: &dyn ToolRunner,
) -> Result<Image, ImageError> {
    if !host.busybox.is_file() {
        return Err(ImageError::SourceMissing {
            path: host.busybox.clone(),
            package: BUSYBOX_PACKAGE.into(),
        });
    }
    let list = tools.run(
        &ToolCommand::new(host.busybox.to_string_lossy(), BUSYBOX_PACKAGE).arg("--list-full"),
    )?;
    let applets = applet_paths(&String::from_utf8_lossy(&list.stdout));

    let staging = Staging::new(&opts.dir, opts.force)?;
    let root = staging.path();
    skeleton::make_root_dirs(root)?;

    let bb = root.join(BUSYBOX_IN_IMAGE);
    std::fs::copy(&host.busybox, &bb).ctx("copy busybox into", &bb)?;
    skeleton::set_mode(&bb, 0o755)?;
    install_applets(root, &applets)?;

    skeleton::write_file(root, "etc/passwd", PASSWD, 0o644)?;
    skeleton::write_file(root, "etc/group", GROUP, 0o644)?;
    skeleton::write_identity(root)?;

    let mut manifest = Manifest::new(ImageKind::Busybox);
    let pkg = dpkg::installed_package(&host.dpkg_status, BUSYBOX_PACKAGE);
    manifest.sources.push(Source {
        name: BUSYBOX_PACKAGE.into(),
        version: pkg
            .as_ref()
            .map(|p| p.version.clone())
            .unwrap_or_else(|| "unknown (not in the host's dpkg status)".into()),
        architecture: pkg.and_then(|p| p.architecture),
        origin: Some(host.busybox.display().to_string()),
        sha256: Some(tree::sha256_file(&bb)?),
    });
    manifest.save(root)?;
    let dir = staging.commit()?;
    Ok(Image {
        dir,
        kind: ImageKind::Busybox,
        manifest,
    })
}

/// Applet paths from `busybox --list-full` ("bin/ash", "usr/sbin/chroot"): relative, without
/// `..`, busybox itself left out; anything else is ignored.
pub(crate) fn applet_paths(list: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = list
        .lines()
        .map(|l| PathBuf::from(l.trim().trim_start_matches('/')))
        .filter(|p| {
            !p.as_os_str().is_empty()
                && p.components().all(|c| matches!(c, Component::Normal(_)))
                && p.as_path() != Path::new(BUSYBOX_IN_IMAGE)
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// `busybox --install -s` semantics: a symlink to `/bin/busybox` at each applet path, parent
/// directories created, existing files left alone.
pub(crate) fn install_applets(root: &Path, applets: &[PathBuf]) -> Result<(), ImageError> {
    let target = Path::new("/").join(BUSYBOX_IN_IMAGE);
    for a in applets {
        let link = root.join(a);
        if let Some(parent) = link.parent() {
            std::fs::create_dir_all(parent).ctx("create directory", parent)?;
        }
        if std::fs::symlink_metadata(&link).is_ok() {
            continue;
        }
        std::os::unix::fs::symlink(&target, &link).ctx("create symlink", &link)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use isolab_tools::{ToolError, ToolOutput};
    use std::cell::RefCell;

    /// Answers `--list-full` with a fixed list and records the commands.
    struct FakeBusybox(RefCell<Vec<String>>);
    impl ToolRunner for FakeBusybox {
        fn run(&self, cmd: &ToolCommand) -> Result<ToolOutput, ToolError> {
            self.0.borrow_mut().push(cmd.display());
            Ok(ToolOutput {
                stdout:
                    b"bin/ash\nbin/sh\nbin/busybox\nusr/bin/[\nsbin/ifconfig\n../evil\n/bin/ls\n"
                        .to_vec(),
                stderr: Vec::new(),
            })
        }
    }

    #[test]
    fn applet_list_is_sanitised() {
        let a = applet_paths("bin/ash\n../x\nbin/busybox\n\n/usr/bin/awk\nbin/ash\n");
        assert_eq!(a, [PathBuf::from("bin/ash"), PathBuf::from("usr/bin/awk")]);
    }

    #[test]
    fn build_with_a_fake_busybox() {
        let d = tempfile::tempdir().unwrap();
        let fake_bin = d.path().join("busybox");
        std::fs::write(&fake_bin, "not really busybox").unwrap();
        let host = HostPaths {
            busybox: fake_bin.clone(),
            dpkg_status: d.path().join("status"),
            apt_dir: d.path().join("apt"),
        };
        std::fs::write(
            &host.dpkg_status,
            "Package: busybox-static\nStatus: install ok installed\nVersion: 1:9.9\n",
        )
        .unwrap();
        let runner = FakeBusybox(RefCell::new(Vec::new()));
        let dir = d.path().join("root");
        let img = build_busybox_with(
            &BuildOptions {
                dir: dir.clone(),
                force: false,
            },
            &host,
            &runner,
        )
        .unwrap();
        assert_eq!(
            runner.0.borrow().as_slice(),
            [format!("{} --list-full", fake_bin.display())]
        );
        assert_eq!(
            std::fs::read_link(dir.join("bin/sh")).unwrap(),
            Path::new("/bin/busybox")
        );
        assert_eq!(
            std::fs::read_link(dir.join("usr/bin/[")).unwrap(),
            Path::new("/bin/busybox")
        );
        assert!(dir.join("sbin/ifconfig").symlink_metadata().is_ok());
        assert!(!d.path().join("evil").exists());
        assert!(std::fs::symlink_metadata(dir.join("bin/busybox"))
            .unwrap()
            .is_file());
        let src = img.manifest.source(BUSYBOX_PACKAGE).unwrap();
        assert_eq!(src.version, "1:9.9");
        assert_eq!(
            src.sha256.as_deref(),
            Some(tree::sha256_file(&fake_bin).unwrap().as_str())
        );
        assert_eq!(Image::open(&dir).unwrap(), img);
        for m in ["proc", "sys", "dev", "run", "root", "tmp"] {
            assert!(dir.join(m).is_dir(), "{m}");
        }
        // Building again needs force.
        let again = build_busybox_with(
            &BuildOptions {
                dir: dir.clone(),
                force: false,
            },
            &host,
            &runner,
        );
        assert!(matches!(again, Err(ImageError::TargetExists { .. })));
        build_busybox_with(&BuildOptions { dir, force: true }, &host, &runner).unwrap();
    }

    #[test]
    fn missing_busybox_says_what_to_install() {
        let d = tempfile::tempdir().unwrap();
        let host = HostPaths {
            busybox: d.path().join("nope"),
            ..HostPaths::default()
        };
        let err = build_busybox_with(
            &BuildOptions {
                dir: d.path().join("r"),
                force: false,
            },
            &host,
            &FakeBusybox(RefCell::new(Vec::new())),
        )
        .unwrap_err();
        assert!(
            err.to_string().ends_with("apt-get install busybox-static"),
            "{err}"
        );
    }
}
