//! A container host (seed 003's VM running the web and database containers): one guest whose
//! engine (isolab-runtime or the image's dockerd) runs several long-lived commands side by side,
//! each in a container of its own on the guest's network.
//!
//! The guest's command is a launcher (a POSIX shell loop in the guest's root) that watches the
//! control share's `components/` directory every 0.2 s:
//! - `NAME.sh` (written whole by the host): started once, its output in `NAME.stdout` and
//!   `NAME.stderr` (on the share, so the host reads them while it runs); its pid in `NAME.pid`,
//!   its exit status in `NAME.exit` when it ends;
//! - `NAME.stop`: the component gets SIGTERM (the engine's client passes it to the container);
//! - `list.request`: the engine's container list is written to `list` (`docker ps`,
//!   `isolab-runtime list`);
//! - `listening.request` (a port): `listening` gets `PORT yes` when a TCP socket of the
//!   guest listens on it (the components share the guest's network), `PORT no` otherwise.
//!   A component is ready when its port listens, not when it accepts a connection: a
//!   server such as `iperf3 -s` takes a probe's connection as a client, then closes its
//!   listening socket and opens it again, and a client connecting in between is refused.
//!
//! Stopping the host ([`ContainerHost::shutdown`]) stops the launcher, which sends SIGTERM to every
//! component and waits for them, then the guest powers off as for any service.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use isolab_cgroups::Attacher;

use crate::agent::{command_script, CommandSpec, GUEST_DIR};
use crate::docker::DOCKER_SOCKET;
use crate::error::{IoContext, VmError};
use crate::guest::shell_quote;

use super::launch::{inner_image, inner_spec, runtime_in_guest};
use super::validate::{bad_command, full_env};
use super::{start, GuestCommand, InnerEngine, RunningVm, Shutdown, VmConfig};

/// The components' directory in the control share.
const COMPONENTS: &str = "components";

/// How often the host looks at what the launcher wrote.
const POLL: Duration = Duration::from_millis(100);

