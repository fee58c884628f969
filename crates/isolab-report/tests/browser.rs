//! Opens a page with every chart in headless Chromium (Debian's `chromium`): the page must
//! load without console errors and a non-trivial screenshot must be written.
//!
//! Skipped, with the reason printed, when `/usr/bin/chromium` (or `$ISOLAB_CHROMIUM`) is
//! missing (`apt-get install -y chromium`). Set `ISOLAB_PLOTS_SCREENSHOT=/some/file.png` (or
//! `ISOLAB_REPORT_SCREENSHOT`, `ISOLAB_ISOLATION_SCREENSHOT`,
//! `ISOLAB_SCALABILITY_SCREENSHOT`, `ISOLAB_LOAD_SCREENSHOT`,
//! `ISOLAB_QUICK_START_SCREENSHOT` for the reports) to keep the screenshot (and, for a
//! report, its page beside it as `.html`).

mod experiment;
mod fixtures;

use std::fs;
use std::io::Read as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use isolab_report::plots::{
    grouped_bars, histogram, lines, scaling, time_series, BarChart, ScalingChart, TimeSeriesChart,
};

/// The scalability chart of the isolab curve of the synthetic scalability experiment.
fn scaling_chart() -> ScalingChart {
    let (_store, data) = experiment::scalability_experiment();
    let analysis = isolab_report::analyse(
        &data,
        experiment::scalability_options(&data),
        &isolab_report::compare::CompareOptions::default(),
    );
    isolab_report::scalability::chart(&analysis.scalability[1])
}

/// Debian's Chromium; `ISOLAB_CHROMIUM` overrides it (e.g. to check the skip path).
const CHROMIUM: &str = "/usr/bin/chromium";
const TIMEOUT: Duration = Duration::from_secs(60);

/// Seed 003's two load charts (response time; requests per second with the users on a
/// right-hand axis) of the synthetic load experiment.
fn load_charts() -> [TimeSeriesChart; 2] {
    let (_, analysis) = experiment::load_analysis();
    let group = &analysis.load[0];
    [
        isolab_report::load::latency_chart(group).expect("latencies were reported"),
        isolab_report::load::rate_chart(group),
    ]
}

