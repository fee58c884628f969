//! Where a run's harness time goes. With `ISOLAB_PHASES=FILE` in isolab's environment,
//! each run appends, from the runner's thread, one line `PHASE<TAB>MICROSECONDS` per step
//! it passes (the time since the run began), ending with `end`; `scripts/bench-harness.sh`
//! turns them into the median time of each step. Unset (the default), a mark costs one
//! check of a value read once.
//!
//! The steps, in the order a host run passes them: `storage` (working directory and
//! storage level), `jobs`, `neighbours`, `scope`, `probe_start`, `cgroup_create`,
//! `limit` (applied and read back; a workload's server started), `sampler_start`,
//! `launch` (log files, the cgroup's descriptors), `prepare` (argv, the program found,
//! pipes), `clone` (the child started in the cgroup, sharing the runner's memory until
//! it execs, a counted one's perf counters opened by itself, its `execve` done), `exec`
//! (that confirmed), `started`, `wait` (the command itself), `perf_read`, `stats` (the
//! cgroup's counters), `sampler_finish` (its last reading, taken meanwhile), `body`,
//! `cgroup_remove`, `probe_finish`, `execute_jobs`, `executed`, `finished`, `stored`
//! (the run's transaction, while a helper thread removes the working directory),
//! `workdir_removed` (waiting for that removal) and `end`. Other platforms pass a subset; a step passed more than once in a
//! run (every process the runner's thread starts passes `launch` … `exec`: a server, a
//! neighbour) is one line each time.

use std::cell::Cell;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

/// The environment variable that names the file the marks go to.
pub const ENV: &str = "ISOLAB_PHASES";

static SINK: OnceLock<Option<Mutex<BufWriter<File>>>> = OnceLock::new();

thread_local! {
    static BEGAN: Cell<Option<Instant>> = const { Cell::new(None) };
}

fn sink() -> Option<&'static Mutex<BufWriter<File>>> {
    SINK.get_or_init(|| {
        let path = std::env::var_os(ENV)?;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .ok()?;
        Some(Mutex::new(BufWriter::new(file)))
    })
    .as_ref()
}

/// A run begins on this thread: later marks count from now.
pub fn begin() {
    if sink().is_some() {
        BEGAN.with(|b| b.set(Some(Instant::now())));
    }
}

/// This thread's run passed `phase`; `end` also writes the run's lines out.
pub fn mark(phase: &'static str) {
    let Some(sink) = sink() else {
        return;
    };
    let Some(began) = BEGAN.with(Cell::get) else {
        return;
    };
    let micros = began.elapsed().as_micros();
    if let Ok(mut w) = sink.lock() {
        let _ = writeln!(w, "{phase}\t{micros}");
        if phase == "end" {
            let _ = w.flush();
            BEGAN.with(|b| b.set(None));
        }
    }
}
