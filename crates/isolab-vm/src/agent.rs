//! The guest side: the initramfs `/init`, the agent that runs as PID 1 in the bench image after
//! `switch_root`, the per-run files the host writes for it (`config`, `command.sh`) and the
//! parser of what it writes back (`result`).
//!
//! The channel is a 9p share of the run's control directory (`isolabctl`, mounted at
//! [`GUEST_DIR`]`/ctl`): the host writes `config`, `command.sh` and, when the command needs
//! something started first (dockerd for `vm+docker`), `setup.sh` before boot; the agent runs
//! `setup.sh` (timed, outside the command's time), writes `ready` when it is about to start the
//! command, then `stdout`, `stderr` and `result` (or `error` when it cannot run the command),
//! syncs and powers the guest off. The command's output goes to a tmpfs first, so writing it
//! does not perturb the measurement. With a network, the agent gives `eth0` (the virtio-net
//! device) the address and default route of `config` before anything else. A service
//! (`ISOLAB_SERVICE=1`) runs in the background until the host writes `stop` into the share
//! (polled every 0.2 s) or it exits; the agent then sends it SIGTERM, waits, and reports as
//! for a command.
//!
//! The wall time is measured in the guest on `CLOCK_MONOTONIC`, read from the `now at … nsecs`
//! line of `/proc/timer_list` with shell built-ins only (no process is started to read the
//! clock); when that file is missing, `/proc/uptime` (10 ms steps) is used and the result says so.

use std::path::Path;
use std::time::Duration;

use crate::guest::{env_path, has_flag, GuestNetwork};
pub use crate::guest::{shell_quote, DEFAULT_PATH, GUEST_DIR, GUEST_IMAGE};

/// The 9p mount tag of the control directory.
pub const CTL_TAG: &str = "isolabctl";
/// The 9p mount tag of the run's working directory.
pub const WORK_TAG: &str = "isolabwork";

/// The 9p mount tag of the `i`-th read-only share ([`crate::VmConfig::shares`]).
pub fn share_tag(i: usize) -> String {
    format!("isolabshare{i}")
}

/// The `shares` file the agent reads: one `TAG PATH` line per read-only share, mounted at the
/// same path in the guest (the path is the rest of the line: spaces are kept; line breaks
/// are refused by validation).
pub(crate) fn shares_file(shares: &[std::path::PathBuf]) -> String {
    shares
        .iter()
        .enumerate()
        .map(|(i, dir)| format!("{} {}\n", share_tag(i), dir.to_string_lossy()))
        .collect()
}
/// The line the initramfs prints in probe mode (`isolab.probe=1`), used by accelerator detection.
pub const PROBE_MARKER: &str = "isolab-vm: probe ok";

/// 9p mount options: the Linux 9p2000.L dialect over virtio, 256 KiB messages.
const NINEP_OPTS: &str = "trans=virtio,version=9p2000.L,msize=262144";

/// The initramfs `/init`: loads the modules listed in `/modules` (in order), mounts the bench
/// image (`/dev/vda`) and the control share, and hands over to the agent with `switch_root`.
pub fn init_script() -> String {
    format!(
        r#"#!/bin/busybox sh
# isolab-vm initramfs /init
B=/bin/busybox
$B mount -t devtmpfs -o mode=0755 dev /dev
$B mount -t proc proc /proc
say() {{ echo "isolab-vm: $*"; }}
fail() {{ say "error: $*"; $B poweroff -f; }}
for a in $($B cat /proc/cmdline); do
  case "$a" in isolab.probe=1) echo "{PROBE_MARKER}"; $B poweroff -f ;; esac
done
while read -r m; do
  $B insmod "/lib/modules/$m" || fail "insmod $m"
done < /modules
i=0
while [ ! -b /dev/vda ]; do
  i=$((i + 1)); [ $i -ge 1000 ] && fail "no root disk /dev/vda after 20 s"
  $B usleep 20000
done
$B mount -t ext4 /dev/vda /newroot || fail "cannot mount /dev/vda (the bench image) on /newroot"
$B mkdir -p /newroot/run
$B mount -t tmpfs -o mode=0755,nosuid,nodev run /newroot/run || fail "cannot mount /run"
$B mkdir -p /newroot{GUEST_DIR}/ctl
$B cp /bin/busybox /agent /newroot{GUEST_DIR}/ || fail "cannot copy the agent"
$B mount -t 9p -o {NINEP_OPTS} {CTL_TAG} /newroot{GUEST_DIR}/ctl || fail "cannot mount the control share {CTL_TAG}"
$B umount /proc
$B mount --move /dev /newroot/dev || fail "cannot move /dev"
exec $B switch_root /newroot {GUEST_DIR}/busybox sh {GUEST_DIR}/agent
"#
    )
}

