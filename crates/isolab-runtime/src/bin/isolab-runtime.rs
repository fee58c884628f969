//! `isolab-runtime`: run a command in a container (`run`), print the OCI spec of a
//! configuration (`spec`), remove what killed runtimes left (`gc`).
//!
//! Exit status: the container's (its command's code, or 128 + signal); 125 when
//! the runtime itself fails.

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
            eprintln!("isolab-runtime: error: {}", chain(&e));
            ExitCode::from(RUNTIME_FAILURE)
        }
    }
}

/// The error and its causes, skipping a cause already spelled out by the message
/// before it (library errors include their source in their message).
fn chain(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if !out.contains(&text) {
            if !out.is_empty() {
                out.push_str(": ");
            }
            out.push_str(&text);
        }
    }
    out
}
