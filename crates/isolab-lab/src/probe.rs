//! Host scheduling-latency probe: keeps the host usable while neighbours "bomb" it.
//!
//! A [`LatencyProbe`] is one thread of isolab itself (so it stays in isolab's own
//! cgroup, outside every experiment cgroup), made an ordinary task (`SCHED_OTHER`,
//! nice 0, allowed on every cpu isolab may use). It wakes up every
//! [`ProbeConfig::interval`] at an absolute `CLOCK_MONOTONIC` deadline and records
//! how late each wake-up was (`actual − deadline`): the scheduling latency an
//! ordinary task on this host sees right now.
//!
//! The wait is a one-shot `timerfd` armed with `TFD_TIMER_ABSTIME` and polled
//! together with an `eventfd`: the same absolute hrtimer deadline as
//! `clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)`, but [`LatencyProbe::finish`]
//! can cut it short instead of waiting for the next tick. (Unlike `clock_nanosleep`,
//! the task's timer slack, 50 µs by default, is not added to the deadline, so the
//! lateness is the wake-up latency alone.)
//!
//! Whether the host is past the point of usability is decided by a
//! [`BreachDetector`], a pure function of the `(time, lateness)` samples (see
//! [`first_breach`]):
//! - **single**: one wake-up later than [`ProbeConfig::threshold`];
//! - **sustained**: over the last [`ProbeConfig::sustained`] of samples, the p99 of
//!   the lateness is above `threshold / 5` ([`SUSTAINED_DIVISOR`]), with at least
//!   [`MIN_LATE_IN_WINDOW`] samples past that limit (one late wake-up alone is the
//!   single rule's business).
//!
//! On the first breach the probe calls its `on_breach` callback once (the lab aborts
//! the current run with it) and keeps measuring. Percentiles come from a fixed-size
//! log-linear histogram (≤ 1.6 % relative error), so memory does not grow with the
//! length of the run.

use std::collections::VecDeque;
use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Duration;

use isolab_store::{Telemetry, TelemetrySet};

/// Shortest accepted probe interval: the probe must stay light.
pub const MIN_INTERVAL: Duration = Duration::from_micros(100);

/// Most samples the sustained window may hold (`sustained / interval`).
pub const MAX_WINDOW_SAMPLES: usize = 100_000;

/// The sustained rule's limit is `threshold / SUSTAINED_DIVISOR`.
pub const SUSTAINED_DIVISOR: u32 = 5;

/// Samples past the sustained limit needed in the window before the sustained rule fires.
pub const MIN_LATE_IN_WINDOW: usize = 2;

/// What the probe measures and when it calls a breach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeConfig {
    /// Time between two wake-ups (10 ms by default).
    pub interval: Duration,
    /// One wake-up later than this is a breach (500 ms by default).
    pub threshold: Duration,
    /// Length of the sliding window of the sustained rule (1 s by default): a breach
    /// when the p99 of the lateness over the window exceeds `threshold / 5`.
    /// `Duration::ZERO` turns the sustained rule off.
    pub sustained: Duration,
}

impl Default for ProbeConfig {
    fn default() -> Self {
        ProbeConfig {
            interval: Duration::from_millis(10),
            threshold: Duration::from_millis(500),
            sustained: Duration::from_secs(1),
        }
    }
}

impl ProbeConfig {
    /// The lateness the sustained rule compares the window's p99 against: `threshold / 5`.
    pub fn sustained_limit(&self) -> Duration {
        self.threshold / SUSTAINED_DIVISOR
    }

    /// Checks that the probe can run with this configuration.
    pub fn validate(&self) -> Result<(), ProbeError> {
        if self.interval < MIN_INTERVAL {
            return Err(ProbeError::IntervalTooShort {
                interval: self.interval,
            });
        }
        if self.threshold.is_zero() {
            return Err(ProbeError::ZeroThreshold);
        }
        let window = self.sustained.as_nanos() / self.interval.as_nanos();
        if window > MAX_WINDOW_SAMPLES as u128 {
            return Err(ProbeError::WindowTooLarge {
                sustained: self.sustained,
                interval: self.interval,
            });
        }
        Ok(())
    }
}