/// The agent, run by busybox sh as PID 1 in the bench image.
pub fn agent_script() -> String {
    format!(
        r#"# isolab-vm guest agent (PID 1)
B={GUEST_DIR}/busybox
V={GUEST_DIR}
C=$V/ctl
export PATH={DEFAULT_PATH}
say() {{ echo "isolab-vm: $*"; }}
off() {{ $B sync; $B poweroff -f; while :; do $B sleep 1; done; }}
fail() {{ say "error: $*"; echo "$*" > $C/error; off; }}
mono() {{
  MONO=
  while read -r a b c d; do
    if [ "$a $b" = "now at" ]; then MONO=$c; CLOCK=monotonic; return; fi
  done < /proc/timer_list
  read -r up rest < /proc/uptime
  MONO="${{up%.*}}${{up#*.}}0000000"; CLOCK=uptime
}}
$B mount -t proc -o nosuid,nodev,noexec proc /proc || fail "cannot mount /proc"
$B mount -t sysfs -o nosuid,nodev,noexec sysfs /sys || fail "cannot mount /sys"
$B mount -t cgroup2 -o nosuid,nodev,noexec cgroup2 /sys/fs/cgroup || fail "cannot mount cgroup2 at /sys/fs/cgroup"
for c in cpu cpuset memory pids io; do
  echo "+$c" > /sys/fs/cgroup/cgroup.subtree_control || say "cgroup controller $c is not available"
done
$B mkdir -p /dev/pts /dev/shm
$B mount -t devpts -o nosuid,noexec,gid=5,mode=620,ptmxmode=000 devpts /dev/pts
$B mount -t tmpfs -o nosuid,nodev shm /dev/shm
$B ip link set lo up || say "cannot bring up lo"
$B hostname isolab-vm
. $C/config || fail "cannot read $C/config"
if [ -n "$ISOLAB_NET" ]; then
  $B ip link set eth0 up || fail "cannot bring up eth0 (the virtio-net device)"
  $B ip addr add "$ISOLAB_NET" dev eth0 || fail "cannot give eth0 the address $ISOLAB_NET"
  $B ip route add default via "$ISOLAB_GATEWAY" || fail "cannot route through $ISOLAB_GATEWAY"
fi
while read -r tag dir; do
  $B mkdir -p "$dir" || fail "cannot create $dir for the share $tag"
  $B mount -t 9p -o {NINEP_OPTS},ro "$tag" "$dir" || fail "cannot mount the share $tag on $dir"
done < $C/shares
W="$ISOLAB_WORKDIR"
$B mkdir -p "$W" || fail "cannot create $W"
if [ "$ISOLAB_SCRATCH" = 1 ]; then
  $B mkdir -p $V/hostwork
  $B mount -t 9p -o {NINEP_OPTS} {WORK_TAG} $V/hostwork || fail "cannot mount the workdir share {WORK_TAG}"
  $B mount -t ext4 /dev/vdb "$W" || fail "cannot mount the scratch disk /dev/vdb on $W"
  $B cp -a $V/hostwork/. "$W/" || fail "cannot copy the workdir onto the scratch disk"
else
  $B mount -t 9p -o {NINEP_OPTS} {WORK_TAG} "$W" || fail "cannot mount the workdir share {WORK_TAG} on $W"
fi
if [ "$ISOLAB_INNER" = 1 ]; then
  $B mkdir -p {GUEST_IMAGE}
  $B mount --bind / {GUEST_IMAGE} || fail "cannot bind the guest root on {GUEST_IMAGE}"
  $B mount -o remount,bind,ro {GUEST_IMAGE} || fail "cannot make {GUEST_IMAGE} read-only"
fi
SETUP_START=; SETUP_END=
if [ -f $C/setup.sh ]; then
  mono; SETUP_START=$MONO
  ( . $C/setup.sh ) > $V/setup.log 2>&1 < /dev/null || fail "the setup before the command failed: $($B tail -n 12 $V/setup.log)"
  mono; SETUP_END=$MONO
fi
read -r UP rest < /proc/uptime
echo "uptime=$UP" > $C/ready
mono; START=$MONO
if [ "$ISOLAB_SERVICE" = 1 ]; then
  # A service runs until the host writes $C/stop (or until it exits by itself).
  ( . $C/command.sh ) > $V/stdout 2> $V/stderr < /dev/null &
  CMD=$!
  while [ ! -e $C/stop ] && kill -0 $CMD 2> /dev/null; do $B usleep 200000; done
  kill -TERM $CMD 2> /dev/null
  wait $CMD
  STATUS=$?
else
  ( . $C/command.sh ) > $V/stdout 2> $V/stderr < /dev/null
  STATUS=$?
fi
mono; END=$MONO
$B cp $V/stdout $V/stderr $C/ || say "cannot copy the output"
COPY=ok
if [ "$ISOLAB_SCRATCH" = 1 ]; then
  $B cp -a "$W/." $V/hostwork/ || COPY=failed
  $B umount "$W"; $B umount $V/hostwork
else
  $B umount "$W"
fi
printf 'status=%s\nstart_ns=%s\nend_ns=%s\nclock=%s\nuptime=%s\ncopy_back=%s\nsetup_start_ns=%s\nsetup_end_ns=%s\n' "$STATUS" "$START" "$END" "$CLOCK" "$UP" "$COPY" "$SETUP_START" "$SETUP_END" > $C/result.tmp
$B mv $C/result.tmp $C/result
off
"#
    )
}