/// The page: the seven charts, one "no data" chart, and a script that throws (a console
/// error the test catches) if a chart did not become an SVG element with a size.
fn page() -> String {
    let [latency, rate] = load_charts();
    let charts = [
        grouped_bars(&fixtures::bars()),
        histogram(&fixtures::histogram()),
        lines(&fixtures::lines()),
        time_series(&fixtures::time_series()),
        scaling(&scaling_chart()),
        time_series(&latency),
        time_series(&rate),
        grouped_bars(&BarChart {
            title: "an empty chart".into(),
            ..BarChart::default()
        }),
    ];
    let mut body = String::new();
    for svg in &charts {
        body.push_str("<figure>");
        body.push_str(svg);
        body.push_str("</figure>\n");
    }
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>isolab plots</title>\
         <style>body{{font-family:sans-serif;margin:16px;background:#fff}}figure{{margin:0 0 16px 0}}\
         svg{{max-width:100%;height:auto;display:block}}</style></head><body>\n{body}\
         <script>\
         const svgs = document.querySelectorAll('svg[role=img]');\
         if (svgs.length !== {n}) throw new Error('expected {n} charts, found ' + svgs.length);\
         svgs.forEach((s, i) => {{ const b = s.getBBox(); if (!(b.width > 0 && b.height > 0)) throw new Error('chart ' + i + ' is empty'); }});\
         console.log('isolab-plots: ' + svgs.length + ' charts rendered');\
         </script></body></html>\n",
        n = charts.len()
    )
}

/// Renders `page` in headless Chromium; `None` (after a skip with the reason) when Chromium is
/// missing. Returns Chromium's log and the screenshot's path, after asserting that the
/// page logged no console error and the screenshot is not trivial.
fn render(page: &str, window: &str, dir: &Path) -> Option<(String, std::path::PathBuf)> {
    let chromium = std::env::var_os("ISOLAB_CHROMIUM")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| CHROMIUM.into());
    if !chromium.exists() {
        isolab_skip::skip(format!(
            "{} is missing; install it with `apt-get install -y chromium`",
            chromium.display()
        ));
        return None;
    }
    let profile = tempfile::tempdir().expect("temp profile dir");
    let html = dir.join("page.html");
    let shot = dir.join("shot.png");
    fs::write(&html, page).expect("write page");

    let mut child = Command::new(&chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(["--enable-logging=stderr", "--v=0"])
        .arg(format!("--screenshot={}", shot.display()))
        .arg(format!("--window-size={window}"))
        .arg(format!("file://{}", html.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start chromium");

    // Read stderr on a thread so a chatty Chromium cannot block on a full pipe.
    let mut stderr = child.stderr.take().expect("stderr piped");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for chromium") {
            break status;
        }
        if start.elapsed() > TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within {TIMEOUT:?}; killed it");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let log = reader.join().unwrap_or_default();

    let console_errors: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("CONSOLE") && (l.contains("Uncaught") || l.contains("Error")))
        .collect();
    assert!(
        console_errors.is_empty(),
        "console errors:\n{}",
        console_errors.join("\n")
    );
    assert!(status.success(), "chromium failed ({status}):\n{log}");
    let size = fs::metadata(&shot)
        .unwrap_or_else(|e| panic!("no screenshot at {}: {e}\n{log}", shot.display()))
        .len();
    assert!(size > 10 * 1024, "screenshot is only {size} bytes");
    Some((log, shot))
}

#[test]
fn charts_render_in_headless_chromium() {
    let dir = tempfile::tempdir().expect("temp dir");
    let Some((log, shot)) = render(&page(), "1280,3600", dir.path()) else {
        return;
    };
    // The page's script ran and its console output reached us, so errors would have too.
    assert!(
        log.lines()
            .any(|l| l.contains("CONSOLE") && l.contains("isolab-plots: 8 charts rendered")),
        "the page's console message is missing from Chromium's log:\n{log}"
    );
    if let Some(keep) = std::env::var_os("ISOLAB_PLOTS_SCREENSHOT") {
        fs::copy(&shot, &keep).expect("copy screenshot");
        eprintln!("screenshot copied to {}", Path::new(&keep).display());
    }
}

/// Renders the report of `data` in Chromium at `window` and checks that its script ran;
/// keeps the screenshot where the environment variable `keep` says. Returns the page.
fn report_renders(
    data: &isolab_report::ExperimentData,
    options: isolab_report::SummaryOptions,
    window: &str,
    keep: &str,
) -> (isolab_report::Analysis, String) {
    let analysis = isolab_report::analyse(
        data,
        options,
        &isolab_report::compare::CompareOptions::default(),
    );
    let page = isolab_report::html::html(data, &analysis);
    let dir = tempfile::tempdir().expect("temp dir");
    if let Some((log, shot)) = render(&page, window, dir.path()) {
        // The report's own script ran (it logs once it has wired up the sortable tables).
        assert!(
            log.lines()
                .any(|l| l.contains("CONSOLE") && l.contains("isolab-report: ready")),
            "the report's console message is missing:\n{log}"
        );
        if let Some(keep) = std::env::var_os(keep) {
            fs::copy(&shot, &keep).expect("copy screenshot");
            let html = Path::new(&keep).with_extension("html");
            fs::write(&html, &page).expect("write the page");
            eprintln!(
                "screenshot copied to {}, the page to {}",
                Path::new(&keep).display(),
                html.display()
            );
        }
    }
    (analysis, page)
}

#[test]
fn the_report_renders_in_headless_chromium() {
    let (_store, data) = experiment::experiment();
    let options = experiment::options(&data);
    report_renders(&data, options, "1400,5000", "ISOLAB_REPORT_SCREENSHOT");
}

#[test]
fn the_isolation_report_renders_in_headless_chromium() {
    let (_store, data) = experiment::isolation_experiment();
    let options = experiment::isolation_options(&data);
    let (analysis, _) = report_renders(&data, options, "1400,4000", "ISOLAB_ISOLATION_SCREENSHOT");
    assert!(analysis.isolation.is_some());
}

#[test]
fn the_scalability_report_renders_in_headless_chromium() {
    let (_store, data) = experiment::scalability_experiment();
    let options = experiment::scalability_options(&data);
    let (analysis, page) =
        report_renders(&data, options, "1400,3000", "ISOLAB_SCALABILITY_SCREENSHOT");
    assert_eq!(analysis.scalability.len(), 2);
    assert!(page.contains("<h2>Scalability</h2>"));
}

#[test]
fn the_load_report_renders_in_headless_chromium() {
    let (_store, data) = experiment::load_experiment();
    let options = experiment::load_options(&data);
    let (analysis, page) = report_renders(&data, options, "1400,3000", "ISOLAB_LOAD_SCREENSHOT");
    assert_eq!(analysis.load.len(), 1);
    assert!(page.contains("<h2>Load over time</h2>"));
}

/// The built-in quick start's shape, at the width of a laptop screen.
#[test]
fn the_quick_start_report_renders_in_headless_chromium() {
    let (_store, data) = experiment::quick_start_experiment();
    let options = experiment::quick_start_options(&data);
    report_renders(&data, options, "1280,4000", "ISOLAB_QUICK_START_SCREENSHOT");
}
