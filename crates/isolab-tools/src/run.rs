//! Running a host program to completion with its output captured, behind the [`ToolRunner`]
//! trait so that code running tools is tested with a fake that records the command lines.

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::find::{NotInstalled, Program};

/// How many lines of a failed program's output its error keeps.
const FAILURE_LINES: usize = 20;

/// One invocation of a host program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCommand {
    /// The program (looked up by [`crate::find_program`]) and the Debian package providing it.
    pub program: Program,
    /// Arguments.
    pub args: Vec<OsString>,
    /// Extra environment variables.
    pub env: Vec<(OsString, OsString)>,
    /// Working directory (`apt-get download` writes into it); the caller's when `None`.
    pub cwd: Option<PathBuf>,
    /// Write standard output to this file instead of capturing it (decompressed kernels).
    pub stdout_file: Option<PathBuf>,
}

impl ToolCommand {
    /// A command for `program`, provided by the Debian package `package`.
    pub fn new(program: impl Into<String>, package: impl Into<String>) -> Self {
        ToolCommand {
            program: Program::new(program, package),
            args: Vec::new(),
            env: Vec::new(),
            cwd: None,
            stdout_file: None,
        }
    }

    /// Append one argument.
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.args.push(arg.as_ref().to_os_string());
        self
    }

    /// Set one environment variable.
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.env
            .push((key.as_ref().to_os_string(), value.as_ref().to_os_string()));
        self
    }

    /// Run in `dir`.
    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cwd = Some(dir.into());
        self
    }

    /// Send standard output to `file`.
    pub fn stdout_to(mut self, file: impl Into<PathBuf>) -> Self {
        self.stdout_file = Some(file.into());
        self
    }

    /// The command line for messages, arguments quoted where a shell would split them.
    pub fn display(&self) -> String {
        let mut s = self.program.name.clone();
        for a in &self.args {
            let a = a.to_string_lossy();
            s.push(' ');
            if a.is_empty()
                || a.contains(|c: char| c.is_whitespace() || "'\"$\\*?;&|<>(){}".contains(c))
            {
                s.push('\'');
                s.push_str(&a.replace('\'', "'\\''"));
                s.push('\'');
            } else {
                s.push_str(&a);
            }
        }
        s
    }
}

/// What a program printed; a failed exit has already been turned into [`ToolError::Failed`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolOutput {
    /// Standard output (empty when it was sent to a file).
    pub stdout: Vec<u8>,
    /// Standard error.
    pub stderr: Vec<u8>,
}

/// Why a host program did not run to success.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// The program is not installed.
    #[error(transparent)]
    NotInstalled(#[from] NotInstalled),
    /// The program could not be started.
    #[error("cannot start {program} ({path}): {source}")]
    Spawn {
        /// The program's name.
        program: String,
        /// Its resolved path.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The file for the program's standard output could not be created.
    #[error("cannot create {path} for the output of {program}: {source}")]
    StdoutFile {
        /// The program's name.
        program: String,
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The program ran and failed.
    #[error("`{command}` failed ({status}); its last output lines:\n{stderr}")]
    Failed {
        /// The command line, quoted for display.
        command: String,
        /// Its exit status as text ("exit status: 1", "signal: 9 (SIGKILL)").
        status: String,
        /// The last lines of its standard error (or, when that is empty, its output).
        stderr: String,
    },
}

/// Runs host programs. [`SystemTools`] is the real one; tests pass fakes.
pub trait ToolRunner {
    /// Run `cmd` to completion with standard input closed; a missing program, a spawn error
    /// or a non-zero exit is an error.
    fn run(&self, cmd: &ToolCommand) -> Result<ToolOutput, ToolError>;
}

/// The real [`ToolRunner`]: spawns programs on this host and captures their output.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemTools;

impl ToolRunner for SystemTools {
    fn run(&self, cmd: &ToolCommand) -> Result<ToolOutput, ToolError> {
        let path = cmd.program.find()?;
        let mut command = Command::new(&path);
        command
            .args(&cmd.args)
            .envs(cmd.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null());
        if let Some(dir) = &cmd.cwd {
            command.current_dir(dir);
        }
        if let Some(file) = &cmd.stdout_file {
            let f = std::fs::File::create(file).map_err(|source| ToolError::StdoutFile {
                program: cmd.program.name.clone(),
                path: file.clone(),
                source,
            })?;
            command.stdout(f);
        }
        let out = command.output().map_err(|source| ToolError::Spawn {
            program: cmd.program.name.clone(),
            path: path.clone(),
            source,
        })?;
        if !out.status.success() {
            let mut tail = tail_lines(&out.stderr, FAILURE_LINES);
            if tail.is_empty() {
                tail = tail_lines(&out.stdout, FAILURE_LINES);
            }
            return Err(ToolError::Failed {
                command: cmd.display(),
                status: out.status.to_string(),
                stderr: tail,
            });
        }
        Ok(ToolOutput {
            stdout: out.stdout,
            stderr: out.stderr,
        })
    }
}

/// How a program run to its exit ended ([`run_to_exit`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exit {
    /// Its exit status, or 128 + the signal that killed it.
    pub status: i32,
    /// Its standard output.
    pub stdout: Vec<u8>,
    /// Its standard error.
    pub stderr: Vec<u8>,
}

/// Runs `argv` (a program, looked up in `PATH`, and its arguments) to its exit with
/// standard input closed, capturing both outputs, whatever its status: for callers
/// that read a non-zero status as an answer (an engine's `inspect`, a `--version`
/// that exits 1). Only a program that cannot be started is an error.
pub fn run_to_exit(argv: &[String]) -> std::io::Result<Exit> {
    let (program, args) = argv.split_first().ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "empty command line")
    })?;
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()?;
    use std::os::unix::process::ExitStatusExt;
    let status = out
        .status
        .code()
        .unwrap_or_else(|| 128 + out.status.signal().unwrap_or(0));
    Ok(Exit {
        status,
        stdout: out.stdout,
        stderr: out.stderr,
    })
}