/// What the agent is told before boot (the `config` file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AgentConfig<'a> {
    /// The run's working directory (the same path in the guest).
    pub workdir: &'a Path,
    /// Whether the workdir is a scratch disk.
    pub scratch: bool,
    /// Whether a container engine runs the command (`vm+ENGINE`).
    pub inner: bool,
    /// Whether the command is a service: it runs until the host writes `stop`.
    pub service: bool,
    /// The guest's `eth0` address and gateway, when it has a network.
    pub network: Option<&'a GuestNetwork>,
}

/// The `config` file the agent sources.
pub(crate) fn config_file(c: &AgentConfig<'_>) -> String {
    let (net, gateway) = c.network.map_or((String::new(), String::new()), |n| {
        (format!("{}/{}", n.ip, n.prefix), n.gateway.to_string())
    });
    format!(
        "ISOLAB_WORKDIR={}\nISOLAB_SCRATCH={}\nISOLAB_INNER={}\nISOLAB_SERVICE={}\nISOLAB_NET={}\nISOLAB_GATEWAY={}\n",
        shell_quote(&c.workdir.to_string_lossy()),
        u8::from(c.scratch),
        u8::from(c.inner),
        u8::from(c.service),
        shell_quote(&net),
        shell_quote(&gateway),
    )
}

/// What the guest runs, as the agent sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CommandSpec<'a> {
    pub argv: &'a [String],
    /// Environment, complete (`PATH` included).
    pub env: &'a [(String, String)],
    pub cwd: &'a Path,
    /// `vm+ENGINE`: run argv in a container of that engine.
    pub inner: Option<Inner<'a>>,
}

/// The container engine around the command in `vm+ENGINE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Inner<'a> {
    /// `vm+isolab`: isolab-runtime.
    Isolab(InnerSpec<'a>),
    /// `vm+docker`: `docker run` on the guest's dockerd; the workdir is bound into the container.
    Docker {
        docker: &'a crate::docker::InnerDocker,
        workdir: &'a Path,
    },
}

/// The container around the command in `vm+isolab`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct InnerSpec<'a> {
    /// The runtime binary in the guest.
    pub runtime: &'a str,
    pub image: &'a Path,
    pub workdir: &'a Path,
    pub flags: &'a [String],
}

/// The image's `env`, which starts the command. Not busybox's: its `env` (and its shell)
/// run their own applet for a program that has one (`sh`, `date`, `awk`, `env`), so a
/// command would get busybox's `date` (no `%N`) where a container gets coreutils'.
const GUEST_ENV: &str = "/usr/bin/env";

