//! Parses every committed fixture (real output of this machine's sysbench 1.0.20,
//! fio 3.33, stress-ng 0.15.06 and iperf3 3.12, captured with
//! `tests/fixtures/capture.sh`) and checks exact metric values and units; checks
//! that every built-in's primary metric is among what its parser yields on its
//! fixture; and checks the failure fixtures' errors.

#[path = "parsers/load.rs"]
mod load;

use isolab_stats::Direction::{self, Higher, Lower};
use isolab_workloads::{builtin, catalog, parse, Metric, ParseError, ParserKind, RunOutput};
use std::path::{Path, PathBuf};
use std::time::Duration;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn read(name: &str) -> String {
    let path = fixtures().join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Parses `stdout`/`stderr` fixture files (names relative to `tests/fixtures`,
/// `None` for empty) with `workdir` relative to `tests/fixtures`.
fn parse_fixture(
    kind: ParserKind,
    stdout: Option<&str>,
    stderr: Option<&str>,
    workdir: &str,
) -> Result<Vec<Metric>, ParseError> {
    let stdout = stdout.map(read).unwrap_or_default();
    let stderr = stderr.map(read).unwrap_or_default();
    let workdir = fixtures().join(workdir);
    parse(
        kind,
        &RunOutput {
            stdout: &stdout,
            stderr: &stderr,
            workdir: &workdir,
            wall: Duration::from_secs(1),
        },
    )
}

fn m(name: &str, unit: &str, direction: Direction, value: f64) -> Metric {
    Metric::new(name, unit, direction, value)
}

/// The metrics every sysbench report gives, in the parser's order.
fn sysbench_common(eps: f64, time: f64, events: f64, lat: [f64; 4]) -> Vec<Metric> {
    vec![
        m("events_per_second", "events/s", Higher, eps),
        m("total_time", "s", Lower, time),
        m("total_events", "events", Higher, events),
        m("latency_min", "ms", Lower, lat[0]),
        m("latency_avg", "ms", Lower, lat[1]),
        m("latency_max", "ms", Lower, lat[2]),
        m("latency_p95", "ms", Lower, lat[3]),
    ]
}

fn sysbench(name: &str) -> Vec<Metric> {
    parse_fixture(ParserKind::Sysbench, Some(name), None, ".").unwrap()
}

#[test]
fn sysbench_cpu() {
    assert_eq!(
        sysbench("sysbench-cpu.txt"),
        sysbench_common(1513.21, 1.0013, 1518.0, [1.27, 1.32, 2.98, 1.37])
    );
}

#[test]
fn sysbench_memory() {
    let mut want = sysbench_common(17684.0 / 1.0029, 1.0029, 17684.0, [0.05, 0.11, 1.45, 0.13]);
    want.push(m("operations_per_second", "ops/s", Higher, 17603.00));
    want.push(m("throughput", "MiB/s", Higher, 17603.00));
    assert_eq!(sysbench("sysbench-memory.txt"), want);
}

#[test]
fn sysbench_threads() {
    assert_eq!(
        sysbench("sysbench-threads.txt"),
        sysbench_common(4323.0 / 1.0002, 1.0002, 4323.0, [0.31, 0.46, 3.82, 0.59])
    );
}

#[test]
fn sysbench_mutex() {
    assert_eq!(
        sysbench("sysbench-mutex.txt"),
        sysbench_common(
            2.0 / 1.2092,
            1.2092,
            2.0,
            [947.15, 1078.07, 1208.99, 1213.57]
        )
    );
}

#[test]
fn sysbench_fileio() {
    let mut want = sysbench_common(28616.0 / 1.0058, 1.0058, 28616.0, [0.02, 0.07, 2.13, 0.12]);
    want.extend([
        m("reads_per_second", "ops/s", Higher, 7498.77),
        m("writes_per_second", "ops/s", Higher, 4999.18),
        m("fsyncs_per_second", "ops/s", Higher, 16140.21),
        m("read_throughput", "MiB/s", Higher, 117.17),
        m("write_throughput", "MiB/s", Higher, 78.11),
        m("total_throughput", "MiB/s", Higher, 117.17 + 78.11),
    ]);
    assert_eq!(sysbench("sysbench-fileio.txt"), want);
}

/// fio metrics of one direction: iops, bw_bytes, clat mean, p50, p99 (ns).
fn fio_dir(dir: &str, iops: f64, bw_bytes: f64, clat_ns: [f64; 3]) -> Vec<Metric> {
    vec![
        m(&format!("{dir}_iops"), "IOPS", Higher, iops),
        m(
            &format!("{dir}_bandwidth"),
            "KiB/s",
            Higher,
            bw_bytes / 1024.0,
        ),
        m(&format!("{dir}_clat_mean"), "ms", Lower, clat_ns[0] / 1e6),
        m(&format!("{dir}_clat_p50"), "ms", Lower, clat_ns[1] / 1e6),
        m(&format!("{dir}_clat_p99"), "ms", Lower, clat_ns[2] / 1e6),
    ]
}

fn fio_totals(mut dirs: Vec<Metric>, iops: f64, bw_bytes: f64) -> Vec<Metric> {
    dirs.push(m("iops", "IOPS", Higher, iops));
    dirs.push(m("bandwidth", "KiB/s", Higher, bw_bytes / 1024.0));
    dirs
}

fn fio(name: &str) -> Vec<Metric> {
    parse_fixture(ParserKind::Fio, Some(name), None, ".").unwrap()
}

#[test]
fn fio_single_direction_reports() {
    let cases = [
        (
            "fio-randread.json",
            "read",
            33500.994036,
            137220071.0,
            [58324.284404, 53504.0, 132096.0],
        ),
        (
            "fio-randwrite.json",
            "write",
            27226.773227,
            111520863.0,
            [72012.322338, 67072.0, 160768.0],
        ),
        (
            "fio-read.json",
            "read",
            7188.866799,
            942259149.0,
            [275528.660398, 272384.0, 444416.0],
        ),
        (
            "fio-write.json",
            "write",
            8248.262165,
            1081116218.0,
            [232722.046472, 203776.0, 468992.0],
        ),
    ];
    for (file, dir, iops, bw, clat) in cases {
        assert_eq!(
            fio(file),
            fio_totals(fio_dir(dir, iops, bw, clat), iops, bw),
            "{file}"
        );
    }
}

#[test]
fn fio_mixed_report_gives_both_directions_and_their_sums() {
    let mut want = fio_dir(
        "read",
        16261.904762,
        66608761.0,
        [59574.859078, 53504.0, 146432.0],
    );
    want.extend(fio_dir(
        "write",
        16435.515873,
        67319873.0,
        [59650.758254, 52992.0, 150528.0],
    ));
    want.push(m("iops", "IOPS", Higher, 16261.904762 + 16435.515873));
    want.push(m(
        "bandwidth",
        "KiB/s",
        Higher,
        66608761.0 / 1024.0 + 67319873.0 / 1024.0,
    ));
    assert_eq!(fio("fio-randrw.json"), want);
}

fn stress_ng(stressor: &str, real: f64, usr_sys: f64) {
    let got = parse_fixture(
        ParserKind::StressNg,
        Some(&format!("stress-ng-{stressor}/output.txt")),
        None,
        &format!("stress-ng-{stressor}"),
    )
    .unwrap();
    assert_eq!(
        got,
        [
            m(
                &format!("{stressor}_bogo_ops_per_second_real_time"),
                "bogo-ops/s",
                Higher,
                real
            ),
            m(
                &format!("{stressor}_bogo_ops_per_second_usr_sys_time"),
                "bogo-ops/s",
                Higher,
                usr_sys
            ),
        ]
    );
}

#[test]
fn stress_ng_reports() {
    stress_ng("cpu", 2369.076890, 1188.429352);
    stress_ng("vm", 54773.205061, 27425.058573);
    stress_ng("matrix", 6057.176116, 3198.957408);
    stress_ng("cache", 276514.152344, 165033.809560);
}

#[test]
fn iperf3_tcp() {
    let got = parse_fixture(ParserKind::Iperf3, Some("iperf3-tcp.json"), None, ".").unwrap();
    assert_eq!(
        got,
        [
            m(
                "sender_throughput",
                "Gbit/s",
                Higher,
                29701940404.462563 / 1e9
            ),
            m(
                "receiver_throughput",
                "Gbit/s",
                Higher,
                29700841629.34835 / 1e9
            ),
            m("retransmits", "retransmits", Lower, 0.0),
            m("local_cpu_utilization", "%", Lower, 99.56773125828356),
            m("remote_cpu_utilization", "%", Lower, 80.36730323362417),
        ]
    );
}

#[test]
fn iperf3_udp() {
    let got = parse_fixture(ParserKind::Iperf3, Some("iperf3-udp.json"), None, ".").unwrap();
    assert_eq!(
        got,
        [
            m(
                "sender_throughput",
                "Gbit/s",
                Higher,
                100130496.90776286 / 1e9
            ),
            m(
                "receiver_throughput",
                "Gbit/s",
                Higher,
                100110276.35068735 / 1e9
            ),
            m("jitter", "ms", Lower, 0.04882299376543047),
            m("lost_percent", "%", Lower, 0.0),
            m("local_cpu_utilization", "%", Lower, 3.593190125321998),
            m("remote_cpu_utilization", "%", Lower, 1.3439022049473357),
        ]
    );
}

/// The fixture that shows what each built-in's parser yields: (stdout file, stderr
/// file, workdir).
/// The NoSQL built-ins, whose fixtures are directories (`output.txt`, and latte's report).
const NOSQL: [&str; 2] = ["cassandra-latte", "redis-benchmark"];

fn fixture_of(workload: &str) -> (Option<String>, Option<String>, String) {
    if workload == "ffmpeg-transcode" {
        // ffmpeg reports on stderr and in its progress file.
        let dir = "ffmpeg-x265";
        return (None, Some(format!("{dir}/output.txt")), dir.into());
    }
    let (stdout, workdir) = if workload == "pgbench-oltp" {
        // pgbench's per-transaction log in {workdir}/pgbench/, its prose on stdout.
        (
            Some("pgbench-oltp/output.txt".into()),
            "pgbench-oltp".into(),
        )
    } else if workload.starts_with("sysbench-pgsql-") || workload.starts_with("sysbench-mysql-") {
        // Every OLTP script reports through the same wrapper.
        (
            Some("sysbench-oltp/output.txt".into()),
            "sysbench-oltp".into(),
        )
    } else if workload == "hpl" || workload == "stream" {
        (Some("hpcc/output.txt".into()), "hpcc".into())
    } else if workload.ends_with("-rr") {
        let dir = format!("sockperf-{}", &workload[..3]);
        (Some(format!("{dir}/output.txt")), dir)
    } else if let Some(rw) = workload.strip_prefix("fio-seed001-") {
        // Seed 001's job differs in block size and job count, not in its report.
        (Some(format!("fio-{rw}.json")), ".".to_owned())
    } else if workload.contains("-stream-") {
        let proto = if workload.starts_with("udp") {
            "udp"
        } else {
            "tcp"
        };
        (Some(format!("iperf3-{proto}.json")), ".".to_owned())
    } else if workload.starts_with("stress-ng-") || NOSQL.contains(&workload) {
        (Some(format!("{workload}/output.txt")), workload.to_owned())
    } else if workload.starts_with("sysbench-") {
        (Some(format!("{workload}.txt")), ".".to_owned())
    } else {
        (Some(format!("{workload}.json")), ".".to_owned())
    };
    (stdout, None, workdir)
}

#[test]
fn every_builtin_primary_metric_is_parsed_from_its_fixture() {
    for w in catalog() {
        let (stdout, stderr, workdir) = fixture_of(&w.name);
        let metrics = parse_fixture(w.parser, stdout.as_deref(), stderr.as_deref(), &workdir)
            .unwrap_or_else(|e| panic!("{}: {e}", w.name));
        assert!(
            metrics.iter().any(|m| m.name == w.primary),
            "{}: primary `{}` not in {:?}",
            w.name,
            w.primary,
            metrics.iter().map(|m| &m.name).collect::<Vec<_>>()
        );
        let mut names: Vec<&str> = metrics.iter().map(|m| m.name.as_str()).collect();
        names.sort_unstable();
        let n = names.len();
        names.dedup();
        assert_eq!(names.len(), n, "{}: duplicate metric names", w.name);
        for metric in &metrics {
            assert!(
                !metric.unit.is_empty() && metric.value.is_finite(),
                "{}: {metric:?}",
                w.name
            );
            assert!(
                metric
                    .name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
                "{}: {} is not snake_case",
                w.name,
                metric.name
            );
        }
    }
}

/// The declared metrics (`src/metrics.tsv`) are what each built-in's parser yields on
/// its fixture: names, units, directions and order. `ISOLAB_UPDATE_METRICS=1`
/// writes the table from the fixtures instead.
#[test]
fn every_builtin_declares_the_metrics_its_fixture_yields() {
    let mut table = String::new();
    let mut wrong = Vec::new();
    for w in catalog() {
        let (stdout, stderr, workdir) = fixture_of(&w.name);
        let parsed = parse_fixture(w.parser, stdout.as_deref(), stderr.as_deref(), &workdir)
            .unwrap_or_else(|e| panic!("{}: {e}", w.name));
        let parsed: Vec<(String, String, Direction)> = parsed
            .into_iter()
            .map(|m| (m.name, m.unit, m.direction))
            .collect();
        for (name, unit, direction) in &parsed {
            let dir = if *direction == Higher {
                "higher"
            } else {
                "lower"
            };
            table.push_str(&format!("{}\t{name}\t{unit}\t{dir}\n", w.name));
        }
        let declared: Vec<(String, String, Direction)> =
            isolab_workloads::declared_metrics(&w.name)
                .into_iter()
                .map(|m| (m.name, m.unit, m.direction))
                .collect();
        if declared != parsed {
            wrong.push(w.name.clone());
        }
    }
    if std::env::var_os("ISOLAB_UPDATE_METRICS").is_some() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/metrics.tsv");
        std::fs::write(path, table).unwrap();
        return;
    }
    assert!(
        wrong.is_empty(),
        "declared metrics differ from the fixtures' for {wrong:?}: run this test with ISOLAB_UPDATE_METRICS=1"
    );
}

#[test]
fn time_parser_needs_no_output() {
    let w = builtin("sysbench-cpu").unwrap();
    let got = parse(
        ParserKind::Time,
        &RunOutput {
            stdout: "",
            stderr: "",
            workdir: Path::new("/nonexistent"),
            wall: Duration::from_millis(2500),
        },
    )
    .unwrap();
    assert_eq!(got, [m("wall_time", "s", Lower, 2.5)]);
    assert_ne!(w.parser, ParserKind::Time);
}

// ---- failure fixtures and error paths ----

#[test]
fn iperf3_connection_refused_quotes_the_error() {
    let err =
        parse_fixture(ParserKind::Iperf3, Some("iperf3-refused.json"), None, ".").unwrap_err();
    assert!(matches!(
        err,
        ParseError::ToolError {
            tool: ParserKind::Iperf3,
            ..
        }
    ));
    assert_eq!(
        err.to_string(),
        "iperf3 reported an error: unable to connect to server: Connection refused"
    );
}

#[test]
fn fio_job_error_quotes_fio_messages() {
    let err = parse_fixture(
        ParserKind::Fio,
        Some("fio-error-rofs.json"),
        Some("fio-error-rofs.stderr"),
        ".",
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "fio reported an error: job `randwrite` failed with error 30: \
         fio: pid=0, err=30/file:filesetup.c:150, func=unlink, error=Read-only file system"
    );
}

#[test]
fn fio_without_json_quotes_fio_messages() {
    let err = parse_fixture(
        ParserKind::Fio,
        Some("fio-no-directory.stdout"),
        Some("fio-no-directory.stderr"),
        ".",
    )
    .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.starts_with("fio reported an error: no JSON report: fio: "),
        "{msg}"
    );
    assert!(
        msg.contains("fio: /tmp/isolab-fixtures/missing is not a directory; "),
        "{msg}"
    );
    assert!(
        msg.contains("func=lstat, error=No such file or directory"),
        "{msg}"
    );
}