/// The last `n` non-empty lines of `bytes`, for error messages.
pub fn tail_lines(bytes: &[u8], n: usize) -> String {
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_to_exit_reports_any_status_and_a_missing_program_is_an_error() {
        let argv = |words: &[&str]| words.iter().map(|w| w.to_string()).collect::<Vec<_>>();
        let ok = run_to_exit(&argv(&["sh", "-c", "echo out; echo err >&2; exit 3"])).unwrap();
        assert_eq!(ok.status, 3);
        assert_eq!(ok.stdout, b"out\n");
        assert_eq!(ok.stderr, b"err\n");
        let killed = run_to_exit(&argv(&["sh", "-c", "kill -TERM $$"])).unwrap();
        assert_eq!(killed.status, 128 + 15);
        assert!(run_to_exit(&argv(&["isolab-no-such-program"])).is_err());
        assert!(run_to_exit(&[]).is_err());
    }

    #[test]
    fn display_quotes_what_a_shell_would_split() {
        let c = ToolCommand::new("mmdebstrap", "mmdebstrap")
            .arg("--variant=apt")
            .arg("deb http://x bookworm main")
            .arg("it's");
        assert_eq!(
            c.display(),
            "mmdebstrap --variant=apt 'deb http://x bookworm main' 'it'\\''s'"
        );
        let c = ToolCommand::new("apt-get", "apt")
            .arg("download")
            .arg("a b")
            .arg("it's");
        assert_eq!(c.display(), "apt-get download 'a b' 'it'\\''s'");
    }

    #[test]
    fn missing_tool_names_the_package() {
        let err = SystemTools
            .run(&ToolCommand::new("isolab-no-such-tool", "isolab-pkg"))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "`isolab-no-such-tool` is not installed: install the Debian package `isolab-pkg` \
             (`apt-get install isolab-pkg`) or run scripts/setup.sh"
        );
    }

    #[test]
    fn failure_carries_status_and_stderr_tail() {
        let err = SystemTools
            .run(
                &ToolCommand::new("sh", "dash")
                    .arg("-c")
                    .arg("echo one >&2; echo two >&2; exit 3"),
            )
            .unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("exit status: 3"), "{msg}");
        assert!(msg.ends_with("one\ntwo"), "{msg}");
        let ok = SystemTools
            .run(
                &ToolCommand::new("sh", "dash")
                    .arg("-c")
                    .arg("echo $X")
                    .env("X", "y"),
            )
            .unwrap();
        assert_eq!(ok.stdout, b"y\n");
        assert_eq!(tail_lines(b"a\n\nb\nc\n", 2), "b\nc");
    }

    #[test]
    fn system_runner_reports_missing_and_output_in_a_directory_or_a_file() {
        let e = SystemTools
            .run(&ToolCommand::new("isolab-no-such-tool", "isolab-pkg"))
            .unwrap_err();
        assert!(matches!(e, ToolError::NotInstalled { .. }), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let out = SystemTools
            .run(
                &ToolCommand::new("sh", "dash")
                    .arg("-c")
                    .arg("pwd")
                    .cwd(dir.path()),
            )
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            dir.path().to_str().unwrap()
        );
        let file = dir.path().join("out");
        let out = SystemTools
            .run(
                &ToolCommand::new("echo", "coreutils")
                    .arg("hi")
                    .stdout_to(&file),
            )
            .unwrap();
        assert!(out.stdout.is_empty());
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "hi\n");
        assert_eq!(tail_lines(b"a\n\nb\nc\n", 2), "b\nc");
    }
}