/// Why the probe could not start.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// The interval is below [`MIN_INTERVAL`].
    #[error(
        "latency probe interval {interval:?} is shorter than the minimum {MIN_INTERVAL:?}; \
         use a longer interval (10 ms is the default)"
    )]
    IntervalTooShort {
        /// The interval asked for.
        interval: Duration,
    },
    /// A zero threshold would call every wake-up a breach.
    #[error(
        "latency probe threshold is zero, so every wake-up would abort the run; \
         use a positive threshold (500 ms is the default)"
    )]
    ZeroThreshold,
    /// The sustained window would hold more than [`MAX_WINDOW_SAMPLES`] samples.
    #[error(
        "latency probe window {sustained:?} holds more than {MAX_WINDOW_SAMPLES} samples at \
         interval {interval:?}; shorten the window or lengthen the interval"
    )]
    WindowTooLarge {
        /// The window asked for.
        sustained: Duration,
        /// The interval asked for.
        interval: Duration,
    },
    /// A system call needed to set the probe up failed.
    #[error(
        "could not set up the latency probe: {call} failed: {source}; \
         check the process's open-file limit (ulimit -n)"
    )]
    Syscall {
        /// The system call, e.g. `timerfd_create(CLOCK_MONOTONIC)`.
        call: &'static str,
        /// The error it returned.
        #[source]
        source: io::Error,
    },
    /// The probe thread could not be spawned.
    #[error(
        "could not start the latency probe thread: {source}; check the process's thread limit"
    )]
    Spawn {
        /// The error from the thread builder.
        #[source]
        source: io::Error,
    },
}

/// Which rule a breach broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreachKind {
    /// One wake-up later than the threshold.
    Single,
    /// The window's p99 above `threshold / 5`.
    Sustained,
}

/// The host stopped being usable: what the lab records with the aborted run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Breach {
    /// When, since the probe started.
    pub at: Duration,
    /// The lateness that broke the rule: the wake-up's for [`BreachKind::Single`],
    /// the window's p99 for [`BreachKind::Sustained`].
    pub latency: Duration,
    /// Which rule.
    pub kind: BreachKind,
    /// A sentence for the run's record, with the numbers.
    pub reason: String,
}

impl fmt::Display for Breach {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason)
    }
}

/// The latency-breach decision over a stream of `(time since start, lateness)`
/// samples, without clock or side effect. Latches: reports the first breach only.
#[derive(Debug, Clone)]
pub struct BreachDetector {
    config: ProbeConfig,
    /// Samples of the sustained window, oldest first.
    window: VecDeque<(Duration, Duration)>,
    /// How many samples of the window are past the sustained limit.
    late: usize,
    breached: bool,
}

impl BreachDetector {
    /// A detector with nothing seen yet.
    pub fn new(config: &ProbeConfig) -> Self {
        BreachDetector {
            config: *config,
            window: VecDeque::new(),
            late: 0,
            breached: false,
        }
    }

    /// Whether a breach was already reported.
    pub fn breached(&self) -> bool {
        self.breached
    }