#[test]
fn sysbench_fatal_is_quoted() {
    let err = parse_fixture(
        ParserKind::Sysbench,
        Some("sysbench-fileio-unprepared.txt"),
        None,
        ".",
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "sysbench reported an error: FATAL: Cannot open file 'test_file.0' errno = 2 \
         (No such file or directory); WARNING: Did you forget to run the prepare step?"
    );
}

#[test]
fn truncated_outputs_are_errors_naming_what_is_missing() {
    let parse_text = |kind, stdout: &str| {
        parse(
            kind,
            &RunOutput {
                stdout,
                stderr: "",
                workdir: Path::new("/nonexistent"),
                wall: Duration::from_secs(1),
            },
        )
    };
    let text = read("sysbench-fileio.txt");
    let cut = &text[..text.find("    total number of events").unwrap()];
    let err = parse_text(ParserKind::Sysbench, cut).unwrap_err();
    assert!(
        err.to_string().starts_with(
            "sysbench: the report has no `total number of events` in section `General statistics:`"
        ),
        "{err}"
    );

    for file in ["fio-randrw.json", "iperf3-tcp.json"] {
        let kind = if file.starts_with("fio") {
            ParserKind::Fio
        } else {
            ParserKind::Iperf3
        };
        let json = read(file);
        let err = parse_text(kind, &json[..json.len() / 2]).unwrap_err();
        assert!(matches!(err, ParseError::Json { .. }), "{file}: {err:?}");
        let msg = err.to_string();
        assert!(
            msg.contains("is not a complete JSON report") && msg.contains(" … "),
            "{msg}"
        );
    }

    let yaml = read("stress-ng-cpu/stress-ng.yaml");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("stress-ng.yaml"),
        &yaml[..yaml.find("bogo-ops-per-second-real-time").unwrap()],
    )
    .unwrap();
    let err = parse(
        ParserKind::StressNg,
        &RunOutput {
            stdout: "",
            stderr: "",
            workdir: dir.path(),
            wall: Duration::from_secs(1),
        },
    )
    .unwrap_err();
    assert!(
        err.to_string().starts_with(
            "stress-ng: the report has no `bogo-ops-per-second-real-time:` of stressor `cpu`"
        ),
        "{err}"
    );
}

