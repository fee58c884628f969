//! `isolab`: measure what an execution platform costs a workload and how well it
//! isolates it from noisy neighbours. See `isolab --help` and the README.

mod cli;
mod commands;
mod host;
mod progress;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    match commands::dispatch(cli) {
        Ok(code) => code.into(),
        Err(err) => {
            eprintln!("error: {err:#}");
            commands::exit_code_of(&err).into()
        }
    }
}