    /// Feeds one sample; returns the breach it causes, if it is the first one.
    ///
    /// Single rule: `lateness > threshold`. Sustained rule (when `sustained > 0`):
    /// the window holds the samples of `(at − sustained, at]`, the probe has run for
    /// at least `sustained`, and the window's p99 is above `threshold / 5` with at
    /// least [`MIN_LATE_IN_WINDOW`] samples past it. The p99 is the nearest-rank
    /// percentile (Hyndman & Fan 1996, definition 1: `x_(k)`, `k = ⌈0.99 n⌉`), so
    /// `p99 > L` exactly when more than `n − k` samples exceed `L`; this is checked in
    /// O(1) per sample from a running count.
    pub fn observe(&mut self, at: Duration, lateness: Duration) -> Option<Breach> {
        if self.breached {
            return None;
        }
        if lateness > self.config.threshold {
            self.breached = true;
            return Some(Breach {
                at,
                latency: lateness,
                kind: BreachKind::Single,
                reason: format!(
                    "host scheduling latency: one wake-up was {} late at {:.3} s \
                     (threshold {})",
                    ms(lateness),
                    at.as_secs_f64(),
                    ms(self.config.threshold)
                ),
            });
        }
        let sustained = self.config.sustained;
        if sustained.is_zero() {
            return None;
        }
        let limit = self.config.sustained_limit();
        self.window.push_back((at, lateness));
        if lateness > limit {
            self.late += 1;
        }
        while let Some(&(t, l)) = self.window.front() {
            let too_old = at.saturating_sub(t) >= sustained;
            if !too_old && self.window.len() <= MAX_WINDOW_SAMPLES {
                break;
            }
            self.window.pop_front();
            if l > limit {
                self.late -= 1;
            }
        }
        let n = self.window.len();
        let rank = (99 * n).div_ceil(100);
        if at < sustained || self.late < MIN_LATE_IN_WINDOW || self.late + rank <= n {
            return None;
        }
        let p99 = window_p99(&self.window);
        self.breached = true;
        Some(Breach {
            at,
            latency: p99,
            kind: BreachKind::Sustained,
            reason: format!(
                "host scheduling latency: p99 of wake-up lateness over the last {:.3} s was {} \
                 ({} of {} wake-ups later than {} = threshold {} / {SUSTAINED_DIVISOR})",
                sustained.as_secs_f64(),
                ms(p99),
                self.late,
                n,
                ms(limit),
                ms(self.config.threshold)
            ),
        })
    }
}

/// The first breach in a sequence of `(time since start, lateness)` samples, if any.
pub fn first_breach(
    config: &ProbeConfig,
    samples: impl IntoIterator<Item = (Duration, Duration)>,
) -> Option<Breach> {
    let mut detector = BreachDetector::new(config);
    samples
        .into_iter()
        .find_map(|(at, lateness)| detector.observe(at, lateness))
}

/// Nearest-rank p99 of the window's lateness (Hyndman & Fan 1996, definition 1).
fn window_p99(window: &VecDeque<(Duration, Duration)>) -> Duration {
    let mut values: Vec<Duration> = window.iter().map(|&(_, l)| l).collect();
    if values.is_empty() {
        return Duration::ZERO;
    }
    let k = (99 * values.len()).div_ceil(100).max(1);
    let (_, v, _) = values.select_nth_unstable(k - 1);
    *v
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

/// Sub-buckets per power of two of the histogram (2^6: ≤ 1/64 relative error).
const SUB_BITS: u32 = 6;
const SUB: u64 = 1 << SUB_BITS;
/// Buckets needed to cover every `u64` nanosecond value.
const BUCKETS: usize = ((64 - SUB_BITS as usize) * SUB as usize) + SUB as usize;

/// A log-linear histogram of nanoseconds (HDR-like): values below 128 ns exact, then
/// 64 equal sub-buckets per power of two, so any value is known within 1/64 of
/// itself. Fixed size (3776 counters) whatever the number of samples.
#[derive(Debug, Clone)]
struct Histogram {
    counts: Box<[u64]>,
    total: u64,
    max: u64,
}

impl Histogram {
    fn new() -> Self {
        Histogram {
            counts: vec![0; BUCKETS].into_boxed_slice(),
            total: 0,
            max: 0,
        }
    }

    fn index(v: u64) -> usize {
        if v < 2 * SUB {
            return v as usize;
        }
        let msb = 63 - v.leading_zeros();
        let shift = msb - SUB_BITS;
        (shift as usize) * SUB as usize + (v >> shift) as usize
    }

    /// The largest value that falls into bucket `index`.
    fn highest_in(index: usize) -> u64 {
        let index = index as u64;
        if index < 2 * SUB {
            return index;
        }
        let shift = index / SUB - 1;
        let mantissa = index - shift * SUB;
        (mantissa << shift) + ((1u64 << shift) - 1)
    }

    fn record(&mut self, v: u64) {
        if let Some(c) = self.counts.get_mut(Self::index(v)) {
            *c += 1;
        }
        self.total += 1;
        self.max = self.max.max(v);
    }

    /// Nearest-rank percentile (Hyndman & Fan 1996, definition 1: `x_(k)`,
    /// `k = ⌈p n⌉`), reported as the highest value of its bucket, capped at the
    /// maximum seen. Zero when empty.
    fn percentile(&self, p: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let rank = ((p * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Self::highest_in(i).min(self.max);
            }
        }
        self.max
    }
}

/// What the probe saw over its life.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProbeReport {
    /// Wake-ups measured.
    pub samples: u64,
    /// Median wake-up lateness (within 1/64).
    pub p50: Duration,
    /// 99th percentile of the wake-up lateness (within 1/64).
    pub p99: Duration,
    /// Largest wake-up lateness (exact).
    pub max: Duration,
    /// The first breach, if any.
    pub breach: Option<Breach>,
    /// What did not go as planned but did not stop the probe (e.g. the thread could
    /// not be made nice 0), one sentence each.
    pub warnings: Vec<String>,
}