#[test]
fn empty_outputs_are_errors() {
    for kind in [ParserKind::Sysbench, ParserKind::Fio, ParserKind::Iperf3] {
        let err = parse(
            kind,
            &RunOutput {
                stdout: "",
                stderr: "error while loading shared libraries",
                workdir: Path::new("/nonexistent"),
                wall: Duration::from_secs(1),
            },
        )
        .unwrap_err();
        assert!(matches!(err, ParseError::Empty { .. }), "{kind}: {err:?}");
        let msg = err.to_string();
        assert!(
            msg.starts_with(&format!("{kind}: the command printed no report")),
            "{msg}"
        );
        assert!(
            msg.contains("error while loading shared libraries"),
            "{msg}"
        );
    }
    let err = parse_fixture(ParserKind::StressNg, None, None, "no-such-dir").unwrap_err();
    assert!(matches!(err, ParseError::ReportFile { .. }), "{err:?}");
}

#[test]
fn measured_time_comes_from_each_tool_s_own_report() {
    let measured = |kind, stdout: Option<&str>, workdir: &str| {
        let stdout = stdout.map(read).unwrap_or_default();
        let workdir = fixtures().join(workdir);
        isolab_workloads::measured_time(
            kind,
            &RunOutput {
                stdout: &stdout,
                stderr: "",
                workdir: &workdir,
                wall: Duration::from_secs(9),
            },
        )
        .map(|d| d.as_secs_f64())
    };
    for (kind, stdout, workdir, secs) in [
        (ParserKind::Sysbench, Some("sysbench-cpu.txt"), ".", 1.0013),
        (ParserKind::Fio, Some("fio-randread.json"), ".", 2.005),
        (ParserKind::Iperf3, Some("iperf3-tcp.json"), ".", 1.000142),
        // UDP: the sender's span too.
        (ParserKind::Iperf3, Some("iperf3-udp.json"), ".", 1.000085),
        (ParserKind::StressNg, None, "stress-ng-cpu", 1.0025),
    ] {
        assert_eq!(measured(kind, stdout, workdir), Some(secs), "{kind:?}");
    }
    assert_eq!(measured(ParserKind::Time, None, "."), Some(9.0));
    // No report: unknown, never a made-up number.
    assert_eq!(measured(ParserKind::Fio, None, "."), None);
    assert_eq!(
        measured(
            ParserKind::Sysbench,
            Some("sysbench-fileio-unprepared.txt"),
            "."
        ),
        None
    );
}

