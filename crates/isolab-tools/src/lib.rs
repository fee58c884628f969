//! isolab's host programs: the one place that finds them, runs them and says what to
//! install when one is missing.
//!
//! isolab drives many programs of the host: `mmdebstrap` and `mkfs.ext4` build images,
//! `apt-get`, `dpkg-deb` and `qemu-img` prepare VMs, `docker`, `crun` or `lxc-start` run
//! containers. Every crate finds them with [`find_program`]; image and VM preparation also
//! run them through [`ToolRunner`]:
//!
//! - [`find_program`]: a program's path, looked up as a shell would on `PATH`, then in
//!   `/usr/sbin`, `/sbin`, `/usr/bin` and `/bin` (root's tools live there and a non-root
//!   `PATH` often lacks them).
//! - [`Program`]: a program and the Debian package that provides it. [`Program::find`]
//!   fails with [`NotInstalled`], whose message names the package to install (or the
//!   `cargo install …` command of a program Debian does not ship, such as youki).
//! - [`ToolCommand`], run by a [`ToolRunner`] ([`SystemTools`] is the real one): a program
//!   with its arguments, run to completion with its output captured; a missing program, a
//!   failed start or a non-zero exit is a [`ToolError`] naming the command and ending with
//!   the last lines it printed. Code that runs tools takes a `&dyn ToolRunner`, so its tests
//!   pass a fake that records command lines and answers canned output.
//! - [`shell_quote`]: a word quoted for a POSIX shell, for the scripts isolab hands to
//!   `sh -c` (in a guest, a Slurm batch script, copies of a workload in one instance).
//!
//! This crate depends on no other isolab crate.

mod find;
mod run;

pub use find::{find_program, setup_tier, NotInstalled, Program};
pub use run::{
    run_to_exit, tail_lines, Exit, SystemTools, ToolCommand, ToolError, ToolOutput, ToolRunner,
};

/// `word` quoted for a POSIX shell: `'…'` with each `'` written as `'\''`.
pub fn shell_quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', "'\\''"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_quoted_word_survives_the_shell() {
        assert_eq!(super::shell_quote("it's a $HOME"), "'it'\\''s a $HOME'");
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!(
                "printf %s {}",
                super::shell_quote("it's a $HOME \"x\"")
            ))
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "it's a $HOME \"x\"");
    }
}
