//! Load generators: their parsers on fixtures captured from the real tools
//! (`tests/fixtures/load/`, see its README), and each installed generator run for about
//! two seconds against an nginx this test starts (skipped, through `isolab_skip`, when nginx
//! or the generator is not installed; an nginx that is installed but does not start fails
//! the test).
//!
//! `cargo test -p isolab-workloads --test parsers -- --ignored capture_load_fixtures`
//! re-captures the fixtures (then update the expected values below).

use isolab_workloads::load::{
    invocation, parse_load, Generator, Invocation, LoadProfile, LoadResult, LoadSpec, Request,
};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn load_fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/load")
}

// ---------------------------------------------------------------- the fixtures' loads

/// The body nginx serves at `/index.html`: 10 000 bytes, as in seed 003.
const PAGE_BYTES: usize = 10_000;

fn front() -> Request {
    Request::get("front", "/index.html")
}

fn missing() -> Request {
    Request::get("missing", "/missing.html")
}

/// A ramp from 1 to 4 users over 3 s, then 4 users for 1 s.
fn small_ramp() -> LoadProfile {
    LoadProfile::Ramp {
        from: 1,
        to: 4,
        over: secs(3),
        hold: secs(1),
    }
}

/// The captured fixtures: directory name and spec.
fn fixture_specs() -> Vec<(&'static str, LoadSpec)> {
    let spec = |generator, requests, profile| LoadSpec {
        generator,
        requests,
        profile,
        timeout: secs(5),
    };
    vec![
        (
            "jmeter-ramp",
            spec(Generator::Jmeter, vec![front(), missing()], small_ramp()),
        ),
        (
            "jmeter-simultaneous",
            spec(
                Generator::Jmeter,
                vec![front()],
                LoadProfile::Simultaneous { requests: 10 },
            ),
        ),
        (
            "locust-ramp",
            spec(Generator::Locust, vec![front(), missing()], small_ramp()),
        ),
        (
            "wrk-users",
            spec(
                Generator::Wrk,
                vec![front()],
                LoadProfile::Users {
                    users: 4,
                    duration: secs(3),
                },
            ),
        ),
        (
            "vegeta-steps",
            spec(
                Generator::Vegeta,
                vec![front(), missing()],
                LoadProfile::Steps {
                    steps: vec![(20.0, secs(2)), (40.0, secs(2))],
                },
            ),
        ),
    ]
}

// ---------------------------------------------------------------- nginx and the runner