/// `actual` equals `expected` up to float rounding (the parsers compute some values).
fn assert_metrics(actual: &[Metric], expected: &[Metric]) {
    assert_eq!(actual.len(), expected.len(), "{actual:?}");
    for (a, e) in actual.iter().zip(expected) {
        assert_eq!(
            (&a.name, &a.unit, a.direction),
            (&e.name, &e.unit, e.direction)
        );
        assert!(
            (a.value - e.value).abs() <= 1e-9 * e.value.abs().max(1.0),
            "{}: {} != {}",
            a.name,
            a.value,
            e.value
        );
    }
}

#[test]
fn hpcc_summary_gives_hpl_stream_and_the_rest() {
    // hpcc 1.5.0 (Debian), 2 ranks, hpccmemf.txt `Total=64`, reference BLAS.
    let metrics = parse_fixture(ParserKind::Hpcc, Some("hpcc/output.txt"), None, "hpcc").unwrap();
    assert_metrics(
        &metrics,
        &[
            m("hpl_gflops", "GFLOPS", Higher, 8.87422),
            m("hpl_time", "s", Lower, 1.26148),
            m("stream_copy", "GB/s", Higher, 49.8282),
            m("stream_scale", "GB/s", Higher, 46.1307),
            m("stream_add", "GB/s", Higher, 43.0454),
            m("stream_triad", "GB/s", Higher, 42.5672),
            m("stream_triad_all", "GB/s", Higher, 2.0 * 26.8974),
            m("dgemm_gflops", "GFLOPS", Higher, 5.61055),
            m("ptrans_gbs", "GB/s", Higher, 1.80853),
            m("random_access_gups", "GUP/s", Higher, 0.0229454),
            m("fft_gflops", "GFLOPS", Higher, 6.37368),
            m("pingpong_latency", "µs", Lower, 0.14165),
            m("pingpong_bandwidth", "GB/s", Higher, 8.56325),
        ],
    );
}

