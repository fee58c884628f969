//! `isolab completions SHELL` and `isolab man`: shell completions and manual pages, both
//! generated from the one clap definition in `cli.rs` (as ripgrep and hyperfine do), so
//! they never disagree with `--help`.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use clap::CommandFactory;

use super::Exit;
use crate::cli::Cli;

/// Prints the completion script of `shell`.
pub fn completions(shell: clap_complete::Shell) -> Result<Exit> {
    let mut command = Cli::command();
    clap_complete::generate(shell, &mut command, "isolab", &mut std::io::stdout());
    Ok(Exit::Success)
}

/// Prints isolab.1, or writes it and one page per subcommand (isolab-run.1, …) into `dir`.
pub fn man(dir: Option<&Path>) -> Result<Exit> {
    let command = Cli::command();
    match dir {
        None => {
            let mut out = std::io::stdout().lock();
            clap_mangen::Man::new(command)
                .render(&mut out)
                .context("cannot write the manual page")?;
            out.flush().context("cannot write the manual page")?;
        }
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            clap_mangen::generate_to(command, dir)
                .with_context(|| format!("cannot write the manual pages into {}", dir.display()))?;
        }
    }
    Ok(Exit::Success)
}
