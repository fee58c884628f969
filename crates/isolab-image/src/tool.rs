//! Running external tools (busybox, mmdebstrap, mkfs.ext4) behind the [`ToolRunner`] trait, so
//! build and pack logic can be tested with a fake that records commands instead of running them.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::ImageError;

/// One invocation of an external tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCommand {
    /// Program name, looked up in `PATH`, then `/usr/sbin` and `/sbin` ("mkfs.ext4"), or an absolute path.
    pub program: String,
    /// The Debian package to install when the program is missing ("e2fsprogs").
    pub package: String,
    /// Arguments.
    pub args: Vec<OsString>,
    /// Extra environment variables.
    pub env: Vec<(OsString, OsString)>,
}

impl ToolCommand {
    /// A command for `program`, provided by the Debian package `package`.
    pub fn new(program: impl Into<String>, package: impl Into<String>) -> Self {
        ToolCommand {
            program: program.into(),
            package: package.into(),
            args: Vec::new(),
            env: Vec::new(),
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

    /// The command line for messages, arguments quoted where needed.
    pub fn display(&self) -> String {
        let mut s = self.program.clone();
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

/// What a tool printed; a failed exit has already been turned into [`ImageError::ToolFailed`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolOutput {
    /// Standard output.
    pub stdout: Vec<u8>,
    /// Standard error.
    pub stderr: Vec<u8>,
}

/// Runs external tools. [`SystemTools`] is the real one; tests pass fakes.
pub trait ToolRunner {
    /// Run `cmd` to completion; a missing program, a spawn error or a non-zero exit is an error.
    fn run(&self, cmd: &ToolCommand) -> Result<ToolOutput, ImageError>;
}

/// The real [`ToolRunner`]: spawns programs on this host and captures their output.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemTools;

/// Directories searched after `PATH`: root's tools (mkfs.ext4, chroot) live there and a
/// non-root `PATH` often lacks them.
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
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// The last `n` non-empty lines of `bytes`, for error messages.
pub(crate) fn tail_lines(bytes: &[u8], n: usize) -> String {
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

impl ToolRunner for SystemTools {
    fn run(&self, cmd: &ToolCommand) -> Result<ToolOutput, ImageError> {
        let path = find_program(&cmd.program).ok_or_else(|| ImageError::ToolMissing {
            tool: cmd.program.clone(),
            package: cmd.package.clone(),
        })?;
        let out = Command::new(&path)
            .args(&cmd.args)
            .envs(cmd.env.iter().map(|(k, v)| (k, v)))
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|source| ImageError::ToolSpawn {
                tool: cmd.program.clone(),
                path: path.clone(),
                source,
            })?;
        if !out.status.success() {
            let mut tail = tail_lines(&out.stderr, 20);
            if tail.is_empty() {
                tail = tail_lines(&out.stdout, 20);
            }
            return Err(ImageError::ToolFailed {
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

#[cfg(test)]
mod tests {
    use super::*;

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
    }

    #[test]
    fn missing_tool_names_the_package() {
        let err = SystemTools
            .run(&ToolCommand::new("isolab-no-such-tool", "isolab-pkg"))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "isolab-no-such-tool not found in PATH, /usr/sbin or /sbin: apt-get install isolab-pkg"
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
}