#[test]
fn hpcc_killed_or_without_its_report_is_a_clear_error() {
    // Killed (by a timeout) inside its STREAM test: no summary yet.
    let err = parse_fixture(
        ParserKind::Hpcc,
        Some("hpcc-killed/output.txt"),
        None,
        "hpcc-killed",
    )
    .unwrap_err();
    assert!(matches!(err, ParseError::MissingField { .. }), "{err:?}");
    assert!(err.to_string().contains("summary section"), "{err}");
    // Its working directory was read-only: no report, HPL's error on stdout.
    let err = parse_fixture(
        ParserKind::Hpcc,
        Some("hpcc-no-report/output.txt"),
        None,
        "hpcc-no-report",
    )
    .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, ParseError::OutputFile { .. }), "{err:?}");
    assert!(
        text.contains("hpccoutf.txt") && text.contains("--wdir"),
        "{text}"
    );
}

#[test]
fn hpcc_summary_with_a_failed_test_is_a_tool_error() {
    let dir = tempfile::tempdir().unwrap();
    let report = read("hpcc/hpccoutf.txt").replace("Success=1", "Success=0");
    std::fs::write(dir.path().join("hpccoutf.txt"), report).unwrap();
    let err = isolab_workloads::parse(
        ParserKind::Hpcc,
        &RunOutput {
            stdout: "",
            stderr: "",
            workdir: dir.path(),
            wall: Duration::from_secs(1),
        },
    )
    .unwrap_err();
    assert!(err.to_string().contains("Success=0"), "{err}");
}

