//! sockperf `ping-pong --full-log {workdir}/sockperf.csv`: request-response latency.
//!
//! The full log holds one CSV row per message of the measured interval
//! (`packet, txTime(sec), rxTime(sec), latency(usec)`); sockperf's `latency` column
//! is half the round trip, so the round-trip time is taken from the send and
//! receive times, as netperf's `TCP_RR`/`UDP_RR` report it. A transaction is one
//! request and its response.
//!
//! | name | unit | direction | source |
//! |---|---|---|---|
//! | `transactions_per_second` | transactions/s | higher | rows ÷ (last `rxTime` − first `txTime`) |
//! | `rtt_avg` | µs | lower | mean of `rxTime` − `txTime` |
//! | `rtt_p50`, `rtt_p90`, `rtt_p99` | µs | lower | its percentiles ([`isolab_stats::percentile`]) |
//!
//! sockperf exits 0 also when it could not connect: a log without rows is a
//! [`ParseError::ToolError`] quoting its `ERROR:` line. A log without its closing
//! line of dashes is truncated, and an error.

use super::{excerpt, finite, percentile, report_file, tail, ParseError};
use crate::{Metric, ParserKind, RunOutput};
use isolab_stats::Direction::{Higher, Lower};

const TOOL: ParserKind = ParserKind::Sockperf;

/// The full log's file name inside the run's working directory.
pub const SOCKPERF_LOG: &str = "sockperf.csv";

const HEADER: &str = "packet, txTime(sec), rxTime(sec), latency(usec)";

pub(super) fn parse(out: &RunOutput) -> Result<Vec<Metric>, ParseError> {
    let printed = format!("{}\n{}", out.stdout, out.stderr);
    let text = report_file(
        TOOL,
        out,
        SOCKPERF_LOG,
        "pass --full-log {workdir}/sockperf.csv",
    )?;
    let Some(at) = text.find(HEADER) else {
        if let Some(error) = printed.lines().find(|l| l.contains("ERROR")) {
            return Err(ParseError::ToolError {
                tool: TOOL,
                message: error.trim().to_owned(),
            });
        }
        return Err(ParseError::MissingField {
            tool: TOOL,
            field: format!("the full log's `{HEADER}` rows"),
            excerpt: excerpt(&text),
        });
    };
    let mut rtts = Vec::new();
    let (mut first_tx, mut last_rx) = (f64::INFINITY, f64::NEG_INFINITY);
    let mut closed = false;
    for line in text[at + HEADER.len()..].lines().map(str::trim) {
        if line.is_empty() {
            continue;
        }
        if line.starts_with("---") {
            closed = true;
            break;
        }
        let cols: Vec<&str> = line.split(',').collect();
        if cols.len() != 4 {
            return Err(ParseError::MissingField {
                tool: TOOL,
                field: format!("4 columns in row `{line}` (truncated log?)"),
                excerpt: excerpt(line),
            });
        }
        let tx = finite(TOOL, "txTime", cols[1])?;
        let rx = finite(TOOL, "rxTime", cols[2])?;
        first_tx = first_tx.min(tx);
        last_rx = last_rx.max(rx);
        rtts.push((rx - tx) * 1e6);
    }
    if !closed {
        return Err(ParseError::MissingField {
            tool: TOOL,
            field: "the line of dashes that closes the full log (truncated log?)".into(),
            excerpt: tail(&text),
        });
    }
    if rtts.is_empty() || last_rx <= first_tx {
        return Err(ParseError::MissingField {
            tool: TOOL,
            field: "a measured message in the full log".into(),
            excerpt: excerpt(&text),
        });
    }
    let mean = rtts.iter().sum::<f64>() / rtts.len() as f64;
    let rate = rtts.len() as f64 / (last_rx - first_tx);
    Ok(vec![
        Metric::new("transactions_per_second", "transactions/s", Higher, rate),
        Metric::new("rtt_avg", "µs", Lower, mean),
        Metric::new("rtt_p50", "µs", Lower, percentile(&rtts, 50.0)),
        Metric::new("rtt_p90", "µs", Lower, percentile(&rtts, 90.0)),
        Metric::new("rtt_p99", "µs", Lower, percentile(&rtts, 99.0)),
    ])
}