/// `command.sh`, sourced in a subshell whose output goes to the agent's files: changes to the
/// working directory (for `vm+docker`, also empties the report directory) and replaces itself
/// with the command under a clean environment (the image's `env -i`).
pub(crate) fn command_script(spec: &CommandSpec<'_>) -> String {
    let mut s = String::from("# isolab-vm command\n");
    s.push_str(&format!(
        "cd {} || exit 125\n",
        shell_quote(&spec.cwd.to_string_lossy())
    ));
    s.push_str(&format!(
        "[ -x {GUEST_ENV} ] || {{ echo 'isolab-vm: the guest image has no {GUEST_ENV} (coreutils) to start the command with' >&2; exit 127; }}\n"
    ));
    let mut words: Vec<String> = vec![GUEST_ENV.into(), "-i".into()];
    match &spec.inner {
        Some(Inner::Docker { docker, workdir }) => {
            let (prelude, docker_words) =
                crate::docker::command_words(spec.argv, spec.env, spec.cwd, workdir, docker);
            s.push_str(&prelude);
            words.extend(docker_words);
        }
        None => {
            words.extend(spec.env.iter().map(|(k, v)| format!("{k}={v}")));
            words.extend(spec.argv.iter().cloned());
        }
        Some(Inner::Isolab(inner)) => {
            // The runtime itself gets PATH only; the command's environment goes in with -e.
            words.push(format!("PATH={}", env_path(spec.env)));
            words.push(inner.runtime.to_owned());
            words.push("run".into());
            words.push("--rootfs-type".into());
            words.push("overlay".into());
            let has = |flag: &str| has_flag(inner.flags, flag);
            if !has("--network") {
                words.extend(["--network".into(), "none".into()]);
            }
            let w = inner.workdir.to_string_lossy();
            words.push("--bind".into());
            words.push(format!("{w}:{w}"));
            if !has("--cwd") {
                words.push("--cwd".into());
                words.push(spec.cwd.to_string_lossy().into_owned());
            }
            for (k, v) in spec.env {
                words.push("-e".into());
                words.push(format!("{k}={v}"));
            }
            words.extend(inner.flags.iter().cloned());
            words.push(inner.image.to_string_lossy().into_owned());
            words.push("--".into());
            words.extend(spec.argv.iter().cloned());
        }
    }
    s.push_str("exec");
    for w in &words {
        s.push(' ');
        s.push_str(&shell_quote(w));
    }
    s.push('\n');
    s
}

/// Which guest clock measured the wall time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GuestClock {
    /// `CLOCK_MONOTONIC` in nanoseconds (`/proc/timer_list`).
    Monotonic,
    /// `/proc/uptime` (boot-time clock, 10 ms steps).
    Uptime,
}

/// The agent's `result` file, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AgentResult {
    /// The shell's `$?`: the exit status, or 128 + the signal number.
    pub status: i32,
    pub wall: Duration,
    pub clock: GuestClock,
    /// The guest's uptime when the command was about to start.
    pub uptime: Option<Duration>,
    /// Whether the scratch disk's contents were copied back into the workdir.
    pub copy_back_ok: bool,
    /// How long `setup.sh` took, when there was one.
    pub setup: Option<Duration>,
}

/// Parses `/proc/uptime`-style seconds ("12.34").
pub(crate) fn parse_seconds(s: &str) -> Option<Duration> {
    let v: f64 = s.trim().parse().ok()?;
    (v.is_finite() && v >= 0.0).then(|| Duration::from_secs_f64(v))
}