#[test]
fn ioping_json_gives_latency_statistics_and_quantiles() {
    // ioping 1.3, `-J -c 10 -i 0.05` on ext4: the first request is a warm-up.
    let metrics = parse_fixture(ParserKind::Ioping, Some("ioping.json"), None, ".").unwrap();
    assert_metrics(
        &metrics,
        &[
            m("latency_avg", "µs", Lower, 257.698),
            m("latency_min", "µs", Lower, 206.156),
            m("latency_max", "µs", Lower, 303.721),
            m("latency_mdev", "µs", Lower, 37.472),
            m("latency_p50", "µs", Lower, 245.615),
            m("latency_p99", "µs", Lower, 303.66892),
            m("iops", "IOPS", Higher, 3880.50795),
        ],
    );
    // A truncated report and a missing directory: errors, no panic.
    let err =
        parse_fixture(ParserKind::Ioping, Some("ioping-truncated.json"), None, ".").unwrap_err();
    assert!(matches!(err, ParseError::Json { .. }), "{err:?}");
    let err = parse_fixture(
        ParserKind::Ioping,
        Some("ioping-missing.stdout"),
        Some("ioping-missing.stderr"),
        ".",
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("No such file or directory"),
        "{err}"
    );
}

#[test]
fn redis_benchmark_csv_gives_a_point_per_command() {
    // Redis 7.0.15, redis-benchmark --csv -c 50 -n 20000 -r 100000, loopback.
    let got = parse_fixture(
        ParserKind::RedisBenchmark,
        Some("redis-benchmark/output.txt"),
        None,
        "redis-benchmark",
    )
    .unwrap();
    assert_eq!(got.len(), 8 * 6);
    assert_metrics(
        &got[..6],
        &[
            m("set_requests_per_second", "requests/s", Higher, 45766.59),
            m("set_latency_mean", "ms", Lower, 0.764),
            m("set_latency_p50", "ms", Lower, 0.607),
            m("set_latency_p95", "ms", Lower, 0.935),
            m("set_latency_p99", "ms", Lower, 5.415),
            m("set_latency_max", "ms", Lower, 14.591),
        ],
    );
    // `MSET (10 keys)` is `mset`.
    assert_eq!(
        got[42],
        m("mset_requests_per_second", "requests/s", Higher, 33613.45)
    );
}

#[test]
fn latte_report_gives_the_run_and_each_function() {
    // latte 0.29 against Cassandra 5.0.9 on the host: cassandra-latte's 1000 operations
    // at 1000/s, 100 concurrent requests, 25% writes.
    let got = parse_fixture(
        ParserKind::Latte,
        Some("cassandra-latte/output.txt"),
        None,
        "cassandra-latte",
    )
    .unwrap();
    assert_metrics(
        &got[..9],
        &[
            m("latency_mean", "ms", Lower, 1.8844341759999998),
            m("latency_p50", "ms", Lower, 1.240063),
            m("latency_p95", "ms", Lower, 5.435391),
            m("latency_p99", "ms", Lower, 8.740863),
            m("latency_max", "ms", Lower, 15.343615),
            m("operations_per_second", "op/s", Higher, 968.1559770690243),
            m(
                "requests_per_second",
                "requests/s",
                Higher,
                968.1559770690243,
            ),
            m("operations", "count", Higher, 1000.0),
            m("errors", "count", Lower, 0.0),
        ],
    );
    // Then each function, by name: read, write.
    let names: Vec<&str> = got[9..].iter().map(|m| m.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "read_latency_mean",
            "read_latency_p50",
            "read_latency_p95",
            "read_latency_p99",
            "read_latency_max",
            "write_latency_mean",
            "write_latency_p50",
            "write_latency_p95",
            "write_latency_p99",
            "write_latency_max",
        ]
    );
}

#[test]
fn latte_without_its_report_says_how_to_write_it() {
    let err = parse(
        ParserKind::Latte,
        &RunOutput {
            stdout: "",
            stderr: "error: Failed to connect to Cassandra",
            workdir: Path::new("/nonexistent"),
            wall: Duration::from_secs(1),
        },
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("--output"), "{err}");
    assert!(err.contains("Failed to connect"), "{err}");
}

