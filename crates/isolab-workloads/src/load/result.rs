//! A load run's results: totals per named request and over all, per-second intervals,
//! the metrics they give and whether the generator may have been the bottleneck.

use super::LoadProfile;
use crate::Metric;
use isolab_stats::Direction;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Latency summary, in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    /// Arithmetic mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
}

impl Latency {
    /// The summary of `values` (ms): mean, maximum, and percentiles by
    /// [`isolab_stats::percentile`] (linear interpolation between closest ranks,
    /// Hyndman & Fan definition 7); `None` when empty.
    pub fn of(values: &[f64]) -> Option<Latency> {
        let p = |q| isolab_stats::percentile(values, q);
        Some(Latency {
            mean: values.iter().sum::<f64>() / values.len() as f64,
            p50: p(50.0)?,
            p90: p(90.0)?,
            p99: p(99.0)?,
            max: p(100.0)?,
        })
    }
}

/// Totals of one named request (or, in [`LoadResult::overall`], of all of them).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RequestTotals {
    /// The request's name (empty in [`LoadResult::overall`]).
    pub name: String,
    /// Requests completed (successful or not).
    pub requests: u64,
    /// Successful requests (a 2xx or 3xx response in time).
    pub successes: u64,
    /// Failed requests: errors, timeouts, other status codes.
    pub failures: u64,
    /// From the first request's start to the last one's end.
    pub span: Duration,
    /// Latency of all requests, `None` when there were none.
    pub latency_ms: Option<Latency>,
}

impl RequestTotals {
    /// Successful requests per second of [`RequestTotals::span`] (0 for an empty span).
    pub fn success_rate(&self) -> f64 {
        per_second(self.successes, self.span)
    }
}

fn per_second(n: u64, span: Duration) -> f64 {
    let s = span.as_secs_f64();
    if s > 0.0 {
        n as f64 / s
    } else {
        0.0
    }
}

/// One second of the load for one named request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// The request's name.
    pub request: String,
    /// Seconds since the load started: 0, 1, 2, …
    pub start_s: f64,
    /// Requests completed in this second.
    pub requests: u64,
    /// Of which failed.
    pub failures: u64,
    /// Latency of the requests completed in this second, when the tool gives it.
    pub latency_ms: Option<Latency>,
    /// Active users when the tool reports it (JMeter's allThreads, Locust's user count).
    pub users: Option<f64>,
}

/// What a load run measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LoadResult {
    /// Totals of each named request, in the order they first appear in the output.
    pub requests: Vec<RequestTotals>,
    /// Totals over all requests.
    pub overall: RequestTotals,
    /// Every second of the load for each named request, ordered by name (as in
    /// `requests`), then by second.
    pub intervals: Vec<Interval>,
    /// What the parser noticed and the lab should show (failures' messages, rounding).
    pub notes: Vec<String>,
}

impl LoadResult {
    /// Metrics over all requests: `requests_per_second` (successful requests per
    /// second of the span, req/s, higher), `successful_requests` and `failed_requests`
    /// (count, higher and lower), `latency_mean`, `latency_p50`, `latency_p90`,
    /// `latency_p99`, `latency_max` (ms, lower; absent without latencies); with several
    /// named requests, the same again for each as `{name}/requests_per_second`, etc.
    pub fn metrics(&self) -> Vec<Metric> {
        let mut out = totals_metrics("", &self.overall);
        if self.requests.len() > 1 {
            for r in &self.requests {
                out.extend(totals_metrics(&format!("{}/", r.name), r));
            }
        }
        out
    }

    /// Requests completed (successful or not) per second of the overall span: the rate
    /// the generator achieved, comparable with an open-loop profile's target.
    pub fn achieved_rate(&self) -> f64 {
        per_second(self.overall.requests, self.overall.span)
    }
}

