//! The OCI runtime command line (`create`, `start`, `state`, `kill`, `delete`,
//! `list`, `ps`) with the global flags engines pass (`--root`, `--log`,
//! `--log-format`, `--systemd-cgroup`), as runc and crun spell them.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use isolab_cgroups::Hierarchy;
use isolab_runtime::lifecycle::{self, OciState};
use isolab_runtime::state::OciInfo;
use isolab_runtime::{oci, ContainerId, Lifecycle};

/// Flags every subcommand takes, before or after its name.
#[derive(Debug, Args)]
pub struct Global {
    /// State directory of the OCI operations (runc's `--root`) [default: /run/isolab];
    /// for `run`, `spec` and `gc` it overrides --state-dir.
    #[arg(long, global = true, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// Also append errors to FILE (engines read it when an operation fails).
    #[arg(long, global = true, value_name = "FILE")]
    pub log: Option<PathBuf>,
    /// Format of --log: text, or json (one object a line, as runc writes).
    #[arg(long, global = true, value_enum, default_value = "text")]
    pub log_format: LogFormat,
    /// Not supported: isolab-runtime manages cgroups through cgroupfs (an error
    /// says so; configure the engine's cgroup manager as cgroupfs).
    #[arg(long, global = true)]
    pub systemd_cgroup: bool,
    /// Accepted for compatibility; changes nothing.
    #[arg(long, global = true)]
    pub debug: bool,
}

/// Format of the `--log` file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// `time level=error msg="…"`.
    Text,
    /// `{"level":"error","msg":"…","time":"…"}`.
    Json,
}

impl Global {
    /// The state directory of the OCI operations.
    pub fn state_dir(&self) -> PathBuf {
        self.root
            .clone()
            .unwrap_or_else(isolab_runtime::config::default_state_dir)
    }

    /// Refuses what isolab-runtime does not do.
    pub fn check(&self) -> Result<()> {
        if self.systemd_cgroup {
            bail!(
                "--systemd-cgroup is not supported: isolab-runtime creates cgroups through \
                 cgroupfs; set the engine's cgroup manager to cgroupfs (podman \
                 --cgroup-manager cgroupfs, dockerd --exec-opt native.cgroupdriver=cgroupfs)"
            );
        }
        Ok(())
    }
}

/// Appends an error to the `--log` file, if any (best effort: the error is also on
/// standard error).
pub fn log_error(path: Option<&Path>, format: LogFormat, message: &str) {
    let Some(path) = path else { return };
    let time = humantime::format_rfc3339_nanos(std::time::SystemTime::now()).to_string();
    let line = match format {
        LogFormat::Json => format!(
            "{}\n",
            serde_json::json!({"level": "error", "msg": message, "time": time})
        ),
        LogFormat::Text => format!("time={time:?} level=error msg={message:?}\n"),
    };
    let _ = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(line.as_bytes()));
}

/// `create`.
#[derive(Debug, Args)]
pub struct CreateArgs {
    /// The bundle directory (config.json and the root it names).
    #[arg(long, short, default_value = ".", value_name = "DIR")]
    pub bundle: PathBuf,
    /// Unix socket to send the pseudo-terminal's master to (`process.terminal`).
    #[arg(long, value_name = "PATH")]
    pub console_socket: Option<PathBuf>,
    /// Write the container process's pid to FILE.
    #[arg(long, value_name = "FILE")]
    pub pid_file: Option<PathBuf>,
    /// Not supported (isolab-runtime always uses pivot_root); an error says so.
    #[arg(long)]
    pub no_pivot: bool,
    /// Accepted: isolab-runtime never creates a session keyring.
    #[arg(long)]
    pub no_new_keyring: bool,
    /// Not supported beyond 0: the container gets stdin, stdout and stderr only.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub preserve_fds: u32,
    /// Container id.
    pub id: String,
}