#[test]
fn sockperf_full_log_gives_round_trips_and_transactions() {
    // sockperf 3.7 ping-pong, 14-byte messages, 1 s at --mps 1000, loopback.
    let tcp = parse_fixture(
        ParserKind::Sockperf,
        Some("sockperf-tcp/output.txt"),
        None,
        "sockperf-tcp",
    )
    .unwrap();
    assert_metrics(
        &tcp,
        &[
            m(
                "transactions_per_second",
                "transactions/s",
                Higher,
                1001.6631414467952,
            ),
            m("rtt_avg", "µs", Lower, 120.0759218181847),
            m("rtt_p50", "µs", Lower, 100.19799999994028),
            m("rtt_p90", "µs", Lower, 140.150099999925),
            m("rtt_p99", "µs", Lower, 583.9034199997859),
        ],
    );
    let udp = parse_fixture(
        ParserKind::Sockperf,
        Some("sockperf-udp/output.txt"),
        None,
        "sockperf-udp",
    )
    .unwrap();
    assert!((udp[4].value - 148.81425000020423).abs() < 1e-6, "{udp:?}");
    // No server: sockperf exits 0 with an empty log; its ERROR line is quoted.
    let err = parse_fixture(
        ParserKind::Sockperf,
        Some("sockperf-refused/output.txt"),
        None,
        "sockperf-refused",
    )
    .unwrap_err();
    assert!(matches!(err, ParseError::ToolError { .. }), "{err:?}");
    assert!(err.to_string().contains("Connection refused"), "{err}");
    // A log cut inside a row.
    let dir = tempfile::tempdir().unwrap();
    let log = read("sockperf-tcp/sockperf.csv");
    let cut = &log[..log.find("packet, txTime").unwrap() + 120];
    std::fs::write(dir.path().join("sockperf.csv"), cut).unwrap();
    let err = isolab_workloads::parse(
        ParserKind::Sockperf,
        &RunOutput {
            stdout: "",
            stderr: "",
            workdir: dir.path(),
            wall: Duration::from_secs(1),
        },
    )
    .unwrap_err();
    assert!(err.to_string().contains("sockperf"), "{err}");
}

#[test]
fn mpi_programs_report_time_and_check_values() {
    let prime = parse_fixture(ParserKind::Json, Some("mpi-prime.json"), None, ".").unwrap();
    assert_metrics(
        &prime,
        &[
            m("execution_time", "s", Lower, 0.005383),
            m("primes", "count", Higher, 9592.0),
            m("ranks", "count", Higher, 2.0),
            m("reductions", "count", Lower, 50.0),
        ],
    );
    let search = parse_fixture(ParserKind::Json, Some("mpi-search.json"), None, ".").unwrap();
    assert_metrics(
        &search,
        &[
            m("execution_time", "s", Lower, 0.072479),
            m("found", "index", Higher, 9_999_999.0),
            m("ranks", "count", Higher, 2.0),
            m("rounds", "count", Lower, 1221.0),
        ],
    );
}

#[test]
fn mpi_programs_cut_short_or_refusing_their_argument_are_clear_errors() {
    let err = parse_fixture(
        ParserKind::Json,
        Some("mpi-search-truncated.json"),
        None,
        ".",
    )
    .unwrap_err();
    assert!(matches!(err, ParseError::Json { .. }), "{err:?}");
    let err = parse_fixture(
        ParserKind::Json,
        Some("mpi-prime-usage.stdout"),
        Some("mpi-prime-usage.stderr"),
        ".",
    )
    .unwrap_err();
    assert!(matches!(err, ParseError::Empty { .. }), "{err:?}");
    assert!(err.to_string().contains("Exit code:    2"), "{err}");
}