fn totals_metrics(prefix: &str, t: &RequestTotals) -> Vec<Metric> {
    let m = |name: &str, unit: &str, dir, v| Metric::new(format!("{prefix}{name}"), unit, dir, v);
    let mut out = vec![
        m(
            "requests_per_second",
            "req/s",
            Direction::Higher,
            t.success_rate(),
        ),
        m(
            "successful_requests",
            "count",
            Direction::Higher,
            t.successes as f64,
        ),
        m(
            "failed_requests",
            "count",
            Direction::Lower,
            t.failures as f64,
        ),
    ];
    if let Some(l) = &t.latency_ms {
        for (name, v) in [
            ("latency_mean", l.mean),
            ("latency_p50", l.p50),
            ("latency_p90", l.p90),
            ("latency_p99", l.p99),
            ("latency_max", l.max),
        ] {
            out.push(m(name, "ms", Direction::Lower, v));
        }
    }
    out
}

/// The generator's cpu use (fraction of the cpus it was given) at or above which it may
/// have been the bottleneck.
pub const SATURATED_CPU_FRACTION: f64 = 0.9;

/// The fraction of an open-loop profile's target rate below which the generator did
/// not keep up.
pub const ACHIEVED_RATE_FRACTION: f64 = 0.95;

/// Why a run's generator may have been the bottleneck, if it may: its own cpu use
/// (`generator_cpu_fraction`, the fraction of the cpus it was given, measured by the
/// lab from its cgroup) is at least [`SATURATED_CPU_FRACTION`], or an open-loop
/// profile's achieved rate is below [`ACHIEVED_RATE_FRACTION`] of its mean target. The
/// text says what to do; `None` when neither holds.
pub fn saturation(
    profile: &LoadProfile,
    result: &LoadResult,
    generator_cpu_fraction: f64,
) -> Option<String> {
    let mut why = Vec::new();
    if generator_cpu_fraction >= SATURATED_CPU_FRACTION {
        why.push(format!(
            "the load generator used {:.0}% of the cpus it was given, so it may have been the bottleneck rather than the service: give it more cpus or drive less load",
            generator_cpu_fraction * 100.0
        ));
    }
    if let Some(target) = profile.mean_target_rate() {
        let achieved = result.achieved_rate();
        if achieved < ACHIEVED_RATE_FRACTION * target {
            why.push(format!(
                "the load generator achieved {achieved:.1} requests/s of the {target:.1} requested ({:.0}%): it could not keep up (too few cpus or workers) or the service held requests past the timeout; give the generator more cpus, or lower the rate",
                100.0 * achieved / target
            ));
        }
    }
    (!why.is_empty()).then(|| why.join("; "))
}

/// One request as recorded by a tool that writes a row per request (JMeter, vegeta).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Sample {
    /// Index of the request's name in the names passed to [`summarize`].
    pub name: usize,
    /// Start, in ms since any fixed origin (the epoch).
    pub start_ms: f64,
    /// Latency in ms.
    pub latency_ms: f64,
    /// A 2xx or 3xx response in time.
    pub ok: bool,
    /// Active users when it completed, if the tool says.
    pub users: Option<f64>,
}

/// The mean of `values`, `None` when there are none.
fn mean(values: impl Iterator<Item = f64>) -> Option<f64> {
    let (n, sum) = values.fold((0u32, 0.0), |(n, sum), v| (n + 1, sum + v));
    (n > 0).then(|| sum / f64::from(n))
}

