//! Docker inside the guest (`vm+docker`): the guest image's own `dockerd` runs the command in a
//! container whose root is the guest's root, with the shape as `docker run` flags, and the
//! container's limits and counters are read back from its cgroup.
//!
//! Before the measured time (a `setup.sh` the agent runs before it writes `ready`):
//! - `dockerd` starts with its data and exec roots on the guest's `/run` tmpfs, no bridge, no
//!   iptables, the `overlay2` storage driver when the kernel has overlayfs (the initramfs loads
//!   it) and `vfs` otherwise;
//! - the experiment's image is made a Docker image without copying it. With `overlay2`, an empty
//!   tar is imported as [`DOCKER_IMAGE`] and the read-only bind of the guest's root
//!   ([`GUEST_IMAGE`](crate::guest::GUEST_IMAGE)) is mounted on that image's layer directory:
//!   the container's root is then an overlay whose lower layer is the guest's root, exactly as in
//!   `vm+isolab`, at no cost. With `vfs` (no overlayfs), the guest's root is imported as a tar
//!   (slow: a full copy).
//!
//! The command is `docker run --rm --network none --log-driver none -v W:W -w CWD -e K=V… FLAGS…
//! --entrypoint /bin/sh isolab/guest -c WRAPPER …`: a `/bin/sh` of the image copies the
//! container's limit files (`cpu.max`, `cpuset.cpus`, `memory.max`, `pids.max`, …) from its own
//! cgroup (`/sys/fs/cgroup` in its cgroup namespace) into the report directory in the shared
//! workdir, runs the command as its child, copies the counters (`cpu.stat`, `memory.peak`, …)
//! after it, and exits with its status. The host reads that directory with
//! [`DockerReport::read`], through `isolab-cgroups`, as it would read a cgroup.

use std::path::{Path, PathBuf};

use isolab_cgroups::{Cgroup, Hierarchy, Limits, Stats};

use crate::error::VmError;
use crate::guest::{env_path, has_flag, shell_quote, GUEST_DIR, GUEST_IMAGE};

/// Where Debian's `docker.io` installs the daemon, relative to the image's root.
pub const DOCKERD: &str = "usr/sbin/dockerd";
/// The Docker image the guest's root becomes.
pub const DOCKER_IMAGE: &str = "isolab/guest";
/// dockerd's API socket in the guest.
pub const DOCKER_SOCKET: &str = "/run/isolab-vm/docker.sock";
/// dockerd's data and exec roots, its pid file and log, in the guest (on the `/run` tmpfs).
const DOCKER_DIR: &str = "/run/isolab-vm/docker";
/// Cgroup files copied into the report before the command: the limits.
const LIMIT_FILES: &[&str] = &[
    "cpu.max",
    "cpuset.cpus",
    "cpuset.mems",
    "memory.max",
    "memory.swap.max",
    "pids.max",
];
/// Cgroup files copied into the report after the command: the counters.
const STAT_FILES: &[&str] = &["cpu.stat", "memory.current", "memory.peak", "pids.current"];

/// Docker around the guest command (`vm+docker`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InnerDocker {
    /// Extra `docker run` flags, e.g. `--cpu-period 100000 --cpu-quota 50000 --memory 268435456`.
    /// A `--network` given here replaces the default `none`.
    pub flags: Vec<String>,
    /// A directory inside the workdir (the same path in the guest) for the container's cgroup
    /// files; it is emptied before the command. Read it with [`DockerReport::read`].
    pub report: PathBuf,
}

/// Fails with [`VmError::NoDockerd`] unless the image directory `image` has `dockerd`.
pub fn check_image(image: &Path) -> Result<(), VmError> {
    if image.join(DOCKERD).is_file() {
        Ok(())
    } else {
        Err(VmError::NoDockerd {
            image: image.to_path_buf(),
        })
    }
}