/// Parses the agent's `result` file.
pub(crate) fn parse_result(text: &str) -> Result<AgentResult, String> {
    let mut status = None;
    let mut start = None;
    let mut end = None;
    let mut clock = None;
    let mut uptime = None;
    let mut copy_back_ok = true;
    let (mut setup_start, mut setup_end) = (None, None);
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let (k, v) = line
            .split_once('=')
            .ok_or_else(|| format!("line {line:?} is not key=value"))?;
        let int = |what: &str| -> Result<u64, String> {
            v.trim()
                .parse::<u64>()
                .map_err(|_| format!("{what} {v:?} is not a whole number"))
        };
        match k {
            "status" => {
                status = Some(
                    v.trim()
                        .parse::<i32>()
                        .map_err(|_| format!("status {v:?} is not a number"))?,
                )
            }
            "start_ns" => start = Some(int("start_ns")?),
            "end_ns" => end = Some(int("end_ns")?),
            "clock" => {
                clock = Some(match v.trim() {
                    "monotonic" => GuestClock::Monotonic,
                    "uptime" => GuestClock::Uptime,
                    other => return Err(format!("unknown clock {other:?}")),
                })
            }
            "uptime" => uptime = parse_seconds(v),
            "copy_back" => copy_back_ok = v.trim() == "ok",
            "setup_start_ns" if !v.trim().is_empty() => setup_start = Some(int("setup_start_ns")?),
            "setup_end_ns" if !v.trim().is_empty() => setup_end = Some(int("setup_end_ns")?),
            _ => {}
        }
    }
    let status = status.ok_or("no status")?;
    let (start, end) = (start.ok_or("no start_ns")?, end.ok_or("no end_ns")?);
    let wall = end
        .checked_sub(start)
        .ok_or_else(|| format!("end_ns {end} is before start_ns {start}"))?;
    Ok(AgentResult {
        status,
        wall: Duration::from_nanos(wall),
        clock: clock.ok_or("no clock")?,
        uptime,
        copy_back_ok,
        setup: match (setup_start, setup_end) {
            (Some(a), Some(b)) => b.checked_sub(a).map(Duration::from_nanos),
            _ => None,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn quoting_survives_quotes_and_spaces() {
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_quote(""), "''");
    }

    #[test]
    fn plain_command_script() {
        let argv = strings(&["sysbench", "cpu", "--time=2", "run"]);
        let env = vec![
            ("PATH".to_string(), "/bin".to_string()),
            ("X".into(), "a b".into()),
        ];
        let s = command_script(&CommandSpec {
            argv: &argv,
            env: &env,
            cwd: Path::new("/tmp/w"),
            inner: None,
        });
        assert_eq!(
            s,
            "# isolab-vm command\ncd '/tmp/w' || exit 125\n[ -x /usr/bin/env ] || { echo 'isolab-vm: \
             the guest image has no /usr/bin/env (coreutils) to start the command with' >&2; \
             exit 127; }\nexec '/usr/bin/env' '-i' 'PATH=/bin' 'X=a b' 'sysbench' 'cpu' '--time=2' 'run'\n"
        );
    }

    #[test]
    fn inner_command_script_wraps_the_runtime() {
        let argv = strings(&["cat", "/proc/self/cgroup"]);
        let env = vec![("PATH".to_string(), "/usr/bin:/bin".to_string())];
        let flags = strings(&["--cpus", "0.5", "--report", "/w/.isolab-runtime.json"]);
        let s = command_script(&CommandSpec {
            argv: &argv,
            env: &env,
            cwd: Path::new("/w"),
            inner: Some(Inner::Isolab(InnerSpec {
                runtime: "/run/isolab-vm/ctl/isolab-runtime",
                image: Path::new(GUEST_IMAGE),
                workdir: Path::new("/w"),
                flags: &flags,
            })),
        });
        assert!(
            s.contains(
                "'PATH=/usr/bin:/bin' '/run/isolab-vm/ctl/isolab-runtime' 'run' '--rootfs-type' \
             'overlay' '--network' 'none' '--bind' '/w:/w' '--cwd' '/w' '-e' \
             'PATH=/usr/bin:/bin' '--cpus' '0.5' '--report' '/w/.isolab-runtime.json' \
             '/run/isolab-vm/image' '--' 'cat' '/proc/self/cgroup'"
            ),
            "{s}"
        );
        let flags = strings(&["--network=host", "--cwd", "/"]);
        let s = command_script(&CommandSpec {
            argv: &argv,
            env: &env,
            cwd: Path::new("/w"),
            inner: Some(Inner::Isolab(InnerSpec {
                runtime: "rt",
                image: Path::new("/img"),
                workdir: Path::new("/w"),
                flags: &flags,
            })),
        });
        assert!(
            !s.contains("'--network' 'none'") && !s.contains("'--cwd' '/w'"),
            "{s}"
        );
    }

    #[test]
    fn docker_command_script_empties_the_report_then_runs_docker() {
        let argv = strings(&["sysbench", "cpu", "run"]);
        let env = vec![("PATH".to_string(), "/usr/bin:/bin".to_string())];
        let docker = crate::docker::InnerDocker {
            flags: strings(&["--pids-limit", "64"]),
            report: "/w/.isolab-docker".into(),
        };
        let s = command_script(&CommandSpec {
            argv: &argv,
            env: &env,
            cwd: Path::new("/w"),
            inner: Some(Inner::Docker {
                docker: &docker,
                workdir: Path::new("/w"),
            }),
        });
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines[1], "cd '/w' || exit 125");
        assert!(lines[2].starts_with("[ -x /usr/bin/env ] ||"), "{s}");
        assert!(lines[3].contains("rm -rf '/w/.isolab-docker'"), "{s}");
        assert!(
            lines[4].starts_with(
                "exec '/usr/bin/env' '-i' 'PATH=/usr/bin:/bin' \
                 'DOCKER_HOST=unix:///run/isolab-vm/docker.sock' 'docker' 'run' '--rm'"
            ),
            "{s}"
        );
        assert!(
            lines[4].contains("'--pids-limit' '64' '--entrypoint' '/bin/sh' 'isolab/guest'"),
            "{s}"
        );
        assert!(lines[4].ends_with("'sysbench' 'cpu' 'run'"), "{s}");
    }

    #[test]
    fn config_file_quotes_the_workdir_and_gives_the_network() {
        let mut c = AgentConfig {
            workdir: Path::new("/tmp/it's"),
            scratch: true,
            inner: false,
            service: false,
            network: None,
        };
        assert_eq!(
            config_file(&c),
            "ISOLAB_WORKDIR='/tmp/it'\\''s'\nISOLAB_SCRATCH=1\nISOLAB_INNER=0\n\
             ISOLAB_SERVICE=0\nISOLAB_NET=''\nISOLAB_GATEWAY=''\n"
        );
        let file = std::fs::File::open("/dev/null").unwrap();
        let net = crate::run::GuestNetwork {
            tap: std::sync::Arc::new(file.into()),
            ip: "10.213.0.5".parse().unwrap(),
            prefix: 24,
            gateway: "10.213.0.1".parse().unwrap(),
            mac: "02:00:0a:d5:00:05".into(),
        };
        c.network = Some(&net);
        c.service = true;
        let text = config_file(&c);
        assert!(
            text.ends_with(
                "ISOLAB_SERVICE=1\nISOLAB_NET='10.213.0.5/24'\nISOLAB_GATEWAY='10.213.0.1'\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn result_parsing() {
        let r = parse_result(
            "status=0\nstart_ns=1000\nend_ns=2001000\nclock=monotonic\nuptime=7.25\ncopy_back=ok\n",
        )
        .unwrap();
        assert_eq!(r.status, 0);
        assert_eq!(r.wall, Duration::from_micros(2000));
        assert_eq!(r.clock, GuestClock::Monotonic);
        assert_eq!(r.uptime, Some(Duration::from_millis(7250)));
        assert!(r.copy_back_ok);
        assert_eq!(r.setup, None);
        let r = parse_result(
            "status=0\nstart_ns=1\nend_ns=2\nclock=monotonic\nsetup_start_ns=\nsetup_end_ns=\n",
        )
        .unwrap();
        assert_eq!(r.setup, None);
        let r = parse_result(
            "status=0\nstart_ns=1\nend_ns=2\nclock=monotonic\nsetup_start_ns=1000\nsetup_end_ns=6001000\n",
        )
        .unwrap();
        assert_eq!(r.setup, Some(Duration::from_millis(6)));
        let r = parse_result("status=137\nstart_ns=5\nend_ns=5\nclock=uptime\ncopy_back=failed\n")
            .unwrap();
        assert_eq!(
            (r.status, r.clock, r.copy_back_ok),
            (137, GuestClock::Uptime, false)
        );
        assert!(
            parse_result("status=0\nstart_ns=9\nend_ns=1\nclock=monotonic")
                .unwrap_err()
                .contains("before")
        );
        assert!(parse_result("start_ns=1\nend_ns=2\nclock=monotonic").is_err());
        assert!(parse_result("status=x").is_err());
        assert!(parse_result("garbage").is_err());
        assert!(parse_result("status=0\nstart_ns=1\nend_ns=2\nclock=tsc").is_err());
    }

    #[test]
    fn scripts_mention_their_shares_and_marker() {
        let init = init_script();
        assert!(init.starts_with("#!/bin/busybox sh\n"));
        assert!(init.contains("isolabctl /newroot/run/isolab-vm/ctl"));
        assert!(init.contains(PROBE_MARKER));
        let agent = agent_script();
        assert!(agent.contains("isolabwork \"$W\""));
        assert!(agent.contains("/sys/fs/cgroup/cgroup.subtree_control"));
        let setup = agent
            .find(". $C/setup.sh")
            .expect("the agent runs setup.sh");
        assert!(
            setup < agent.find("> $C/ready").unwrap(),
            "setup before ready"
        );
        assert!(!agent.contains("{{"), "format escapes resolved");
    }
}