/// `exec`.
#[derive(Debug, Args)]
pub struct ExecArgs {
    /// The process as OCI `process` JSON (args, env, cwd, user, capabilities, …);
    /// otherwise the container's own process with the COMMAND and the flags below.
    #[arg(long, short, value_name = "FILE")]
    pub process: Option<PathBuf>,
    /// Return once the process runs (its pid in --pid-file), instead of waiting.
    #[arg(long, short)]
    pub detach: bool,
    /// Write the process's pid to FILE.
    #[arg(long, value_name = "FILE")]
    pub pid_file: Option<PathBuf>,
    /// Not supported: isolab-runtime gives no pseudo-terminal (an error says so when
    /// the process asks for one).
    #[arg(long, value_name = "PATH")]
    pub console_socket: Option<PathBuf>,
    /// Not supported (no pseudo-terminal).
    #[arg(long, short)]
    pub tty: bool,
    /// Working directory (without --process).
    #[arg(long)]
    pub cwd: Option<PathBuf>,
    /// More environment, NAME=value (without --process).
    #[arg(long, short)]
    pub env: Vec<String>,
    /// UID[:GID] (without --process).
    #[arg(long, short)]
    pub user: Option<String>,
    /// Container id.
    pub id: String,
    /// The command and its arguments (without --process).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub command: Vec<String>,
}

/// `exec`: another process in a running container; exits with its status (or, with
/// --detach, once it runs).
pub fn exec(global: &Global, args: &ExecArgs) -> Result<i32> {
    if args.tty {
        bail!("exec --tty is not supported: isolab-runtime gives no pseudo-terminal");
    }
    let state_dir = global.state_dir();
    let (_, st) = lifecycle::load(&state_dir, &args.id)?;
    let bundle = st
        .oci
        .as_ref()
        .map(|o| o.bundle.clone())
        .with_context(|| format!("container {} was not made by `create`", args.id))?;
    let id: ContainerId = args.id.parse()?;
    let config = match &args.process {
        Some(file) => {
            if !args.command.is_empty() {
                bail!("give either --process FILE or a COMMAND, not both");
            }
            let meta: serde_json::Value = serde_json::from_str(
                &std::fs::read_to_string(file)
                    .with_context(|| format!("read the process file {}", file.display()))?,
            )
            .with_context(|| format!("process file {} is not JSON", file.display()))?;
            if meta["terminal"] == serde_json::Value::Bool(true) {
                bail!(
                    "the process asks for a terminal (\"terminal\": true), which \
                     isolab-runtime does not give"
                );
            }
            oci::exec_config(&bundle, &id, file)?
        }
        None => {
            if args.command.is_empty() {
                bail!("no command: give COMMAND after the id, or --process FILE");
            }
            let mut config = oci::from_bundle(&bundle, &id)?;
            config.args = args.command.clone();
            config.env.extend(args.env.iter().cloned());
            if let Some(cwd) = &args.cwd {
                config.cwd = cwd.clone();
            }
            if let Some(user) = &args.user {
                let (uid, gid) = user.split_once(':').unwrap_or((user, "0"));
                let parse = |v: &str| {
                    v.parse::<u32>()
                        .with_context(|| format!("--user {user:?}: expected UID[:GID], numeric"))
                };
                config.oci.user = Some(isolab_runtime::config::User {
                    uid: parse(uid)?,
                    gid: parse(gid)?,
                    ..Default::default()
                });
            }
            config.validate()?;
            config
        }
    };
    let done = isolab_runtime::container::exec::exec(
        &state_dir,
        &args.id,
        &config,
        args.detach,
        &hierarchy()?,
    )?;
    use isolab_runtime::container::exec::Executed;
    match done {
        Executed::Running(pid) => {
            if let Some(path) = &args.pid_file {
                write_pid_file(path, pid)?;
            }
            Ok(0)
        }
        Executed::Exited(status) => Ok(status),
    }
}

/// Output format of `list` and `ps`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Columns for people.
    Table,
    /// JSON.
    Json,
}

fn hierarchy() -> Result<Hierarchy> {
    Hierarchy::detect().context("detect the cgroup mounts")
}

