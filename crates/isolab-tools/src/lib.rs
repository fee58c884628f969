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
//!
//! This crate depends on no other isolab crate.

mod find;
mod run;

pub use find::{find_program, setup_tier, NotInstalled, Program};
pub use run::{
    run_to_exit, tail_lines, Exit, SystemTools, ToolCommand, ToolError, ToolOutput, ToolRunner,
};
