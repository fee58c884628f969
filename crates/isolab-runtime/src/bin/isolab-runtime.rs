//! `isolab-runtime`: run a command in a container (`run`), print the OCI spec of a
//! configuration (`spec`), remove what killed runtimes left (`gc`), and the OCI
//! runtime operations engines call (`create`, `start`, `state`, `kill`, `delete`,
//! `list`, `ps`).
//!
//! Exit status: the container's (its command's code, or 128 + signal); 125 when
//! the runtime itself fails. `run --report FILE` also writes the outcome as JSON
//! ([`isolab_runtime::Report`]), in both cases.

// The test harness brings its own main.
#![cfg_attr(not(test), no_main)]

#[path = "isolab-runtime/args.rs"]
mod args;
#[path = "isolab-runtime/fast.rs"]
mod fast;
#[path = "isolab-runtime/oci_cli.rs"]
mod oci_cli;

use clap::Parser;

/// Exit status when the runtime fails (before or around the container).
const RUNTIME_FAILURE: libc::c_int = 125;

/// The C entry point, without Rust's runtime start (`#![no_main]`): that start
/// finds the main thread's stack guard by reading and `sscanf`-parsing
/// /proc/self/maps (glibc's `pthread_getattr_np`) and installs a stack-overflow
/// handler with an alternate signal stack, some 17 system calls before `main`, on
/// every container start. What of it matters here is done by hand: SIGPIPE ignored
/// (a write to a closed pipe fails with `EPIPE` instead of killing the runtime in
/// the middle of a teardown), a panic reported and turned into exit status 101
/// after unwinding (so the teardown guards run), standard output flushed at exit.
/// The arguments come from `std::env::args_os`, which glibc hands to std before
/// `main` runs.
#[cfg(not(test))]
#[no_mangle]
pub extern "C" fn main(_argc: libc::c_int, _argv: *const *const libc::c_char) -> libc::c_int {
    // SAFETY: installing SIG_IGN for SIGPIPE, as std's runtime start does.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    // 101, as std's runtime start exits after a panic (the hook printed it).
    let code = std::panic::catch_unwind(run).unwrap_or(101);
    let _ = std::io::Write::flush(&mut std::io::stdout());
    code
}

#[cfg(not(test))]
fn run() -> libc::c_int {
    real_main().unwrap_or_else(|status| status)
}

#[cfg_attr(test, allow(dead_code))]
fn real_main() -> Result<libc::c_int, libc::c_int> {
    let started = isolab_runtime::trace::monotonic_now_ns();
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let cli = fast::parse(&argv).unwrap_or_else(|| args::Cli::parse_from(argv));
    let log = (cli.global.log.clone(), cli.global.log_format);
    match args::dispatch(cli, started) {
        Ok(status) => Ok(status.clamp(0, 255)),
        Err(e) => {
            let message = args::chain(&e);
            eprintln!("isolab-runtime: error: {message}");
            oci_cli::log_error(log.0.as_deref(), log.1, &message);
            Err(RUNTIME_FAILURE)
        }
    }
}
