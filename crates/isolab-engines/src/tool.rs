//! Running the engines' programs: one small trait ([`Tools`]) with the real
//! implementation ([`SystemTools`], which runs them through
//! [`isolab_tools::run_to_exit`], the one place that spawns host programs whatever
//! their status) so that drivers can be tested with a fake that records command lines
//! and answers canned output.

use std::path::{Path, PathBuf};

use crate::EngineError;

/// What a finished command produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    /// Exit status (128 + signal when killed).
    pub status: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

/// Runs programs and finds them.
pub trait Tools: Send + Sync {
    /// Runs `argv` to completion with stdin closed, capturing both outputs.
    fn run(&self, argv: &[String]) -> std::io::Result<Output>;

    /// The program's path when it is installed (a name is looked up by
    /// [`isolab_tools::find_program`]: `PATH`, then the sbin and bin directories).
    fn which(&self, program: &str) -> Option<PathBuf>;
}

/// The real [`Tools`]: this host's programs.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemTools;

impl Tools for SystemTools {
    fn run(&self, argv: &[String]) -> std::io::Result<Output> {
        let exit = isolab_tools::run_to_exit(argv)?;
        Ok(Output {
            status: exit.status,
            stdout: String::from_utf8_lossy(&exit.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&exit.stderr).into_owned(),
        })
    }

    fn which(&self, program: &str) -> Option<PathBuf> {
        isolab_tools::find_program(program)
    }
}

/// The path of `program`, or [`EngineError::Missing`] naming the Debian `package`.
pub fn require(
    tools: &dyn Tools,
    engine: &'static str,
    program: &str,
    package: &'static str,
) -> Result<PathBuf, EngineError> {
    tools.which(program).ok_or_else(|| EngineError::Missing {
        engine,
        missing: isolab_tools::NotInstalled {
            program: program.to_owned(),
            package: package.to_owned(),
        },
    })
}

/// Runs `argv` and returns its standard output, or [`EngineError::Command`] when it
/// cannot start or exits non-zero.
pub fn run_ok(
    tools: &dyn Tools,
    engine: &'static str,
    argv: &[String],
) -> Result<String, EngineError> {
    let command = argv.join(" ");
    match tools.run(argv) {
        Ok(out) if out.status == 0 => Ok(out.stdout),
        Ok(out) => Err(EngineError::Command {
            engine,
            command,
            status: format!("exit status {}", out.status),
            stderr: tail(&out.stderr, 2000),
        }),
        Err(e) => Err(EngineError::Command {
            engine,
            command,
            status: "not started".into(),
            stderr: e.to_string(),
        }),
    }
}

/// Runs `<program> --version` and turns its output into the engine's version with
/// `parse`; output `parse` rejects is [`EngineError::Unexpected`], saying it expected
/// `expected` (e.g. "a version such as 5.0.2").
pub fn version(
    tools: &dyn Tools,
    engine: &'static str,
    program: &Path,
    expected: &str,
    parse: impl FnOnce(&str) -> Option<String>,
) -> Result<String, EngineError> {
    let command = argv([program.to_string_lossy().as_ref(), "--version"]);
    let out = run_ok(tools, engine, &command)?;
    parse(&out).ok_or_else(|| EngineError::Unexpected {
        engine,
        command: command.join(" "),
        detail: format!("expected {expected}, got: {}", tail(&out, 300)),
    })
}

/// The last `max` bytes of `s` (on a character boundary), trimmed.
pub fn tail(s: &str, max: usize) -> String {
    let s = s.trim();
    let mut start = s.len().saturating_sub(max);
    while !s.is_char_boundary(start) {
        start += 1;
    }
    s[start..].to_owned()
}

/// Builds an argv from string slices.
pub fn argv<I, S>(parts: I) -> Vec<String>
where
    I: IntoIterator<Item = S>,
    S: Into<String>,
{
    parts.into_iter().map(Into::into).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failing_command_says_what_and_why() {
        let err = run_ok(
            &SystemTools,
            "docker",
            &argv(["sh", "-c", "echo boom >&2; exit 3"]),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("exit status 3") && err.contains("boom"),
            "{err}"
        );
        assert_eq!(
            run_ok(&SystemTools, "docker", &argv(["echo", "hi"])).unwrap(),
            "hi\n"
        );
    }

    #[test]
    fn a_missing_program_names_its_package() {
        let err = require(&SystemTools, "lxc", "lxc-no-such-program", "lxc").unwrap_err();
        assert!(err.to_string().contains("apt-get install lxc"), "{err}");
        assert!(SystemTools.which("sh").is_some());
    }

    #[test]
    fn versions_are_parsed_or_the_output_is_shown() {
        let tools = crate::fakes::FakeTools::default();
        tools.answer("lxc-start --version", 0, "5.0.2\n");
        let program = Path::new("/usr/bin/lxc-start");
        let parse = |out: &str| Some(format!("lxc {}", out.trim()));
        assert_eq!(
            version(&tools, "lxc", program, "a version", parse).unwrap(),
            "lxc 5.0.2"
        );
        let err = version(&tools, "lxc", program, "a version such as 5.0.2", |_| None)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("`/usr/bin/lxc-start --version`")
                && err.contains("expected a version such as 5.0.2, got: 5.0.2"),
            "{err}"
        );
    }

    #[test]
    fn tails_respect_character_boundaries() {
        assert_eq!(tail("héllo", 4), "llo");
    }
}