/// The `setup.sh` the agent sources before the command: starts dockerd, waits for it (up to
/// 120 s, TCG is slow) and makes [`DOCKER_IMAGE`] of the guest's root.
pub(crate) fn setup_script() -> String {
    format!(
        r#"# isolab-vm: Docker in the guest
B={GUEST_DIR}/busybox
D={DOCKER_DIR}
export DOCKER_HOST=unix://{DOCKER_SOCKET}
$B mkdir -p $D/data $D/exec $D/empty
if $B grep -qw overlay /proc/filesystems; then DRIVER=overlay2; else DRIVER=vfs; fi
dockerd --data-root $D/data --exec-root $D/exec --pidfile $D/dockerd.pid -H "$DOCKER_HOST" \
  --storage-driver $DRIVER --bridge=none --iptables=false --ip6tables=false --ip-masq=false \
  --log-level warn > $D/dockerd.log 2>&1 < /dev/null &
PID=$!
i=0
until docker version > /dev/null 2>&1; do
  i=$((i + 1))
  if ! $B kill -0 $PID 2> /dev/null; then
    $B tail -n 20 $D/dockerd.log; echo "dockerd exited"; exit 1
  fi
  if [ $i -ge 600 ]; then
    $B tail -n 20 $D/dockerd.log; echo "dockerd did not answer on $DOCKER_HOST within 120 s"; exit 1
  fi
  $B usleep 200000
done
echo "dockerd is up, storage driver $DRIVER"
if [ $DRIVER = overlay2 ]; then
  $B tar -C $D/empty -cf - . | docker import - {DOCKER_IMAGE} || exit 1
  L=$(docker image inspect -f '{{{{.GraphDriver.Data.UpperDir}}}}' {DOCKER_IMAGE}) || exit 1
  [ -d "$L" ] || {{ echo "{DOCKER_IMAGE} has no layer directory ($L)"; exit 1; }}
  $B mount --bind {GUEST_IMAGE} "$L" || {{ echo "cannot bind the guest's root on $L"; exit 1; }}
  $B mount -o remount,bind,ro "$L" || {{ echo "cannot make $L read-only"; exit 1; }}
else
  $B tar -C {GUEST_IMAGE} -cf - . | docker import - {DOCKER_IMAGE} || exit 1
fi
"#
    )
}

/// The shell the container runs (`/bin/sh -c WRAPPER isolab-docker REPORT PROGRAM ARGS…`), with
/// the shell's built-ins only, so that it needs nothing of the image but `/bin/sh`.
fn wrapper() -> String {
    let copy = |files: &[&str]| {
        format!(
            "for f in {}; do [ -r \"$G/$f\" ] && c \"$f\"; done",
            files.join(" ")
        )
    };
    format!(
        "R=$1; shift; G=/sys/fs/cgroup; \
         c() {{ while IFS= read -r l || [ -n \"$l\" ]; do printf '%s\\n' \"$l\"; done < \"$G/$1\" > \"$R/$1\"; }}; \
         {}; \"$@\"; s=$?; {}; exit $s",
        copy(LIMIT_FILES),
        copy(STAT_FILES)
    )
}

/// What `command.sh` runs after `cd`: a line emptying the report directory, and the words
/// after `env -i`: `docker run` with the environment `env` given to the container (the
/// client itself gets `PATH` and `DOCKER_HOST` only).
pub(crate) fn command_words(
    argv: &[String],
    env: &[(String, String)],
    cwd: &Path,
    workdir: &Path,
    docker: &InnerDocker,
) -> (String, Vec<String>) {
    let report = docker.report.to_string_lossy();
    let prelude = format!(
        "{GUEST_DIR}/busybox rm -rf {r} && {GUEST_DIR}/busybox mkdir -p {r} || exit 125\n",
        r = shell_quote(&report)
    );
    let w = workdir.to_string_lossy();
    let mut words: Vec<String> = vec![
        format!("PATH={}", env_path(env)),
        format!("DOCKER_HOST=unix://{DOCKER_SOCKET}"),
        "docker".into(),
        "run".into(),
        "--rm".into(),
        "--log-driver".into(),
        "none".into(),
    ];
    if !has_flag(&docker.flags, "--network") {
        words.extend(["--network".into(), "none".into()]);
    }
    words.extend([
        "-v".into(),
        format!("{w}:{w}"),
        "-w".into(),
        cwd.to_string_lossy().into_owned(),
    ]);
    for (k, v) in env {
        words.push("-e".into());
        words.push(format!("{k}={v}"));
    }
    words.extend(docker.flags.iter().cloned());
    words.extend([
        "--entrypoint".into(),
        "/bin/sh".into(),
        DOCKER_IMAGE.into(),
        "-c".into(),
        wrapper(),
        "isolab-docker".into(),
        report.into_owned(),
    ]);
    words.extend(argv.iter().cloned());
    (prelude, words)
}

/// What the container's cgroup said, as the guest copied it into the report directory.
#[derive(Debug, Clone, PartialEq)]
pub struct DockerReport {
    /// The limits read back (`cpu.max`, `cpuset.cpus`, `memory.max`, `pids.max`, …).
    pub limits: Limits,
    /// The counters after the command (`cpu.stat`, `memory.peak`, …); `None` when the container
    /// did not get that far (the command was killed with its container).
    pub stats: Option<Stats>,
}

