//! `isolab-runtime`: run a command in a container (`run`), print the OCI spec of a
//! configuration (`spec`), remove what killed runtimes left (`gc`).
//!
//! Exit status: the container's (its command's code, or 128 + signal); 125 when
//! the runtime itself fails. `run --report FILE` also writes the outcome as JSON
//! ([`isolab_runtime::Report`]), in both cases.

#[path = "isolab-runtime/args.rs"]
mod args;

use std::process::ExitCode;

use clap::Parser;

/// Exit status when the runtime fails (before or around the container).
const RUNTIME_FAILURE: u8 = 125;

fn main() -> ExitCode {
    let cli = args::Cli::parse();
    match args::dispatch(cli) {
        Ok(status) => ExitCode::from(status.clamp(0, 255) as u8),
        Err(e) => {
            eprintln!("isolab-runtime: error: {}", args::chain(&e));
            ExitCode::from(RUNTIME_FAILURE)
        }
    }
}