/// An nginx serving a 10 000-byte `/index.html` on a loopback port, delaying requests so
/// that it serves 50 a second at most (`limit_req` with a large burst: requests queue
/// instead of failing, so a few seconds of closed-loop load stay small and latency grows
/// with users), as one process (`master_process off`) that is killed on drop with its
/// temp dir removed.
struct Nginx {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Nginx {
    /// Starts nginx on a free port; `Err` names what failed (nginx must be installed).
    fn start() -> Result<Nginx, String> {
        let nginx = find("nginx").ok_or("nginx not found (apt-get install nginx-light)")?;
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let root = dir.path().to_owned();
        let root = root.as_path();
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| e.to_string())?
            .port();
        std::fs::create_dir(root.join("www")).unwrap();
        std::fs::write(root.join("www/index.html"), "x".repeat(PAGE_BYTES)).unwrap();
        let d = root.display();
        std::fs::write(
            root.join("nginx.conf"),
            format!(
                "daemon off;\nmaster_process off;\nworker_processes 1;\npid {d}/nginx.pid;\n\
                 error_log {d}/error.log;\nevents {{ worker_connections 1024; }}\n\
                 http {{\n  access_log off;\n  client_body_temp_path {d}/tmp;\n  proxy_temp_path {d}/tmp;\n\
                 fastcgi_temp_path {d}/tmp;\n  uwsgi_temp_path {d}/tmp;\n  scgi_temp_path {d}/tmp;\n\
                 limit_req_zone $server_port zone=all:1m rate=50r/s;\n\
                 server {{ listen 127.0.0.1:{port}; root {d}/www; limit_req zone=all burst=1000; }}\n}}\n"
            ),
        )
        .unwrap();
        // nginx's workers run as nobody when started as root: let them read the page.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o755)).unwrap();
        let child = Command::new(nginx)
            .arg("-p")
            .arg(root)
            .arg("-c")
            .arg(root.join("nginx.conf"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("nginx: {e}"))?;
        let mut n = Nginx {
            child,
            port,
            _dir: dir,
        };
        let until = Instant::now() + secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > until || n.child.try_wait().unwrap().is_some() {
                let log = std::fs::read_to_string(root.join("error.log")).unwrap_or_default();
                return Err(format!("nginx did not listen on {port}: {log}"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(n)
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `program`'s path: itself when absolute, else found on `PATH`.
fn find(program: &str) -> Option<PathBuf> {
    let p = Path::new(program);
    if p.is_absolute() {
        return p.is_file().then(|| p.to_owned());
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/usr/local/bin".into()])
        .map(|d| d.join(program))
        .find(|c| c.is_file())
}

/// Writes the invocation's files into `workdir` and runs its commands there (each
/// under `timeout 120`); returns what they printed.
fn run(inv: &Invocation, workdir: &Path) -> (String, String) {
    for (name, content) in &inv.files {
        std::fs::write(workdir.join(name), content).unwrap();
    }
    let (mut stdout, mut stderr) = (String::new(), String::new());
    for argv in &inv.commands {
        let out = Command::new("timeout")
            .arg("120")
            .args(argv)
            .envs(inv.env.iter().map(|(k, v)| (k, v)))
            .current_dir(workdir)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        stdout.push_str(&String::from_utf8_lossy(&out.stdout));
        stderr.push_str(&String::from_utf8_lossy(&out.stderr));
        assert!(
            out.status.success(),
            "{argv:?}: {}\n{stdout}\n{stderr}",
            out.status
        );
    }
    (stdout, stderr)
}

/// Why `generator` cannot run here, if it cannot.
fn missing_tool(generator: Generator) -> Option<String> {
    let missing = std::iter::once(generator.program())
        .chain(generator.required_files().iter().copied())
        .find(|f| find(f).is_none())?;
    Some(format!(
        "{generator}: {missing} not found ({})",
        generator.install_hint()
    ))
}

// ---------------------------------------------------------------- fixture tests

fn parse_fixture(name: &str, generator: Generator) -> LoadResult {
    let dir = load_fixtures().join(name);
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap_or_default();
    parse_load(generator, &dir, &read("stdout"), &read("stderr"))
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Checks what every result must satisfy: totals add up, intervals are every second
/// of every name and add up to the totals (for tools that count every request in
/// them).
fn check_consistent(r: &LoadResult, intervals_hold_all: bool) {
    assert_eq!(r.overall.requests, r.overall.successes + r.overall.failures);
    let sum: u64 = r.requests.iter().map(|t| t.requests).sum();
    assert_eq!(sum, r.overall.requests);
    for t in &r.requests {
        let mine: Vec<_> = r.intervals.iter().filter(|i| i.request == t.name).collect();
        let starts: Vec<f64> = mine.iter().map(|i| i.start_s).collect();
        let want: Vec<f64> = (0..mine.len()).map(|k| k as f64).collect();
        assert_eq!(starts, want, "{}", t.name);
        if intervals_hold_all {
            assert_eq!(mine.iter().map(|i| i.requests).sum::<u64>(), t.requests);
            assert_eq!(mine.iter().map(|i| i.failures).sum::<u64>(), t.failures);
        }
        for i in &mine {
            assert!(i.failures <= i.requests);
            if let Some(l) = i.latency_ms {
                assert!(l.p50 <= l.p90 && l.p90 <= l.p99 && l.p99 <= l.max, "{i:?}");
            }
        }
    }
}

#[test]
fn jmeter_ramp_fixture() {
    let r = parse_fixture("jmeter-ramp", Generator::Jmeter);
    check_consistent(&r, true);
    let names: Vec<&str> = r.requests.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["front", "missing"]);
    let (front, missing) = (&r.requests[0], &r.requests[1]);
    assert_eq!(front.failures, 0);
    assert_eq!(missing.successes, 0);
    assert!(
        r.notes
            .iter()
            .any(|n| n.starts_with("missing: ") && n.ends_with(" failed with 404")),
        "{:?}",
        r.notes
    );
    // each user alternates front and missing
    assert!(front.requests.abs_diff(missing.requests) <= 4);
    // the ramp: users grow from 1 to 4
    let users: Vec<f64> = r
        .intervals
        .iter()
        .filter(|i| i.request == "front")
        .filter_map(|i| i.users)
        .collect();
    // threads start at 0, 1, 2 and 3 s: each second's mean of allThreads grows (the
    // first sample may come late while JMeter's first thread loads the HTTP classes)
    assert!(users[0] < 2.5, "{users:?}");
    assert!(users.windows(2).all(|w| w[0] < w[1]), "{users:?}");
    assert!(*users.last().unwrap() > 3.0, "{users:?}");
    // nginx serves 50 requests a second: 1 to 4 users wait 20 to 80 ms
    let l = front.latency_ms.unwrap();
    assert!(l.p50 > 20.0 && l.p50 < 200.0, "{l:?}");
    assert!(
        r.overall.span > secs(3) && r.overall.span < secs(6),
        "{:?}",
        r.overall.span
    );
    let names: Vec<String> = r.metrics().into_iter().map(|m| m.name).collect();
    assert!(names.contains(&"missing/failed_requests".to_owned()));
}

#[test]
fn jmeter_simultaneous_fixture() {
    let r = parse_fixture("jmeter-simultaneous", Generator::Jmeter);
    check_consistent(&r, true);
    assert_eq!((r.overall.requests, r.overall.successes), (10, 10));
    assert_eq!(r.intervals.len(), 1);
    // released together by the Synchronizing Timer: the first start to the last end is
    // not much more than the slowest request (the JVM woke the ten threads and loaded
    // the HTTP client's classes within 90 ms in the capture)
    let l = r.overall.latency_ms.unwrap();
    assert!(
        r.overall.span.as_secs_f64() * 1000.0 < l.max + 200.0,
        "{:?} {l:?}",
        r.overall.span
    );
}

#[test]
fn locust_ramp_fixture() {
    let r = parse_fixture("locust-ramp", Generator::Locust);
    check_consistent(&r, false);
    let names: Vec<&str> = r.requests.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["front", "missing"]);
    assert_eq!(r.requests[0].failures, 0);
    assert_eq!(r.requests[1].successes, 0);
    assert!(
        r.notes
            .iter()
            .any(|n| n.starts_with("missing: ") && n.contains("404")),
        "{:?}",
        r.notes
    );
    let in_intervals: u64 = r.intervals.iter().map(|i| i.requests).sum();
    assert!(in_intervals <= r.overall.requests && in_intervals * 10 >= r.overall.requests * 8);
    let most = r
        .intervals
        .iter()
        .filter_map(|i| i.users)
        .fold(0.0, f64::max);
    assert_eq!(most, 4.0);
    let l = r.overall.latency_ms.unwrap();
    assert!(l.p50 > 20.0 && l.p50 < 200.0, "{l:?}");
}

#[test]
fn wrk_users_fixture() {
    let r = parse_fixture("wrk-users", Generator::Wrk);
    check_consistent(&r, true);
    assert_eq!(r.requests[0].name, "front");
    assert_eq!(r.overall.failures, 0);
    assert!(r
        .intervals
        .iter()
        .all(|i| i.latency_ms.is_none() && i.users.is_none()));
    let l = r.overall.latency_ms.unwrap();
    assert!(l.p50 > 20.0 && l.p50 < 200.0, "{l:?}");
    // nginx serves 50 requests a second whatever the connections
    let rate = r.achieved_rate();
    assert!(rate > 30.0 && rate < 100.0, "{rate}");
}

#[test]
fn vegeta_steps_fixture() {
    let r = parse_fixture("vegeta-steps", Generator::Vegeta);
    check_consistent(&r, true);
    // 20/s for 2 s, then 40/s for 2 s: 120 requests, half of them 404s
    assert_eq!(r.overall.requests, 120);
    assert_eq!((r.requests[0].failures, r.requests[1].successes), (0, 0));
    let profile = &fixture_specs()[4].1.profile;
    assert_eq!(isolab_workloads::load::saturation(profile, &r, 0.2), None);
    let per_second: Vec<u64> = r
        .intervals
        .iter()
        .filter(|i| i.request == "front")
        .map(|i| i.requests)
        .collect();
    assert!(per_second[0] >= 9 && per_second[0] <= 11, "{per_second:?}");
    assert!(per_second[3] >= 19 && per_second[3] <= 21, "{per_second:?}");
}

#[test]
fn vegeta_refused_fixture_counts_every_request_failed() {
    let r = parse_fixture("vegeta-refused", Generator::Vegeta);
    check_consistent(&r, true);
    assert_eq!(r.overall.successes, 0);
    assert_eq!(r.overall.failures, r.overall.requests);
    assert!(r.notes[0].contains("connection refused"), "{:?}", r.notes);
    let m = r.metrics();
    assert_eq!(m[0].name, "requests_per_second");
    assert_eq!(m[0].value, 0.0);
}

// ---------------------------------------------------------------- live runs

/// Runs `spec` against a fresh nginx and parses the result; `None` (after a skip with the
/// reason) when the generator or nginx is not installed. An nginx that does not start is a
/// failure, not a skip.
fn live(spec: &LoadSpec) -> Option<LoadResult> {
    if let Some(why) = missing_tool(spec.generator) {
        isolab_skip::skip(why);
        return None;
    }
    if find("nginx").is_none() {
        isolab_skip::skip("nginx not found (apt-get install nginx-light)");
        return None;
    }
    let nginx = Nginx::start().unwrap_or_else(|why| panic!("{why}"));
    let dir = tempfile::tempdir().unwrap();
    let inv = invocation(spec, &nginx.url(), dir.path(), 1).unwrap();
    let (stdout, stderr) = run(&inv, dir.path());
    Some(parse_load(spec.generator, dir.path(), &stdout, &stderr).unwrap())
}

fn two_seconds(generator: Generator) -> LoadSpec {
    let profile = if generator == Generator::Vegeta {
        LoadProfile::Rate {
            rate: 20.0,
            duration: secs(2),
        }
    } else {
        LoadProfile::Users {
            users: 2,
            duration: secs(2),
        }
    };
    LoadSpec {
        generator,
        requests: vec![front()],
        profile,
        timeout: secs(5),
    }
}

fn check_live(generator: Generator) {
    let Some(r) = live(&two_seconds(generator)) else {
        return;
    };
    assert!(r.overall.requests >= 10, "{r:?}");
    assert_eq!(r.overall.failures, 0, "{:?}", r.notes);
    assert!(!r.intervals.is_empty());
}

#[test]
fn live_jmeter() {
    check_live(Generator::Jmeter);
}

#[test]
fn live_locust() {
    check_live(Generator::Locust);
}

#[test]
fn live_wrk() {
    check_live(Generator::Wrk);
}

#[test]
fn live_vegeta() {
    check_live(Generator::Vegeta);
}

/// Re-captures `tests/fixtures/load/`: runs every fixture's spec against nginx and keeps
/// the files the parser reads, the generated inputs and what the commands printed.
#[test]
#[ignore = "re-captures the fixtures; needs every generator and nginx"]
fn capture_load_fixtures() {
    let nginx = Nginx::start().unwrap();
    for (name, spec) in fixture_specs() {
        capture(name, &spec, &nginx.url());
    }
    // vegeta against a port nothing listens on
    let closed = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let refused = LoadSpec {
        generator: Generator::Vegeta,
        requests: vec![front()],
        profile: LoadProfile::Rate {
            rate: 5.0,
            duration: secs(1),
        },
        timeout: secs(1),
    };
    capture(
        "vegeta-refused",
        &refused,
        &format!("http://127.0.0.1:{closed}"),
    );
}

fn capture(name: &str, spec: &LoadSpec, url: &str) {
    let dir = load_fixtures().join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let inv = invocation(spec, url, &dir, 2).unwrap();
    let (stdout, stderr) = run(&inv, &dir);
    std::fs::write(dir.join("stdout"), stdout).unwrap();
    std::fs::write(dir.join("stderr"), stderr).unwrap();
    let commands: Vec<String> = inv.commands.iter().map(|c| c.join(" ")).collect();
    std::fs::write(dir.join("commands"), commands.join("\n") + "\n").unwrap();
    // vegeta's binary results are encoded into results.csv.
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .unwrap_or_default();
        if ext == "bin" {
            std::fs::remove_file(path).unwrap();
        }
    }
}