impl DockerReport {
    /// Reads the report directory `dir` ([`InnerDocker::report`]) as a cgroup v2 directory.
    pub fn read(dir: &Path) -> Result<DockerReport, VmError> {
        let err = |source| VmError::DockerReport {
            dir: dir.to_path_buf(),
            source,
        };
        let first = dir.join(LIMIT_FILES[0]);
        if !first.is_file() {
            return Err(err(isolab_cgroups::Error::Read {
                path: first,
                source: std::io::Error::from(std::io::ErrorKind::NotFound),
            }));
        }
        let (root, name) = match (dir.parent(), dir.file_name()) {
            (Some(root), Some(name)) => (root, Path::new(name)),
            _ => (Path::new("/"), Path::new(".")),
        };
        let cgroup = Cgroup::open(&Hierarchy::v2(root), name).map_err(err)?;
        let limits = cgroup.read_limits().map_err(err)?;
        let stats = if dir.join("cpu.stat").is_file() {
            Some(cgroup.stats().map_err(err)?)
        } else {
            None
        };
        Ok(DockerReport { limits, stats })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use isolab_cgroups::{Bytes, CpuQuota};
    use std::time::Duration;

    #[test]
    fn the_image_must_have_dockerd() {
        let d = tempfile::tempdir().unwrap();
        let e = check_image(d.path()).unwrap_err().to_string();
        assert!(e.contains("isolab image build bench-docker"), "{e}");
        std::fs::create_dir_all(d.path().join("usr/sbin")).unwrap();
        std::fs::write(d.path().join(DOCKERD), "").unwrap();
        check_image(d.path()).unwrap();
    }

    #[test]
    fn docker_run_words() {
        let docker = InnerDocker {
            flags: vec!["--cpu-quota".into(), "50000".into()],
            report: "/w/.isolab-docker".into(),
        };
        let env = vec![("PATH".to_string(), "/usr/bin:/bin".to_string())];
        let argv = vec!["sysbench".to_string(), "cpu".to_string()];
        let (prelude, words) =
            command_words(&argv, &env, Path::new("/w/c"), Path::new("/w"), &docker);
        assert!(prelude.contains("rm -rf '/w/.isolab-docker'"), "{prelude}");
        let line = words.join(" ");
        assert!(
            line.starts_with(
                "PATH=/usr/bin:/bin DOCKER_HOST=unix:///run/isolab-vm/docker.sock docker run --rm --log-driver none \
                 --network none -v /w:/w -w /w/c -e PATH=/usr/bin:/bin --cpu-quota 50000 \
                 --entrypoint /bin/sh isolab/guest -c "
            ),
            "{line}"
        );
        assert!(
            line.ends_with(" isolab-docker /w/.isolab-docker sysbench cpu"),
            "{line}"
        );
        let host = InnerDocker {
            flags: vec!["--network=host".into()],
            ..docker
        };
        let (_, words) = command_words(&argv, &env, Path::new("/w"), Path::new("/w"), &host);
        assert!(!words.join(" ").contains("--network none"));
    }

    /// The wrapper, run by this host's `sh` on a fake cgroup directory, copies the limits before
    /// the command, the counters after it, and keeps the command's status.
    #[test]
    fn wrapper_copies_the_cgroup_files_and_keeps_the_status() {
        let d = tempfile::tempdir().unwrap();
        let report = d.path().join("report");
        std::fs::create_dir(&report).unwrap();
        let script = wrapper().replace("G=/sys/fs/cgroup", &format!("G={}", d.path().display()));
        std::fs::write(d.path().join("cpu.max"), "50000 100000\n").unwrap();
        std::fs::write(d.path().join("pids.max"), "64").unwrap();
        std::fs::write(d.path().join("memory.max"), "268435456\n").unwrap();
        let cpu_stat = d.path().join("cpu.stat");
        let status = std::process::Command::new("sh")
            .arg("-c")
            .arg(&script)
            .arg("isolab-docker")
            .arg(&report)
            .args(["sh", "-c"])
            .arg(format!(
                "printf 'usage_usec 2000000\\nnr_throttled 3\\nthrottled_usec 500\\n' > {}; exit 7",
                cpu_stat.display()
            ))
            .status()
            .unwrap();
        assert_eq!(status.code(), Some(7));
        let r = DockerReport::read(&report).unwrap();
        assert_eq!(
            r.limits.cpu,
            Some(CpuQuota {
                quota: Duration::from_micros(50000),
                period: Duration::from_micros(100000)
            })
        );
        assert_eq!(r.limits.memory_max, Some(Bytes::mib(256)));
        assert_eq!(r.limits.pids_max, Some(64));
        let stats = r.stats.unwrap();
        assert_eq!(stats.cpu_usage, Some(Duration::from_secs(2)));
        assert_eq!(stats.nr_throttled, Some(3));
    }

    #[test]
    fn a_missing_report_says_so() {
        let d = tempfile::tempdir().unwrap();
        let e = DockerReport::read(&d.path().join("none")).unwrap_err();
        assert!(e.to_string().contains("none"), "{e}");
    }

    #[test]
    fn the_setup_script_resolves_its_format_escapes() {
        let s = setup_script();
        assert!(s.contains("'{{.GraphDriver.Data.UpperDir}}'"), "{s}");
        assert!(s.contains("--storage-driver $DRIVER --bridge=none --iptables=false"));
        assert!(s.contains("mount --bind /run/isolab-vm/image \"$L\""));
    }
}