impl ProbeReport {
    /// Scalars for the run's telemetry: `sched_latency_p50_ms`, `sched_latency_p99_ms`,
    /// `sched_latency_max_ms` (milliseconds, left out when there were no samples) and
    /// `probe_samples`.
    pub fn telemetry(&self) -> TelemetrySet {
        let mut out = TelemetrySet::new();
        if self.samples > 0 {
            let as_ms = |d: Duration| d.as_secs_f64() * 1e3;
            out.push(Telemetry::SchedLatencyP50, as_ms(self.p50));
            out.push(Telemetry::SchedLatencyP99, as_ms(self.p99));
            out.push(Telemetry::SchedLatencyMax, as_ms(self.max));
        }
        out.push(Telemetry::ProbeSamples, self.samples as f64);
        out
    }

    fn from_parts(histogram: &Histogram, breach: Option<Breach>, warnings: Vec<String>) -> Self {
        ProbeReport {
            samples: histogram.total,
            p50: Duration::from_nanos(histogram.percentile(0.50)),
            p99: Duration::from_nanos(histogram.percentile(0.99)),
            max: Duration::from_nanos(histogram.max),
            breach,
            warnings,
        }
    }
}

/// Called once, from the probe thread, on the first breach. Keep it short (trigger
/// an interrupt, set a flag): the probe does not measure while it runs.
pub type OnBreach = Arc<dyn Fn(Breach) + Send + Sync>;

/// A running probe; [`finish`](LatencyProbe::finish) stops it and returns its report.
/// Dropping it without `finish` stops it too.
pub struct LatencyProbe {
    stop: Arc<OwnedFd>,
    handle: Option<crate::reused::Handle<ProbeReport>>,
}

impl fmt::Debug for LatencyProbe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LatencyProbe")
            .field("running", &self.handle.is_some())
            .finish()
    }
}

