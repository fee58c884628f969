//! The latency probe for real, on this host: quiet without load, a breach with a
//! tiny threshold, a prompt stop. Timings are printed, and asserted only loosely
//! (the machine is shared and noisy).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use isolab_lab::probe::{Breach, BreachKind, LatencyProbe, OnBreach, ProbeConfig, ProbeError};

fn counting() -> (OnBreach, Arc<AtomicUsize>, Arc<Mutex<Option<Breach>>>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = Arc::new(Mutex::new(None));
    let (c, s) = (Arc::clone(&calls), Arc::clone(&seen));
    let on_breach: OnBreach = Arc::new(move |b: Breach| {
        c.fetch_add(1, Ordering::SeqCst);
        *s.lock().unwrap() = Some(b);
    });
    (on_breach, calls, seen)
}

#[test]
fn idle_host_reports_latency_without_breach() {
    let (on_breach, calls, _) = counting();
    let probe = LatencyProbe::start(ProbeConfig::default(), on_breach).unwrap();
    std::thread::sleep(Duration::from_secs(1));
    let report = probe.finish();
    println!(
        "idle 1 s: samples={} p50={:?} p99={:?} max={:?} breach={:?} warnings={:?}",
        report.samples, report.p50, report.p99, report.max, report.breach, report.warnings
    );
    println!("telemetry: {:?}", report.telemetry());
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    assert_eq!(report.breach, None);
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    assert!(
        (50..=150).contains(&report.samples),
        "about 100 wake-ups in 1 s at 10 ms, got {}",
        report.samples
    );
    assert!(
        report.p50 < Duration::from_millis(5),
        "p50 {:?}",
        report.p50
    );
    assert!(report.p50 <= report.p99 && report.p99 <= report.max);
    let names: Vec<_> = report.telemetry().into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        [
            "sched_latency_p50_ms",
            "sched_latency_p99_ms",
            "sched_latency_max_ms",
            "probe_samples"
        ]
    );
}

#[test]
fn tiny_threshold_breaches_once_and_keeps_measuring() {
    let (on_breach, calls, seen) = counting();
    let config = ProbeConfig {
        threshold: Duration::from_micros(1),
        ..ProbeConfig::default()
    };
    let probe = LatencyProbe::start(config, on_breach).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let report = probe.finish();
    println!(
        "1 µs threshold, 0.3 s: samples={} p50={:?} max={:?} breach={:?}",
        report.samples, report.p50, report.max, report.breach
    );
    let breach = report
        .breach
        .clone()
        .expect("a breach with a 1 µs threshold");
    assert_eq!(breach.kind, BreachKind::Single);
    assert!(breach.latency > Duration::from_micros(1));
    assert_eq!(calls.load(Ordering::SeqCst), 1, "on_breach is called once");
    assert_eq!(seen.lock().unwrap().as_ref(), Some(&breach));
    assert!(report.samples > 1, "keeps measuring after the breach");
}

#[test]
fn finish_does_not_wait_for_the_next_tick() {
    let (on_breach, _, _) = counting();
    let config = ProbeConfig {
        interval: Duration::from_secs(5),
        sustained: Duration::ZERO,
        ..ProbeConfig::default()
    };
    let probe = LatencyProbe::start(config, on_breach).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let t = Instant::now();
    let report = probe.finish();
    let took = t.elapsed();
    println!("finish with a 5 s interval took {took:?}");
    assert!(took < Duration::from_secs(2), "finish took {took:?}");
    assert_eq!(report.samples, 0);
    assert_eq!(report.telemetry(), vec![("probe_samples".to_string(), 0.0)]);
}

#[test]
fn dropping_a_probe_stops_it() {
    let (on_breach, _, _) = counting();
    let config = ProbeConfig {
        interval: Duration::from_secs(5),
        ..ProbeConfig::default()
    };
    let t = Instant::now();
    drop(LatencyProbe::start(config, on_breach).unwrap());
    assert!(t.elapsed() < Duration::from_secs(2));
}

#[test]
fn bad_config_is_refused_before_starting() {
    let (on_breach, _, _) = counting();
    let config = ProbeConfig {
        threshold: Duration::ZERO,
        ..ProbeConfig::default()
    };
    let err = LatencyProbe::start(config, on_breach).unwrap_err();
    assert!(matches!(err, ProbeError::ZeroThreshold), "{err}");
}