/// Totals and per-second intervals of per-request rows: second `k` holds the requests
/// that completed in [k, k + 1) s after the first request started; every second from 0
/// to the last completion has an interval for every name (empty seconds have 0
/// requests, no latency). An interval's users are the mean of what its requests saw
/// (JMeter's `allThreads` when each completed: a ramp's second holds fractions).
pub(crate) fn summarize(names: &[String], samples: &[Sample]) -> LoadResult {
    let t0 = samples
        .iter()
        .map(|s| s.start_ms)
        .fold(f64::INFINITY, f64::min);
    let end = |s: &Sample| s.start_ms + s.latency_ms;
    let second = |s: &Sample| ((end(s) - t0) / 1000.0).floor().max(0.0) as usize;
    let seconds = samples.iter().map(|s| second(s) + 1).max().unwrap_or(0);

    let totals = |name: &str, pick: &dyn Fn(&Sample) -> bool| {
        let chosen: Vec<&Sample> = samples.iter().filter(|s| pick(s)).collect();
        let lat: Vec<f64> = chosen.iter().map(|s| s.latency_ms).collect();
        let first = chosen
            .iter()
            .map(|s| s.start_ms)
            .fold(f64::INFINITY, f64::min);
        let last = chosen
            .iter()
            .map(|s| end(s))
            .fold(f64::NEG_INFINITY, f64::max);
        let successes = chosen.iter().filter(|s| s.ok).count() as u64;
        RequestTotals {
            name: name.to_owned(),
            requests: chosen.len() as u64,
            successes,
            failures: chosen.len() as u64 - successes,
            span: if chosen.is_empty() {
                Duration::ZERO
            } else {
                Duration::from_secs_f64(((last - first) / 1000.0).max(0.0))
            },
            latency_ms: Latency::of(&lat),
        }
    };

    let mut requests = Vec::new();
    let mut intervals = Vec::new();
    for (i, name) in names.iter().enumerate() {
        requests.push(totals(name, &|s: &Sample| s.name == i));
        let mut buckets: Vec<Vec<&Sample>> = vec![Vec::new(); seconds];
        for s in samples.iter().filter(|s| s.name == i) {
            buckets[second(s)].push(s);
        }
        for (k, bucket) in buckets.into_iter().enumerate() {
            let lat: Vec<f64> = bucket.iter().map(|s| s.latency_ms).collect();
            intervals.push(Interval {
                request: name.clone(),
                start_s: k as f64,
                requests: bucket.len() as u64,
                failures: bucket.iter().filter(|s| !s.ok).count() as u64,
                latency_ms: Latency::of(&lat),
                users: mean(bucket.iter().filter_map(|s| s.users)),
            });
        }
    }
    LoadResult {
        requests,
        overall: totals("", &|_| true),
        intervals,
        notes: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(name: usize, start_ms: f64, latency_ms: f64, ok: bool) -> Sample {
        Sample {
            name,
            start_ms,
            latency_ms,
            ok,
            users: Some(name as f64 + 1.0),
        }
    }

    #[test]
    fn latency_percentiles_interpolate_between_ranks() {
        let l = Latency::of(&[4.0, 1.0, 3.0, 2.0]).unwrap();
        // h = q/100·(n − 1): p50 → 1.5 → 2.5, p90 → 2.7 → 3.7, p99 → 2.97 → 3.97
        assert_eq!(l.mean, 2.5);
        assert_eq!(l.p50, 2.5);
        assert!((l.p90 - 3.7).abs() < 1e-12);
        assert!((l.p99 - 3.97).abs() < 1e-12);
        assert_eq!(l.max, 4.0);
        assert_eq!(Latency::of(&[]), None);
    }

    #[test]
    fn samples_fall_in_the_second_they_complete() {
        let names = vec!["a".to_owned(), "b".to_owned()];
        let t0 = 1_700_000_000_000.0;
        let samples = vec![
            sample(0, t0, 10.0, true),           // ends 0.010 s → second 0
            sample(0, t0 + 990.0, 20.0, true),   // ends 1.010 s → second 1
            sample(1, t0 + 500.0, 400.0, false), // ends 0.900 s → second 0
            sample(0, t0 + 2500.0, 600.0, true), // ends 3.100 s → second 3
        ];
        let r = summarize(&names, &samples);
        assert_eq!(r.intervals.len(), 8); // 4 seconds × 2 names
        let a: Vec<u64> = r.intervals[..4].iter().map(|i| i.requests).collect();
        let b: Vec<u64> = r.intervals[4..].iter().map(|i| i.requests).collect();
        assert_eq!(a, [1, 1, 0, 1]);
        assert_eq!(b, [1, 0, 0, 0]);
        assert_eq!(r.intervals[4].failures, 1);
        assert_eq!(r.intervals[2].latency_ms, None);
        assert_eq!(r.intervals[3].start_s, 3.0);
        assert_eq!(r.intervals[3].latency_ms.unwrap().p50, 600.0);
        assert_eq!(r.intervals[0].users, Some(1.0));
        assert_eq!(r.intervals[4].users, Some(2.0));
        // users 1 (at t0) and 2 (at t0 + 2501 ms) in second 3's two requests: mean 1.5
        let mut two = samples.clone();
        let mut more = sample(0, t0 + 2501.0, 500.0, true);
        more.users = Some(2.0);
        two.push(more);
        assert_eq!(summarize(&names, &two).intervals[3].users, Some(1.5));
        assert_eq!(r.requests[0].requests, 3);
        assert_eq!(r.requests[0].span, Duration::from_millis(3100));
        assert_eq!(r.requests[1].span, Duration::from_millis(400));
        assert_eq!(r.overall.requests, 4);
        assert_eq!(r.overall.successes, 3);
        assert_eq!(r.overall.failures, 1);
        assert_eq!(r.overall.span, Duration::from_millis(3100));
        assert!((r.achieved_rate() - 4.0 / 3.1).abs() < 1e-9);
    }

    #[test]
    fn metrics_cover_all_requests_then_each_name() {
        let names = vec!["a".to_owned(), "b".to_owned()];
        let samples = vec![
            sample(0, 0.0, 10.0, true),
            sample(1, 0.0, 30.0, true),
            sample(1, 500.0, 500.0, false),
        ];
        let r = summarize(&names, &samples);
        let ms = r.metrics();
        let metric_names: Vec<&str> = ms.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(metric_names.len(), 24);
        assert_eq!(
            &metric_names[..3],
            [
                "requests_per_second",
                "successful_requests",
                "failed_requests"
            ]
        );
        assert!(metric_names.contains(&"b/latency_p99"));
        assert!(metric_names.contains(&"a/failed_requests"));
        let rps = &ms[0];
        assert_eq!(
            (rps.unit.as_str(), rps.direction),
            ("req/s", Direction::Higher)
        );
        assert_eq!(rps.value, 2.0); // 2 successes over 1 s
        let max = ms.iter().find(|m| m.name == "latency_max").unwrap();
        assert_eq!(
            (max.unit.as_str(), max.direction, max.value),
            ("ms", Direction::Lower, 500.0)
        );
        // one name: no per-name copies
        let one = summarize(&names[..1], &samples[..1]);
        assert_eq!(one.metrics().len(), 8);
    }

    #[test]
    fn saturation_names_cpu_and_missed_rate() {
        let names = vec!["a".to_owned()];
        // 100 requests over 1 s
        let samples: Vec<Sample> = (0..100)
            .map(|i| sample(0, f64::from(i) * 10.0, 10.0, true))
            .collect();
        let r = summarize(&names, &samples);
        let users = LoadProfile::Users {
            users: 1,
            duration: Duration::from_secs(1),
        };
        assert_eq!(saturation(&users, &r, 0.5), None);
        let s = saturation(&users, &r, 0.95).unwrap();
        assert!(
            s.contains("95% of the cpus") && s.contains("more cpus"),
            "{s}"
        );
        let rate = |rate| LoadProfile::Rate {
            rate,
            duration: Duration::from_secs(1),
        };
        assert_eq!(saturation(&rate(100.0), &r, 0.1), None);
        let s = saturation(&rate(200.0), &r, 0.1).unwrap();
        assert!(
            s.contains("100.0 requests/s of the 200.0 requested (50%)"),
            "{s}"
        );
        let both = saturation(&rate(200.0), &r, 1.0).unwrap();
        assert!(
            both.contains("cpus it was given") && both.contains("achieved"),
            "{both}"
        );
    }
}