/// `create`: sets the container up; its process waits for `start`.
pub fn create(global: &Global, args: &CreateArgs, started: u64) -> Result<i32> {
    if args.no_pivot {
        bail!("--no-pivot is not supported: isolab-runtime always uses pivot_root");
    }
    if args.preserve_fds > 0 {
        bail!("--preserve-fds is not supported: the container gets stdin, stdout and stderr");
    }
    let id: ContainerId = args.id.parse()?;
    let bundle = args
        .bundle
        .canonicalize()
        .with_context(|| format!("bundle {}", args.bundle.display()))?;
    let mut config = oci::from_bundle(&bundle, &id)?;
    let meta = oci::bundle_meta(&bundle)?;
    if meta.terminal && args.console_socket.is_none() {
        bail!(
            "the bundle asks for a terminal (process.terminal) but no --console-socket was \
             given to send it to"
        );
    }
    config.state_dir = global.state_dir();
    config.lifecycle = Lifecycle::Create;
    config.trace_origin = Some(started);
    let info = OciInfo {
        bundle,
        rootfs: config.rootfs.source().to_owned(),
        init_start: 0,
        annotations: meta.annotations,
        created: humantime::format_rfc3339_nanos(std::time::SystemTime::now()).to_string(),
        // SAFETY: getuid cannot fail.
        owner: unsafe { libc::getuid() },
        start_container: config.oci.hooks.start_container.clone(),
        poststart: config.oci.hooks.poststart.clone(),
        poststop: config.oci.hooks.poststop.clone(),
    };
    let created = isolab_runtime::create(&config, &hierarchy()?, info)?;
    if let Some(path) = &args.pid_file {
        write_pid_file(path, created.pid)?;
    }
    Ok(0)
}

/// Writes the pid atomically (a temporary file renamed), without a newline, as runc.
fn write_pid_file(path: &Path, pid: u32) -> Result<()> {
    let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
    std::fs::write(&tmp, pid.to_string())
        .and_then(|()| std::fs::rename(&tmp, path))
        .with_context(|| format!("write the pid file {}", path.display()))
}

/// `start`.
pub fn start(global: &Global, id: &str) -> Result<i32> {
    warn(global, lifecycle::start(&global.state_dir(), id)?);
    Ok(0)
}

/// Hook failures the spec makes warnings: on standard error and in the log.
fn warn(global: &Global, warnings: Vec<String>) {
    for w in warnings {
        eprintln!("isolab-runtime: warning: {w}");
        log_error(
            global.log.as_deref(),
            global.log_format,
            &format!("warning: {w}"),
        );
    }
}

/// `state`: the state as JSON on standard output.
pub fn state(global: &Global, id: &str) -> Result<i32> {
    let st = lifecycle::state(&global.state_dir(), id)?;
    println!("{}", serde_json::to_string_pretty(&st)?);
    Ok(0)
}

/// `kill`.
pub fn kill(global: &Global, id: &str, signal: Option<&str>, all: bool) -> Result<i32> {
    let signal = parse_signal(signal.unwrap_or("TERM"))?;
    lifecycle::kill(&global.state_dir(), id, signal, all, &hierarchy()?)?;
    Ok(0)
}

/// `delete`.
pub fn delete(global: &Global, id: &str, force: bool) -> Result<i32> {
    match lifecycle::delete(&global.state_dir(), id, force, &hierarchy()?) {
        Ok(warnings) => warn(global, warnings),
        // runc's behaviour, which Docker relies on: it deletes twice, the second time
        // with --force after the container is gone.
        Err(isolab_runtime::RuntimeError::NotFound { .. }) if force => {}
        Err(e) => return Err(e.into()),
    }
    Ok(0)
}

/// `list`.
pub fn list(global: &Global, format: Format, quiet: bool) -> Result<i32> {
    let all = lifecycle::list(&global.state_dir())?;
    if quiet {
        for st in &all {
            println!("{}", st.id);
        }
        return Ok(0);
    }
    match format {
        Format::Json => println!("{}", serde_json::to_string(&all)?),
        Format::Table => print!("{}", table(&all)),
    }
    Ok(0)
}