impl LatencyProbe {
    /// Validates `config` and starts the probe thread.
    pub fn start(config: ProbeConfig, on_breach: OnBreach) -> Result<LatencyProbe, ProbeError> {
        config.validate()?;
        // SAFETY: timerfd_create takes no pointers; the result is checked below.
        let timer = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_CLOEXEC | libc::TFD_NONBLOCK,
            )
        };
        let timer = owned(timer, "timerfd_create(CLOCK_MONOTONIC)")?;
        // SAFETY: eventfd takes no pointers; the result is checked below.
        let stop = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        let stop = Arc::new(owned(stop, "eventfd")?);
        let stop_thread = Arc::clone(&stop);
        // On a helper thread that outlives the run (`crate::reused`); `run` makes it an
        // ordinary task on every cpu isolab may use first, whatever it did before.
        let handle = crate::reused::spawn(c"isolab-latency-probe", move || {
            run(config, &timer, &stop_thread, &on_breach)
        })
        .map_err(|source| ProbeError::Spawn { source })?;
        Ok(LatencyProbe {
            stop,
            handle: Some(handle),
        })
    }

    /// Stops the probe at once (without waiting for the next tick), joins its thread
    /// and returns what it saw.
    pub fn finish(mut self) -> ProbeReport {
        self.stop_and_join()
    }

    fn stop_and_join(&mut self) -> ProbeReport {
        let Some(handle) = self.handle.take() else {
            return ProbeReport::default();
        };
        let one = 1u64;
        // SAFETY: writes 8 bytes from a valid stack u64 to an eventfd we own. It can
        // only fail if the counter would overflow, which one write per probe cannot do.
        unsafe {
            libc::write(
                self.stop.as_raw_fd(),
                std::ptr::from_ref(&one).cast(),
                std::mem::size_of::<u64>(),
            )
        };
        handle.join().unwrap_or_else(|_| ProbeReport {
            warnings: vec!["the latency probe thread panicked; its samples are lost".into()],
            ..ProbeReport::default()
        })
    }
}

impl Drop for LatencyProbe {
    fn drop(&mut self) {
        if self.handle.is_some() {
            self.stop_and_join();
        }
    }
}

fn owned(fd: RawFd, call: &'static str) -> Result<OwnedFd, ProbeError> {
    if fd < 0 {
        return Err(ProbeError::Syscall {
            call,
            source: io::Error::last_os_error(),
        });
    }
    // SAFETY: fd was just returned by the kernel, is valid and owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn monotonic_now() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn timespec(d: Duration) -> libc::timespec {
    libc::timespec {
        tv_sec: d.as_secs() as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    }
}

/// Makes the calling thread an ordinary task that may run on any cpu isolab may use.
fn make_ordinary(warnings: &mut Vec<String>) {
    // SAFETY: sched_getscheduler(0) only reads the calling thread's policy.
    let policy = unsafe { libc::sched_getscheduler(0) };
    if policy != libc::SCHED_OTHER {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: param is a valid sched_param; pid 0 is the calling thread.
        if unsafe { libc::sched_setscheduler(0, libc::SCHED_OTHER, &param) } != 0 {
            warnings.push(format!(
                "could not make the latency probe SCHED_OTHER (policy was {policy}): {}",
                io::Error::last_os_error()
            ));
        }
    }
    // SAFETY: gettid takes no arguments.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) } as libc::id_t;
    // SAFETY: setpriority takes no pointers; on Linux PRIO_PROCESS with a tid sets
    // that thread's nice value only.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, 0) } != 0 {
        warnings.push(format!(
            "could not give the latency probe nice 0: {}",
            io::Error::last_os_error()
        ));
    }
    // SAFETY: an all-zero cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for cpu in 0..libc::CPU_SETSIZE as usize {
        // SAFETY: cpu < CPU_SETSIZE, so the bit lies inside `set`.
        unsafe { libc::CPU_SET(cpu, &mut set) };
    }
    // The kernel intersects the mask with the cpus of isolab's own cpuset, so this
    // unpins the thread without leaving isolab's cgroup.
    // SAFETY: set is a valid cpu_set_t of the size passed; pid 0 is the calling thread.
    if unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) } != 0 {
        warnings.push(format!(
            "could not unpin the latency probe: {}",
            io::Error::last_os_error()
        ));
    }
}

