//! Host programs (apt-cache, apt-get, dpkg-deb, xz, qemu-img, mkfs.ext4, qemu --version) behind the
//! [`CommandRunner`] trait, so that the preparation logic is tested with a fake that records the
//! commands and answers with canned output.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::error::VmError;

/// One invocation of a host program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostCommand {
    /// Program name (looked up in `PATH`, then the sbin directories) or an absolute path.
    pub program: String,
    /// The Debian package providing it, named in the error when it is missing.
    pub package: String,
    /// Arguments.
    pub args: Vec<OsString>,
    /// Working directory (apt-get download writes into it).
    pub cwd: Option<PathBuf>,
    /// Write standard output to this file instead of capturing it (decompressed kernels).
    pub stdout_file: Option<PathBuf>,
}

impl HostCommand {
    /// `program`, provided by Debian package `package`.
    pub fn new(program: impl Into<String>, package: impl Into<String>) -> Self {
        HostCommand {
            program: program.into(),
            package: package.into(),
            args: Vec::new(),
            cwd: None,
            stdout_file: None,
        }
    }

    /// Append an argument.
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.args.push(arg.as_ref().to_os_string());
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
        let mut s = self.program.clone();
        for a in &self.args {
            s.push(' ');
            s.push_str(&shell_quote_display(&a.to_string_lossy()));
        }
        s
    }
}

fn shell_quote_display(a: &str) -> String {
    if a.is_empty() || a.contains(|c: char| c.is_whitespace() || "'\"$\\*?;&|<>(){}".contains(c)) {
        format!("'{}'", a.replace('\'', "'\\''"))
    } else {
        a.to_owned()
    }
}

/// Runs host programs to completion. [`SystemRunner`] is the real one; tests pass fakes.
pub trait CommandRunner {
    /// Run `cmd`; returns its standard output (empty when sent to a file). A missing program, a
    /// spawn error or a non-zero exit is an error carrying the tail of its standard error.
    fn run(&self, cmd: &HostCommand) -> Result<Vec<u8>, VmError>;
}

/// The real [`CommandRunner`].
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemRunner;

const SBIN_DIRS: [&str; 4] = ["/usr/sbin", "/sbin", "/usr/bin", "/bin"];

/// Find `program` like a shell would, then in the sbin directories.
pub fn find_program(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        let p = PathBuf::from(program);
        return is_executable(&p).then_some(p);
    }
    let path_var = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path_var)
        .chain(SBIN_DIRS.iter().map(PathBuf::from))
        .map(|d| d.join(program))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The last `n` non-empty lines of `bytes`, for error messages.
pub(crate) fn tail_lines(bytes: &[u8], n: usize) -> String {
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

impl CommandRunner for SystemRunner {
    fn run(&self, cmd: &HostCommand) -> Result<Vec<u8>, VmError> {
        let path = find_program(&cmd.program).ok_or_else(|| VmError::ToolMissing {
            program: cmd.program.clone(),
            package: cmd.package.clone(),
        })?;
        let mut command = Command::new(&path);
        command.args(&cmd.args).stdin(Stdio::null());
        if let Some(dir) = &cmd.cwd {
            command.current_dir(dir);
        }
        if let Some(file) = &cmd.stdout_file {
            let f = std::fs::File::create(file).map_err(|e| VmError::io("create", file, e))?;
            command.stdout(f);
        }
        let out = command.output().map_err(|source| VmError::ToolSpawn {
            program: cmd.program.clone(),
            path: path.clone(),
            source,
        })?;
        if !out.status.success() {
            let mut tail = tail_lines(&out.stderr, 20);
            if tail.is_empty() {
                tail = tail_lines(&out.stdout, 20);
            }
            return Err(VmError::ToolFailed {
                command: cmd.display(),
                status: out.status.to_string(),
                stderr: tail,
            });
        }
        Ok(out.stdout)
    }
}

#[cfg(test)]
pub(crate) mod fake {
    //! A [`CommandRunner`] that records commands and answers from a script.

    use std::cell::RefCell;

    use super::*;

    /// Answers each command whose display starts with a prefix; records every command.
    #[derive(Default)]
    pub(crate) struct FakeRunner {
        pub(crate) answers: Vec<(String, Result<Vec<u8>, String>)>,
        pub(crate) log: RefCell<Vec<String>>,
    }

    impl FakeRunner {
        pub(crate) fn answer(mut self, prefix: &str, out: &str) -> Self {
            self.answers
                .push((prefix.to_owned(), Ok(out.as_bytes().to_vec())));
            self
        }

        pub(crate) fn fail(mut self, prefix: &str, stderr: &str) -> Self {
            self.answers
                .push((prefix.to_owned(), Err(stderr.to_owned())));
            self
        }
    }

    impl CommandRunner for FakeRunner {
        fn run(&self, cmd: &HostCommand) -> Result<Vec<u8>, VmError> {
            let line = cmd.display();
            self.log.borrow_mut().push(line.clone());
            for (prefix, answer) in &self.answers {
                if line.starts_with(prefix.as_str()) {
                    return match answer {
                        Ok(out) => Ok(out.clone()),
                        Err(stderr) => Err(VmError::ToolFailed {
                            command: line,
                            status: "exit status: 100".into(),
                            stderr: stderr.clone(),
                        }),
                    };
                }
            }
            Err(VmError::ToolMissing {
                program: cmd.program.clone(),
                package: cmd.package.clone(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_quotes() {
        let c = HostCommand::new("apt-get", "apt")
            .arg("download")
            .arg("a b")
            .arg("it's");
        assert_eq!(c.display(), "apt-get download 'a b' 'it'\\''s'");
    }

    #[test]
    fn system_runner_reports_missing_failed_and_output() {
        let e = SystemRunner
            .run(&HostCommand::new("isolab-no-such-tool", "isolab-pkg"))
            .unwrap_err();
        assert!(matches!(e, VmError::ToolMissing { .. }), "{e}");
        let e = SystemRunner
            .run(
                &HostCommand::new("sh", "dash")
                    .arg("-c")
                    .arg("echo oops >&2; exit 3"),
            )
            .unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("exit status: 3") && msg.ends_with("oops"),
            "{msg}"
        );
        let dir = tempfile::tempdir().unwrap();
        let out = SystemRunner
            .run(
                &HostCommand::new("sh", "dash")
                    .arg("-c")
                    .arg("pwd")
                    .cwd(dir.path()),
            )
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out).trim(),
            dir.path().to_str().unwrap()
        );
        let file = dir.path().join("out");
        let out = SystemRunner
            .run(
                &HostCommand::new("echo", "coreutils")
                    .arg("hi")
                    .stdout_to(&file),
            )
            .unwrap();
        assert!(out.is_empty());
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "hi\n");
        assert_eq!(tail_lines(b"a\n\nb\nc\n", 2), "b\nc");
    }
}