#[test]
fn a_failed_segment_fails_the_split_transcode_with_ffmpeg_s_words() {
    let err = parse_fixture(
        ParserKind::Json,
        Some("ffmpeg-split-failed.stdout"),
        Some("ffmpeg-split-failed.stderr"),
        ".",
    )
    .unwrap_err();
    assert!(matches!(err, ParseError::Empty { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("Invalid data found when processing input"),
        "{text}"
    );
}

#[test]
fn the_compile_reports_its_time_and_units_and_a_failed_build_shows_the_compiler_s_error() {
    let ok = parse_fixture(ParserKind::Json, Some("compile.json"), None, ".").unwrap();
    assert_metrics(
        &ok,
        &[
            m("execution_time", "s", Lower, 0.274744),
            m("units", "count", Higher, 3.0),
        ],
    );
    let err = parse_fixture(
        ParserKind::Json,
        Some("compile-failed.stdout"),
        Some("compile-failed.stderr"),
        ".",
    )
    .unwrap_err();
    assert!(matches!(err, ParseError::Empty { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("mod_access_compat.c:378:1: error"), "{text}");
}

// ---- databases: pgbench's per-transaction log, sysbench OLTP through the wrapper ----

/// Each script of the log is its own point; the overall tps is their sum.
#[test]
fn pgbench_log_gives_one_point_per_script() {
    let got = parse_fixture(
        ParserKind::Pgbench,
        Some("pgbench-oltp/output.txt"),
        None,
        "pgbench-oltp",
    )
    .unwrap();
    let value = |n: &str| got.iter().find(|m| m.name == n).map(|m| m.value);
    let scripts = [
        "tpcb_like",
        "point_select",
        "range_select",
        "join_select",
        "update",
        "insert",
    ];
    let sum: f64 = scripts
        .iter()
        .map(|s| value(&format!("{s}_tps")).unwrap())
        .sum();
    assert!((sum - value("tps").unwrap()).abs() < 1e-6 * sum, "{got:?}");
    for s in scripts {
        let p50 = value(&format!("{s}_latency_p50")).unwrap();
        assert!(
            p50 > 0.0 && value(&format!("{s}_latency_p99")).unwrap() >= p50,
            "{s}"
        );
        assert_eq!(value(&format!("{s}_errors")), Some(0.0), "{s}");
    }
    // The first line of the fixture's log: a TPC-B-like transaction of 9 043 µs.
    assert!(value("tpcb_like_latency_p99").unwrap() >= 9.043);
    // Values of the fixture computed apart from the parser (NumPy over its log: 60
    // transactions from the first start, 1795849263.909556 s, to the last end,
    // 1795849263.974729 s; numpy.percentile's linear method), to 1e-9.
    let close = |name: &str, want: f64| {
        let got = value(name).unwrap_or_else(|| panic!("{name} missing: {got:?}"));
        assert!(
            (got - want).abs() <= 1e-9 * want.abs(),
            "{name}: {got} != {want}"
        );
    };
    close("tps", 920.6245335752645);
    close("latency_mean", 2.166433333333333);
    close("latency_p50", 0.483);
    close("latency_p95", 8.4407);
    close("latency_p99", 10.482819999999995);
    close("tpcb_like_tps", 153.4374222625441);
    close("tpcb_like_latency_p50", 8.123);
    close("tpcb_like_latency_p95", 10.6931);
    close("point_select_tps", 199.4686489413073);
    close("point_select_latency_p99", 1.847799999999999);
    close("insert_tps", 61.37496890501763);
    close("insert_latency_mean", 2.082);
    close("update_latency_p95", 6.3515);
}

#[test]
fn pgbench_errors_quote_the_database() {
    let stderr = "pgbench: error: could not count number of branches: ERROR:  relation \"pgbench_branches\" does not exist\nLINE 1: select count(*) from pgbench_branches\n";
    let err = parse(
        ParserKind::Pgbench,
        &RunOutput {
            stdout: "",
            stderr,
            workdir: Path::new("/nonexistent"),
            wall: Duration::from_secs(1),
        },
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "pgbench reported an error: pgbench: error: could not count number of branches: ERROR:  relation \"pgbench_branches\" does not exist"
    );
}

#[test]
fn sysbench_oltp_reads_its_json_and_every_latency() {
    let got = parse_fixture(
        ParserKind::SysbenchOltp,
        Some("sysbench-oltp/output.txt"),
        None,
        "sysbench-oltp",
    )
    .unwrap();
    let value = |n: &str| got.iter().find(|m| m.name == n).map(|m| m.value);
    assert_eq!(value("tps"), Some(234.91));
    assert_eq!(value("qps"), Some(4698.22));
    assert_eq!(value("errors"), Some(0.0));
    let p50 = value("latency_p50").unwrap();
    assert!(p50 > 0.0 && value("latency_p99").unwrap() >= p50, "{got:?}");
}

/// sysbench's JSON report of an OLTP run with `tps`, `errors` and `reconnects` per second
/// over `time` seconds, after its banner.
fn oltp_report(tps: f64, errors: f64, reconnects: f64, time: f64) -> String {
    format!("sysbench 1.0.20\n\nThreads started!\n\n[\n  {{\n    \"time\": {time},\n    \"threads\": 0,\n    \"tps\": {tps},\n    \"qps\": {{ \"total\": {}, \"reads\": 0, \"writes\": 0, \"other\": 0 }},\n    \"latency\": 0,\n    \"errors\": {errors},\n    \"reconnects\": {reconnects}\n  }}\n]\n", tps * 20.0)
}

/// Without an event, the errors and reconnects sysbench reports are counted over the
/// report's time; events without their latency files are an error, not zero errors.
#[test]
fn sysbench_oltp_counts_errors_without_latency_files_and_refuses_events_without_them() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sysbench")).unwrap();
    let run = |stdout: &str| {
        parse(
            ParserKind::SysbenchOltp,
            &RunOutput {
                stdout,
                stderr: "",
                workdir: dir.path(),
                wall: Duration::from_secs(2),
            },
        )
    };
    let got = run(&oltp_report(0.0, 12.5, 0.5, 2.0)).unwrap();
    let value = |n: &str| got.iter().find(|m| m.name == n).map(|m| m.value);
    assert_eq!(value("tps"), Some(0.0));
    assert_eq!(value("errors"), Some(25.0), "{got:?}");
    assert_eq!(value("reconnects"), Some(1.0), "{got:?}");
    let err = run(&oltp_report(234.91, 3.0, 0.0, 1.0)).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains(
            "sysbench reports 234.91 transactions/s but no sysbench/latency.THREAD file holds one"
        ),
        "{text}"
    );
}

#[test]
fn sysbench_oltp_fatal_quotes_the_database() {
    let err = parse_fixture(
        ParserKind::SysbenchOltp,
        Some("sysbench-oltp-refused.txt"),
        None,
        "sysbench-oltp",
    )
    .unwrap_err();
    let text = err.to_string();
    assert!(
        text.starts_with("sysbench-oltp reported an error: FATAL: Connection to database failed: connection to server at \"127.0.0.1\", port 1 failed: Connection refused"),
        "{text}"
    );
}