/// The launcher the container host's guest runs (see the module's documentation); `list` is
/// the shell command that prints the engine's containers.
fn launcher(list: &str) -> String {
    format!(
        r#"C={GUEST_DIR}/ctl/{COMPONENTS}
B={GUEST_DIR}/busybox
stop_all() {{
  for p in $C/*.pid; do [ -e "$p" ] && kill -TERM "$($B cat "$p")" 2> /dev/null; done
  wait
  exit 0
}}
trap stop_all TERM
$B mkdir -p $C
while :; do
  for s in $C/*.sh; do
    [ -e "$s" ] || continue
    n=${{s%.sh}}
    [ -e "$n.started" ] && continue
    : > "$n.started"
    (
      ( . "$s" ) > "$n.stdout" 2> "$n.stderr" < /dev/null &
      echo $! > "$n.pid.tmp" && $B mv "$n.pid.tmp" "$n.pid"
      wait $!
      echo $? > "$n.exit.tmp" && $B mv "$n.exit.tmp" "$n.exit"
    ) &
  done
  for t in $C/*.stop; do
    [ -e "$t" ] || continue
    n=${{t%.stop}}
    if [ -e "$n.pid" ] && [ ! -e "$n.signalled" ]; then
      : > "$n.signalled"
      kill -TERM "$($B cat "$n.pid")" 2> /dev/null
    fi
  done
  if [ -e $C/list.request ]; then
    $B rm -f $C/list.request
    {{ {list}; }} > $C/list.tmp 2>&1
    $B mv $C/list.tmp $C/list
  fi
  if [ -e $C/listening.request ]; then
    p=$($B cat $C/listening.request)
    $B rm -f $C/listening.request
    a=no
    $B awk -v port=":$(printf '%04X' "$p")" \
      '$4 == "0A" && substr($2, length($2) - 4) == port {{ found = 1 }} END {{ exit !found }}' \
      /proc/net/tcp /proc/net/tcp6 2> /dev/null && a=yes
    echo "$p $a" > $C/listening.tmp
    $B mv $C/listening.tmp $C/listening
  fi
  $B usleep 200000
done
"#
    )
}

/// The command that lists the containers of `engine` in the guest.
fn list_command(engine: &InnerEngine) -> String {
    match engine {
        InnerEngine::Docker(_) => format!(
            "DOCKER_HOST=unix://{DOCKER_SOCKET} docker ps --no-trunc --format {}",
            shell_quote("table {{.ID}}\t{{.Names}}\t{{.Image}}\t{{.Status}}")
        ),
        InnerEngine::Isolab(_) => format!("{GUEST_DIR}/ctl/isolab-runtime list"),
    }
}

/// Boots a container host for `engine` per `config` (as [`start`]: QEMU in `attacher`'s
/// cgroup, vCPUs pinned when `config.pin` says so) and returns once its launcher runs. The
/// engine's flags in `engine` are not used: each component brings its own ([`ContainerHost::run`]).
pub fn start_container_host(
    config: &VmConfig,
    engine: &InnerEngine,
    attacher: Option<Attacher>,
) -> Result<ContainerHost, VmError> {
    let mut command = GuestCommand::new(
        [
            "sh".to_owned(),
            "-c".to_owned(),
            launcher(&list_command(engine)),
        ],
        Duration::from_secs(24 * 3600),
    );
    command.inner = Some(engine.clone());
    command.host = true;
    let vm = start(config, &command, attacher)?;
    let components = vm.vm.ctl.join(COMPONENTS);
    std::fs::create_dir_all(&components).ctx("create directory", &components)?;
    Ok(ContainerHost {
        vm,
        components,
        workdir: config.workdir.clone(),
    })
}

/// A running container host ([`start_container_host`]).
#[derive(Debug)]
pub struct ContainerHost {
    vm: RunningVm,
    /// The components' directory in the control share, on the host.
    components: PathBuf,
    /// The run's working directory (the same path in the guest).
    workdir: PathBuf,
}

/// Whether `name` can name a component's files: 1 to 64 of `a-z`, `0-9`, `-`, `_`, starting
/// with a letter or digit.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

impl ContainerHost {
    /// The guest.
    pub fn vm(&mut self) -> &mut RunningVm {
        &mut self.vm
    }

    fn file(&self, name: &str, ext: &str) -> PathBuf {
        self.components.join(format!("{name}.{ext}"))
    }

    /// Starts `command` (whose `inner` names the engine and this component's flags) as
    /// component `name`: its script is handed to the launcher, which starts it within 0.2 s.
    /// Whether it serves is the caller's to check.
    pub fn run(&self, name: &str, command: &GuestCommand) -> Result<(), VmError> {
        if !valid_name(name) {
            return Err(bad_command(format!(
                "component name `{name}`: 1 to 64 of a-z, 0-9, '-' and '_', starting with a letter or digit"
            )));
        }
        if self.file(name, "sh").exists() {
            return Err(bad_command(format!(
                "component `{name}` was started in this container host already"
            )));
        }
        let Some(engine) = &command.inner else {
            return Err(bad_command(format!(
                "component `{name}` names no container engine: a container host runs containers only"
            )));
        };
        let runtime = runtime_in_guest();
        let image = inner_image(Some(engine));
        let env = full_env(&command.env);
        let cwd = command.cwd.clone().unwrap_or_else(|| self.workdir.clone());
        let inner = inner_spec(engine, &runtime, &image, &self.workdir);
        let script = command_script(&CommandSpec {
            argv: &command.argv,
            env: &env,
            cwd: &cwd,
            inner: Some(inner),
        });
        let tmp = self.file(name, "sh.tmp");
        std::fs::write(&tmp, script).ctx("write", &tmp)?;
        let path = self.file(name, "sh");
        std::fs::rename(&tmp, &path).ctx("rename into", &path)
    }

    /// Whether component `name` still runs (it was started and has not exited, and the guest
    /// runs).
    pub fn is_running(&mut self, name: &str) -> bool {
        self.vm.is_running() && !self.file(name, "exit").exists()
    }

    /// The end of component `name`'s standard error so far (its standard output when that is
    /// empty), at most `lines` lines.
    pub fn output_tail(&self, name: &str, lines: usize) -> String {
        let read = |ext: &str| std::fs::read(self.file(name, ext)).unwrap_or_default();
        let err = read("stderr");
        let bytes = if err.is_empty() { read("stdout") } else { err };
        isolab_tools::tail_lines(&bytes, lines)
    }

    /// Component `name`'s exit status, once it ended.
    pub fn exit_status(&self, name: &str) -> Option<i32> {
        std::fs::read_to_string(self.file(name, "exit"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// Stops component `name` (SIGTERM through its engine's client) and waits up to `grace`
    /// for it to end; returns its exit status, or `None` when it was still running then (the
    /// guest's shutdown ends it).
    pub fn stop(&mut self, name: &str, grace: Duration) -> Result<Option<i32>, VmError> {
        let stop = self.file(name, "stop");
        std::fs::write(&stop, "").ctx("write", &stop)?;
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline && self.vm.is_running() {
            if let Some(status) = self.exit_status(name) {
                return Ok(Some(status));
            }
            std::thread::sleep(POLL);
        }
        Ok(self.exit_status(name))
    }

    /// The engine's list of containers in the guest (`docker ps`, `isolab-runtime list`), as it
    /// printed it; waits up to `timeout` for the launcher.
    pub fn containers(&mut self, timeout: Duration) -> Result<String, VmError> {
        self.ask("list", "", timeout)
    }

    /// Whether a TCP socket in the guest listens on `port` (the components are on the guest's
    /// network); waits up to `timeout` for the launcher. Unlike a connection, looking does not
    /// disturb a server that takes every connection as a client.
    pub fn listening(&mut self, port: u16, timeout: Duration) -> Result<bool, VmError> {
        let answer = self.ask("listening", &port.to_string(), timeout)?;
        match answer.split_whitespace().collect::<Vec<_>>()[..] {
            [p, yes] if p == port.to_string() => Ok(yes == "yes"),
            _ => Err(VmError::io(
                "read the launcher's answer in",
                self.components.join("listening"),
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!(
                        "expected `{port} yes` or `{port} no`, found `{}`",
                        answer.trim()
                    ),
                ),
            )),
        }
    }

    /// Writes `NAME.request` holding `body` for the launcher and returns what it wrote to `NAME`
    /// within `timeout`.
    fn ask(&mut self, name: &str, body: &str, timeout: Duration) -> Result<String, VmError> {
        let answer = self.components.join(name);
        let _ = std::fs::remove_file(&answer);
        let request = self.components.join(format!("{name}.request"));
        std::fs::write(&request, body).ctx("write", &request)?;
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(text) = std::fs::read_to_string(&answer) {
                return Ok(text);
            }
            if Instant::now() >= deadline || !self.vm.is_running() {
                return Err(VmError::io(
                    "wait for the launcher's answer in",
                    &answer,
                    std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!("the container host's launcher wrote none within {timeout:?}"),
                    ),
                ));
            }
            std::thread::sleep(POLL);
        }
    }

    /// Stops every component and the guest ([`RunningVm::stop`]).
    pub fn shutdown(self) -> Result<Shutdown, VmError> {
        self.vm.stop()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::docker::InnerDocker;

    #[test]
    fn component_names_are_file_names_of_the_share() {
        for ok in ["web", "db", "php-fpm", "a_1", "0"] {
            assert!(valid_name(ok), "{ok}");
        }
        for bad in ["", "Web", "-x", "a/b", "a.sh", "a b", &"x".repeat(65)] {
            assert!(!valid_name(bad), "{bad}");
        }
    }

    #[test]
    fn the_launcher_starts_stops_and_lists_through_the_share() {
        let docker = InnerEngine::Docker(InnerDocker {
            flags: vec![],
            report: "/w/.r".into(),
        });
        let list = list_command(&docker);
        assert!(list.starts_with(&format!("DOCKER_HOST=unix://{DOCKER_SOCKET} docker ps")));
        assert!(list.contains("{{.Names}}"), "{list}");
        let script = launcher(&list);
        assert!(script.contains(&format!("C={GUEST_DIR}/ctl/components")));
        assert!(script.contains("trap stop_all TERM"));
        assert!(script.contains("( . \"$s\" ) > \"$n.stdout\" 2> \"$n.stderr\""));
        assert!(script.contains(&format!("{{ {list}; }} > $C/list.tmp")));
        let isolab = InnerEngine::Isolab(crate::InnerContainer {
            runtime: "/bin/true".into(),
            flags: vec![],
            image: None,
        });
        assert_eq!(
            list_command(&isolab),
            format!("{GUEST_DIR}/ctl/isolab-runtime list")
        );
    }
}
