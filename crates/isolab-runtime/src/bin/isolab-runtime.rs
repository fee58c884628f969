//! `isolab-runtime`: run a command in a container (`run`), print the OCI spec of a
//! configuration (`spec`), remove what killed runtimes left (`gc`), and the OCI
//! runtime operations engines call (`create`, `start`, `state`, `kill`, `delete`,
//! `list`, `ps`).
//!
//! Exit status: the container's (its command's code, or 128 + signal); 125 when
//! the runtime itself fails. `run --report FILE` also writes the outcome as JSON
//! ([`isolab_runtime::Report`]), in both cases.

#[path = "isolab-runtime/args.rs"]
mod args;
#[path = "isolab-runtime/fast.rs"]
mod fast;
#[path = "isolab-runtime/oci_cli.rs"]
mod oci_cli;

use std::process::ExitCode;

use clap::Parser;

/// Exit status when the runtime fails (before or around the container).
const RUNTIME_FAILURE: u8 = 125;

fn main() -> ExitCode {
    let started = isolab_runtime::trace::monotonic_now_ns();
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let cli = fast::parse(&argv).unwrap_or_else(|| args::Cli::parse_from(argv));
    let log = (cli.global.log.clone(), cli.global.log_format);
    match args::dispatch(cli, started) {
        Ok(status) => ExitCode::from(status.clamp(0, 255) as u8),
        Err(e) => {
            let message = args::chain(&e);
            eprintln!("isolab-runtime: error: {message}");
            oci_cli::log_error(log.0.as_deref(), log.1, &message);
            ExitCode::from(RUNTIME_FAILURE)
        }
    }
}
