//! iperf3 client `-J` report (TCP or UDP).
//!
//! Throughput is reported in **Gbit/s** (10⁹ bit/s, iperf3's `bits_per_second`
//! divided by 10⁹): loopback and data-centre links read naturally in it, and a
//! rate-limited link of 100 Mbit/s is still a readable 0.1.
//!
//! | name | unit | direction | source |
//! |---|---|---|---|
//! | `sender_throughput` | Gbit/s | higher | `end.sum_sent.bits_per_second` |
//! | `receiver_throughput` | Gbit/s | higher | `end.sum_received.bits_per_second` |
//! | `retransmits` | retransmits | lower | `end.sum_sent.retransmits` (TCP on Linux) |
//! | `jitter` | ms | lower | `end.sum.jitter_ms` (UDP) |
//! | `lost_percent` | % | lower | `end.sum.lost_percent` (UDP) |
//! | `local_cpu_utilization`, `remote_cpu_utilization` | % | lower | `end.cpu_utilization_percent.host_total`, `.remote_total` |
//!
//! A report with an `error` field (connection refused, server gone, …) is a
//! [`ParseError::ToolError`] quoting it, even when it also holds partial results.

use super::{first_json, json_get, json_number, ParseError};
use crate::{Metric, ParserKind, RunOutput};
use isolab_stats::Direction::{Higher, Lower};

const TOOL: ParserKind = ParserKind::Iperf3;

pub(super) fn parse(out: &RunOutput) -> Result<Vec<Metric>, ParseError> {
    let root = first_json(TOOL, out)?;
    if let Some(error) = root.get("error") {
        let message = error
            .as_str()
            .map_or_else(|| error.to_string(), str::to_owned);
        return Err(ParseError::ToolError {
            tool: TOOL,
            message,
        });
    }
    let number = |path: &[&str]| json_number(TOOL, &root, path, out);
    let optional = |path: &[&str]| -> Result<Option<f64>, ParseError> {
        match json_get(&root, path) {
            Some(_) => number(path).map(Some),
            None => Ok(None),
        }
    };

    let mut metrics = vec![
        Metric::new(
            "sender_throughput",
            "Gbit/s",
            Higher,
            number(&["end", "sum_sent", "bits_per_second"])? / 1e9,
        ),
        Metric::new(
            "receiver_throughput",
            "Gbit/s",
            Higher,
            number(&["end", "sum_received", "bits_per_second"])? / 1e9,
        ),
    ];
    if let Some(r) = optional(&["end", "sum_sent", "retransmits"])? {
        metrics.push(Metric::new("retransmits", "retransmits", Lower, r));
    }
    if json_get(&root, &["end", "sum", "jitter_ms"]).is_some() {
        metrics.push(Metric::new(
            "jitter",
            "ms",
            Lower,
            number(&["end", "sum", "jitter_ms"])?,
        ));
        metrics.push(Metric::new(
            "lost_percent",
            "%",
            Lower,
            number(&["end", "sum", "lost_percent"])?,
        ));
    }
    for (key, name) in [
        ("host_total", "local_cpu_utilization"),
        ("remote_total", "remote_cpu_utilization"),
    ] {
        if let Some(v) = optional(&["end", "cpu_utilization_percent", key])? {
            metrics.push(Metric::new(name, "%", Lower, v));
        }
    }
    Ok(metrics)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::parsers::test_output as out;

    #[test]
    fn error_field_wins_over_partial_results() {
        let err = parse(&out(
            r#"{"end":{"sum_sent":{"bits_per_second":1},"sum_received":{"bits_per_second":1}},"error":"control socket has closed unexpectedly"}"#,
        ))
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "iperf3 reported an error: control socket has closed unexpectedly"
        );
    }

    #[test]
    fn missing_receiver_sum_is_named() {
        let err = parse(&out(r#"{"end":{"sum_sent":{"bits_per_second":2e9}}}"#)).unwrap_err();
        assert!(
            err.to_string()
                .contains("`end.sum_received.bits_per_second`"),
            "{err}"
        );
    }

    #[test]
    fn minimal_tcp_report() {
        let m = parse(&out(
            r#"{"end":{"sum_sent":{"bits_per_second":2e9},"sum_received":{"bits_per_second":1.5e9}}}"#,
        ))
        .unwrap();
        assert_eq!(
            m,
            [
                Metric::new("sender_throughput", "Gbit/s", Higher, 2.0),
                Metric::new("receiver_throughput", "Gbit/s", Higher, 1.5),
            ]
        );
    }

    #[test]
    fn text_mode_output_is_not_json() {
        let err = parse(&out(
            "Connecting to host 127.0.0.1, port 5201\n[  5] local ...\n",
        ))
        .unwrap_err();
        assert!(err.to_string().contains("JSON report"), "{err}");
    }
}