/// The probe thread: arm, wait, measure, decide, until stopped.
fn run(config: ProbeConfig, timer: &OwnedFd, stop: &OwnedFd, on_breach: &OnBreach) -> ProbeReport {
    let mut warnings = Vec::new();
    make_ordinary(&mut warnings);
    let mut histogram = Histogram::new();
    let mut detector = BreachDetector::new(&config);
    let mut breach = None;
    let start = monotonic_now();
    let mut deadline = start + config.interval;
    'probe: loop {
        let spec = libc::itimerspec {
            it_interval: timespec(Duration::ZERO),
            it_value: timespec(deadline),
        };
        // SAFETY: spec is a valid itimerspec; the old value is not asked for (null).
        let armed = unsafe {
            libc::timerfd_settime(
                timer.as_raw_fd(),
                libc::TFD_TIMER_ABSTIME,
                &spec,
                std::ptr::null_mut(),
            )
        };
        if armed != 0 {
            warnings.push(format!(
                "the latency probe stopped early: timerfd_settime failed: {}",
                io::Error::last_os_error()
            ));
            break;
        }
        let now = loop {
            let mut fds = [
                libc::pollfd {
                    fd: stop.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: timer.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            // SAFETY: fds is a valid array of 2 pollfd for the duration of the call.
            let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) };
            let now = monotonic_now();
            if n < 0 {
                let err = io::Error::last_os_error();
                if err.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                warnings.push(format!(
                    "the latency probe stopped early: poll failed: {err}"
                ));
                break 'probe;
            }
            if fds[0].revents != 0 {
                break 'probe;
            }
            if fds[1].revents & libc::POLLIN != 0 {
                let mut expirations = 0u64;
                // SAFETY: reads 8 bytes into a valid u64; the fd is non-blocking, and a
                // spurious EAGAIN only means the expiration was already consumed.
                unsafe {
                    libc::read(
                        timer.as_raw_fd(),
                        std::ptr::from_mut(&mut expirations).cast(),
                        std::mem::size_of::<u64>(),
                    )
                };
                break now;
            }
        };
        let lateness = now.saturating_sub(deadline);
        histogram.record(u64::try_from(lateness.as_nanos()).unwrap_or(u64::MAX));
        if let Some(b) = detector.observe(now.saturating_sub(start), lateness) {
            breach = Some(b.clone());
            if catch_unwind(AssertUnwindSafe(|| on_breach(b))).is_err() {
                warnings.push("the latency probe's on_breach callback panicked".into());
            }
        }
        // Next tick on the original grid; after a stall longer than an interval, the
        // missed ticks are skipped rather than fired back to back.
        deadline += config.interval;
        if deadline <= now {
            deadline = now + config.interval;
        }
    }
    ProbeReport::from_parts(&histogram, breach, warnings)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn cfg() -> ProbeConfig {
        ProbeConfig::default() // 10 ms, 500 ms, 1 s → sustained limit 100 ms
    }

    /// `n` samples every 10 ms from `from`, each `lateness` late.
    fn steady(from: Duration, n: u64, lateness: Duration) -> Vec<(Duration, Duration)> {
        (0..n).map(|i| (from + ms(10 * i), lateness)).collect()
    }

    #[test]
    fn quiet_host_never_breaches() {
        let samples = steady(ms(10), 1000, Duration::from_micros(80));
        assert_eq!(first_breach(&cfg(), samples), None);
    }

    #[test]
    fn one_wake_up_past_the_threshold_breaches_at_once() {
        let mut samples = steady(ms(10), 10, Duration::from_micros(80));
        samples.push((ms(700), ms(501)));
        samples.extend(steady(ms(710), 10, Duration::from_micros(80)));
        let b = first_breach(&cfg(), samples).expect("breach");
        assert_eq!(b.kind, BreachKind::Single);
        assert_eq!(b.at, ms(700));
        assert_eq!(b.latency, ms(501));
        assert!(b.reason.contains("501.000 ms"), "{}", b.reason);
        assert!(b.reason.contains("threshold 500.000 ms"), "{}", b.reason);
    }

    #[test]
    fn exactly_the_threshold_is_not_past_it() {
        let samples = vec![(ms(10), ms(500))];
        assert_eq!(first_breach(&cfg(), samples), None);
    }

    #[test]
    fn a_single_hiccup_under_the_threshold_is_not_sustained() {
        // 300 ms late once (under 500 ms), otherwise quiet, for 3 s.
        let mut samples = steady(ms(10), 100, Duration::from_micros(80));
        samples.push((ms(1300), ms(300)));
        samples.extend(steady(ms(1310), 200, Duration::from_micros(80)));
        assert_eq!(first_breach(&cfg(), samples), None);
    }

    #[test]
    fn sustained_latency_breaches_once_the_window_is_full() {
        // Every wake-up 150 ms late (> 100 ms limit) from the start: samples come
        // every 160 ms. The window only counts once the probe has run for 1 s.
        let samples: Vec<_> = (1..=20).map(|i| (ms(160 * i), ms(150))).collect();
        let b = first_breach(&cfg(), samples).expect("breach");
        assert_eq!(b.kind, BreachKind::Sustained);
        assert_eq!(b.at, ms(1120), "first sample at or after 1 s");
        assert_eq!(b.latency, ms(150));
        assert!(b.reason.contains("p99"), "{}", b.reason);
        assert!(b.reason.contains("100.000 ms"), "{}", b.reason);
    }

    #[test]
    fn sustained_rule_follows_the_nearest_rank_p99() {
        // 100 samples over 1 s: k = 99, so p99 > limit needs 2 late samples.
        let quiet = Duration::from_micros(80);
        let mut one_late = steady(ms(10), 100, quiet);
        one_late[50].1 = ms(120);
        assert_eq!(first_breach(&cfg(), one_late.clone()), None);

        let mut two_late = one_late;
        two_late[60].1 = ms(130);
        let b = first_breach(&cfg(), two_late).expect("breach");
        assert_eq!(b.kind, BreachKind::Sustained);
        assert_eq!(b.at, ms(1000), "decided when the window is first full");
        assert_eq!(
            b.latency,
            ms(120),
            "nearest-rank p99 of 100 is the 99th value"
        );
    }

    #[test]
    fn late_samples_leave_the_window() {
        // Two late samples 2 s apart never share a 1 s window.
        let quiet = Duration::from_micros(80);
        let mut samples = steady(ms(10), 400, quiet);
        samples[100].1 = ms(150);
        samples[300].1 = ms(150);
        assert_eq!(first_breach(&cfg(), samples), None);
    }

    #[test]
    fn within_the_window_a_few_late_samples_out_of_many_do_not_breach() {
        // 1 ms interval: ~1000 samples per window, 5 late ones (0.5 %) keep p99 low.
        let config = ProbeConfig {
            interval: ms(1),
            ..cfg()
        };
        let mut samples: Vec<_> = (1..=3000)
            .map(|i| (ms(i), Duration::from_micros(50)))
            .collect();
        for i in [1500, 1520, 1540, 1560, 1580] {
            samples[i].1 = ms(200);
        }
        assert_eq!(first_breach(&config, samples.clone()), None);
        // 15 late ones (1.5 %) do.
        for i in (1600..1700).step_by(10) {
            samples[i].1 = ms(200);
        }
        let b = first_breach(&config, samples).expect("breach");
        assert_eq!(b.kind, BreachKind::Sustained);
        assert_eq!(b.latency, ms(200));
    }

    #[test]
    fn sustained_rule_can_be_turned_off() {
        let config = ProbeConfig {
            sustained: Duration::ZERO,
            ..cfg()
        };
        let samples: Vec<_> = (1..=50).map(|i| (ms(160 * i), ms(150))).collect();
        assert_eq!(first_breach(&config, samples), None);
    }

    #[test]
    fn detector_latches_after_the_first_breach() {
        let mut d = BreachDetector::new(&cfg());
        assert!(d.observe(ms(10), ms(600)).is_some());
        assert!(d.breached());
        assert_eq!(d.observe(ms(20), ms(900)), None);
    }

    #[test]
    fn detector_tolerates_time_going_backwards() {
        let samples = vec![(ms(2000), ms(1)), (ms(10), ms(1)), (ms(0), ms(1))];
        assert_eq!(first_breach(&cfg(), samples), None);
    }

    #[test]
    fn config_is_validated() {
        assert!(cfg().validate().is_ok());
        let e = ProbeConfig {
            interval: Duration::from_micros(10),
            ..cfg()
        }
        .validate()
        .unwrap_err();
        assert!(matches!(e, ProbeError::IntervalTooShort { .. }), "{e}");
        assert!(e.to_string().contains("10µs"), "{e}");
        let e = ProbeConfig {
            threshold: Duration::ZERO,
            ..cfg()
        }
        .validate()
        .unwrap_err();
        assert!(matches!(e, ProbeError::ZeroThreshold), "{e}");
        let e = ProbeConfig {
            interval: ms(1),
            sustained: Duration::from_secs(1000),
            ..cfg()
        }
        .validate()
        .unwrap_err();
        assert!(matches!(e, ProbeError::WindowTooLarge { .. }), "{e}");
    }

    #[test]
    fn histogram_buckets_are_contiguous_and_bounded() {
        let mut prev = 0usize;
        for v in (0u64..5000).chain([u64::MAX / 3, u64::MAX - 1, u64::MAX]) {
            let i = Histogram::index(v);
            assert!(i < BUCKETS, "{v} → {i}");
            assert!(i >= prev || v > 5000, "index must not decrease");
            prev = i;
            let hi = Histogram::highest_in(i);
            assert!(hi >= v, "{v}: bucket {i} tops at {hi}");
            // Relative width within 1/64.
            assert!((hi - v) as f64 <= v as f64 / 64.0 + 1.0, "{v} {hi}");
            assert_eq!(Histogram::index(hi), i);
            if hi < u64::MAX {
                assert_eq!(Histogram::index(hi + 1), i + 1, "{v}");
            }
        }
        assert_eq!(Histogram::index(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn histogram_percentiles_use_nearest_rank() {
        let mut h = Histogram::new();
        assert_eq!(h.percentile(0.5), 0);
        for v in 1..=100u64 {
            h.record(v * 1000); // 1 µs … 100 µs
        }
        let within = |got: u64, want: u64| {
            assert!(got >= want && got - want <= want / 64, "{got} vs {want}");
        };
        within(h.percentile(0.50), 50_000);
        within(h.percentile(0.99), 99_000);
        assert_eq!(h.percentile(1.0), 100_000, "capped at the maximum");
        assert_eq!(h.max, 100_000);
        assert_eq!(h.total, 100);
    }

    #[test]
    fn histogram_stays_fixed_size() {
        let mut h = Histogram::new();
        for v in 0..200_000u64 {
            h.record(v * 7919);
        }
        assert_eq!(h.counts.len(), BUCKETS);
        assert_eq!(h.counts.iter().sum::<u64>(), 200_000);
    }

    #[test]
    fn report_telemetry_is_in_milliseconds() {
        let mut h = Histogram::new();
        for _ in 0..10 {
            h.record(2_000_000);
        }
        h.record(8_000_000);
        let report = ProbeReport::from_parts(&h, None, Vec::new());
        let t = report.telemetry();
        let get = |k: &str| t.iter().find(|(n, _)| n == k).map(|&(_, v)| v);
        assert_eq!(get("probe_samples"), Some(11.0));
        let p50 = get("sched_latency_p50_ms").unwrap();
        assert!((2.0..=2.0 * (1.0 + 1.0 / 64.0)).contains(&p50), "{p50}");
        assert_eq!(get("sched_latency_p99_ms"), Some(8.0));
        assert_eq!(get("sched_latency_max_ms"), Some(8.0));
    }

    #[test]
    fn empty_report_has_no_latency_telemetry() {
        let t = ProbeReport::default().telemetry();
        assert_eq!(t, vec![("probe_samples".to_string(), 0.0)]);
    }
}
