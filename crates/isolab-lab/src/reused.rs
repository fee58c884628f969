//! Helper threads that outlive the job they run: each run's host sampler, latency probe
//! and working directory's removal run on a thread of this pool instead of a thread
//! spawned for the run and joined after it. Spawning and joining cost each run about 100 µs here (the thread's stack
//! mapped and its guard page set, its signal stack, its exit and unmapping); handing a
//! job to a waiting thread costs one wake-up.
//!
//! A job runs as it would on a thread of its own: named for it (`PR_SET_NAME`), its
//! panic caught and returned by [`Handle::join`] as [`std::thread::JoinHandle::join`]
//! returns it. A job that changes its thread's scheduling sets it again at its start, as
//! the probe does; nothing else of a job is left on the thread for the next one.

use std::any::Any;
use std::panic::AssertUnwindSafe;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Mutex;

/// What a job of the pool runs: the caller's work, then `ready` (the thread offers
/// itself for the next job), then its result sent back.
type Job = Box<dyn FnOnce(&mut dyn FnMut()) + Send>;

/// A job and the name its thread takes while it runs.
struct Named {
    name: &'static std::ffi::CStr,
    job: Job,
}

/// The threads waiting for a job: how to hand one to each.
static IDLE: Mutex<Vec<Sender<Named>>> = Mutex::new(Vec::new());

/// A job handed to the pool; [`Handle::join`] waits for its result.
pub struct Handle<T> {
    result: Receiver<std::thread::Result<T>>,
}

impl<T> Handle<T> {
    /// Waits for the job to end: its value, or its panic's payload.
    pub fn join(self) -> std::thread::Result<T> {
        self.result.recv().unwrap_or_else(|_| {
            let lost: Box<dyn Any + Send> = Box::new("the helper thread ended before its job");
            Err(lost)
        })
    }
}

/// Runs `f` on a waiting thread of the pool, or on a new one (named `name` while it
/// runs, as `std::thread::Builder::name` would; the kernel keeps 15 bytes of it).
pub fn spawn<T: Send + 'static>(
    name: &'static std::ffi::CStr,
    f: impl FnOnce() -> T + Send + 'static,
) -> std::io::Result<Handle<T>> {
    let (tx, rx) = channel();
    let mut job = Named {
        name,
        job: Box::new(move |ready: &mut dyn FnMut()| {
            let result = std::panic::catch_unwind(AssertUnwindSafe(f));
            ready();
            // The caller may have stopped waiting (dropped its handle): nothing to do.
            let _ = tx.send(result);
        }),
    };
    loop {
        let idle = IDLE.lock().unwrap_or_else(|e| e.into_inner()).pop();
        let Some(worker) = idle else { break };
        match worker.send(job) {
            Ok(()) => return Ok(Handle { result: rx }),
            // That thread is gone (it cannot be, but then the next one takes it).
            Err(std::sync::mpsc::SendError(back)) => job = back,
        }
    }
    let (to_worker, jobs) = channel::<Named>();
    to_worker
        .send(job)
        .unwrap_or_else(|_| unreachable!("the receiver is alive"));
    std::thread::Builder::new()
        .name(name.to_string_lossy().into_owned())
        .spawn(move || work(&jobs, &to_worker))?;
    Ok(Handle { result: rx })
}

/// A thread of the pool: runs each job it is handed, and offers itself again before it
/// sends the job's result, so that the caller's next job finds it waiting.
fn work(jobs: &Receiver<Named>, me: &Sender<Named>) {
    while let Ok(Named { name, job }) = jobs.recv() {
        // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes (the
        // kernel copies 15 and terminates it); `name` is a valid C string.
        unsafe { libc::prctl(libc::PR_SET_NAME, name.as_ptr()) };
        job(&mut || {
            IDLE.lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(me.clone())
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_job_runs_returns_its_value_and_its_thread_is_used_again() {
        assert_eq!(name_of_job(c"isolab-test"), "isolab-test");
        // The thread offered itself before the result came back: the next job runs
        // on a waiting thread, under its own name.
        assert_eq!(name_of_job(c"isolab-other"), "isolab-other");
    }

    #[test]
    fn a_panic_is_returned_to_the_caller_and_the_pool_goes_on() {
        let err = spawn(c"isolab-test", || -> u32 { panic!("boom") })
            .unwrap()
            .join()
            .unwrap_err();
        assert_eq!(err.downcast_ref::<&str>(), Some(&"boom"));
        let v = spawn(c"isolab-test", || 7).unwrap().join().unwrap();
        assert_eq!(v, 7);
    }

    #[test]
    fn jobs_at_the_same_time_get_threads_of_their_own() {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let blocked = spawn(c"isolab-test", move || {
            rx.recv_timeout(Duration::from_secs(10)).is_ok()
        })
        .unwrap();
        // The first job waits for the second: both must run at once.
        let second = spawn(c"isolab-test", move || tx.send(()).is_ok()).unwrap();
        assert!(second.join().unwrap());
        assert!(blocked.join().unwrap());
    }

    /// The name of the thread a job ran on, as the kernel shows it.
    fn name_of_job(name: &'static std::ffi::CStr) -> String {
        spawn(name, thread_name).unwrap().join().unwrap()
    }

    fn thread_name() -> String {
        std::fs::read_to_string("/proc/thread-self/comm")
            .unwrap_or_default()
            .trim_end()
            .to_owned()
    }
}