fn table(all: &[OciState]) -> String {
    let mut out = format!(
        "{:<24} {:<8} {:<9} {:<40} {:<30} {}\n",
        "ID", "PID", "STATUS", "BUNDLE", "CREATED", "OWNER"
    );
    for st in all {
        out.push_str(&format!(
            "{:<24} {:<8} {:<9} {:<40} {:<30} {}\n",
            st.id,
            st.pid,
            st.status.name(),
            st.bundle.display(),
            st.created,
            st.owner
        ));
    }
    out
}

/// `ps`: the container's pids (JSON array), or `ps -f` (plus ARGS) of them.
pub fn ps(global: &Global, id: &str, format: Format, ps_args: &[String]) -> Result<i32> {
    let pids = lifecycle::pids(&global.state_dir(), id, &hierarchy()?)?;
    match format {
        Format::Json => println!("{}", serde_json::to_string(&pids)?),
        Format::Table => {
            let list: Vec<String> = pids.iter().map(u32::to_string).collect();
            let mut cmd = std::process::Command::new("ps");
            if ps_args.is_empty() {
                cmd.arg("-f");
            } else {
                cmd.args(ps_args);
            }
            if !list.is_empty() {
                cmd.arg("-p").arg(list.join(","));
            }
            let status = cmd.status().context("run ps")?;
            // ps exits 1 when no process matched.
            if !status.success() && !list.is_empty() {
                bail!("ps failed with {status}");
            }
        }
    }
    Ok(0)
}

/// Signals by name (`KILL`, `SIGKILL`, case-insensitive) or number.
pub fn parse_signal(s: &str) -> Result<i32> {
    if let Ok(n) = s.parse::<i32>() {
        if (1..=64).contains(&n) {
            return Ok(n);
        }
        bail!("signal {n} is out of range 1-64");
    }
    let upper = s.to_ascii_uppercase();
    let name = upper.strip_prefix("SIG").unwrap_or(&upper);
    let table = [
        ("HUP", libc::SIGHUP),
        ("INT", libc::SIGINT),
        ("QUIT", libc::SIGQUIT),
        ("ILL", libc::SIGILL),
        ("TRAP", libc::SIGTRAP),
        ("ABRT", libc::SIGABRT),
        ("IOT", libc::SIGIOT),
        ("BUS", libc::SIGBUS),
        ("FPE", libc::SIGFPE),
        ("KILL", libc::SIGKILL),
        ("USR1", libc::SIGUSR1),
        ("SEGV", libc::SIGSEGV),
        ("USR2", libc::SIGUSR2),
        ("PIPE", libc::SIGPIPE),
        ("ALRM", libc::SIGALRM),
        ("TERM", libc::SIGTERM),
        ("STKFLT", libc::SIGSTKFLT),
        ("CHLD", libc::SIGCHLD),
        ("CONT", libc::SIGCONT),
        ("STOP", libc::SIGSTOP),
        ("TSTP", libc::SIGTSTP),
        ("TTIN", libc::SIGTTIN),
        ("TTOU", libc::SIGTTOU),
        ("URG", libc::SIGURG),
        ("XCPU", libc::SIGXCPU),
        ("XFSZ", libc::SIGXFSZ),
        ("VTALRM", libc::SIGVTALRM),
        ("PROF", libc::SIGPROF),
        ("WINCH", libc::SIGWINCH),
        ("IO", libc::SIGIO),
        ("PWR", libc::SIGPWR),
        ("SYS", libc::SIGSYS),
    ];
    table
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, sig)| *sig)
        .with_context(|| format!("unknown signal {s:?}: give a name (TERM, KILL, …) or a number"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals() {
        assert_eq!(parse_signal("KILL").unwrap(), libc::SIGKILL);
        assert_eq!(parse_signal("sigterm").unwrap(), libc::SIGTERM);
        assert_eq!(parse_signal("9").unwrap(), 9);
        assert!(parse_signal("0").is_err());
        assert!(parse_signal("NOPE").is_err());
    }
}
