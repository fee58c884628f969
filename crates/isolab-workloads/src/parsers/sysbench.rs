//! sysbench 1.0 text report.
//!
//! sysbench 1.0 has no machine-readable output, so this parser reads the fixed
//! report sections that every test prints (`General statistics:`,
//! `Latency (ms):`) and the test-specific ones when present (`CPU speed:`,
//! the memory test's `Total operations:` and `MiB transferred` lines,
//! `File operations:` and `Throughput:` of fileio). A section that is present
//! must be complete; a missing field is an error that names it.
//!
//! Metrics (all tests):
//!
//! | name | unit | direction | source |
//! |---|---|---|---|
//! | `total_time` | s | lower | General statistics: total time |
//! | `total_events` | events | higher | General statistics: total number of events |
//! | `events_per_second` | events/s | higher | CPU speed: events per second (cpu); total events / total time otherwise |
//! | `latency_min`, `latency_avg`, `latency_max` | ms | lower | Latency (ms) |
//! | `latency_pN` | ms | lower | Latency (ms): Nth percentile (N from `--percentile`, 95 by default) |
//!
//! memory: `operations_per_second` (ops/s, higher), `throughput` (MiB/s, higher).
//! fileio: `reads_per_second`, `writes_per_second`, `fsyncs_per_second` (ops/s, higher),
//! `read_throughput`, `write_throughput` and their sum `total_throughput` (MiB/s, higher).

use super::{excerpt, finite, tail, ParseError};
use crate::{Metric, ParserKind, RunOutput};
use isolab_stats::Direction::{self, Higher, Lower};

const TOOL: ParserKind = ParserKind::Sysbench;

/// One `key: value` line of the report and the section it belongs to.
struct Field<'a> {
    section: &'a str,
    key: &'a str,
    value: &'a str,
}

/// The report as a list of fields, plus the raw text for free-form lines.
struct Report<'a> {
    text: &'a str,
    fields: Vec<Field<'a>>,
}

impl<'a> Report<'a> {
    fn new(text: &'a str) -> Self {
        let mut fields = Vec::new();
        let mut section = "";
        for line in text.lines() {
            let line = line.trim_end();
            if line.is_empty() {
                continue;
            }
            let indented = line.starts_with(char::is_whitespace);
            if !indented {
                // A non-indented line ending with `:` opens a section; any other
                // non-indented line closes the current one.
                section = line.strip_suffix(':').unwrap_or("");
                continue;
            }
            if let Some((key, value)) = line.split_once(':') {
                fields.push(Field {
                    section,
                    key: key.trim(),
                    value: value.trim(),
                });
            }
        }
        Report { text, fields }
    }

    fn has_section(&self, section: &str) -> bool {
        self.fields.iter().any(|f| f.section == section)
    }

    fn get(&self, section: &str, key: &str) -> Result<&'a str, ParseError> {
        self.fields
            .iter()
            .find(|f| f.section == section && f.key == key)
            .map(|f| f.value)
            .ok_or_else(|| ParseError::MissingField {
                tool: TOOL,
                field: format!("`{key}` in section `{section}:`"),
                excerpt: excerpt(self.text),
            })
    }

    fn number(&self, section: &str, key: &str) -> Result<f64, ParseError> {
        let value = self.get(section, key)?;
        finite(TOOL, &format!("`{key}` in section `{section}:`"), value)
    }

    /// The first free-form line containing `needle` (the memory test's summary lines).
    fn line_with(&self, needle: &str) -> Option<&'a str> {
        self.text
            .lines()
            .map(str::trim)
            .find(|l| l.contains(needle))
    }
}

pub(super) fn parse(out: &RunOutput) -> Result<Vec<Metric>, ParseError> {
    if let Some(message) = fatal(out) {
        return Err(ParseError::ToolError {
            tool: TOOL,
            message,
        });
    }
    if out.stdout.trim().is_empty() {
        return Err(ParseError::Empty {
            tool: TOOL,
            stderr: tail(out.stderr),
        });
    }
    let r = Report::new(out.stdout);
    let mut metrics = Vec::new();
    let mut push = |name: &str, unit: &str, direction: Direction, value: f64| {
        metrics.push(Metric::new(name, unit, direction, value));
    };

    const GENERAL: &str = "General statistics";
    let total_time_text = r.get(GENERAL, "total time")?;
    let total_time = finite(
        TOOL,
        "`total time` in section `General statistics:`",
        total_time_text.strip_suffix('s').unwrap_or(total_time_text),
    )?;
    let total_events = r.number(GENERAL, "total number of events")?;

    let events_per_second = if r.has_section("CPU speed") {
        r.number("CPU speed", "events per second")?
    } else if total_time > 0.0 {
        total_events / total_time
    } else {
        return Err(ParseError::BadNumber {
            tool: TOOL,
            field: "`total time` in section `General statistics:` (events per second needs a positive time)"
                .to_owned(),
            value: total_time_text.to_owned(),
        });
    };
    push("events_per_second", "events/s", Higher, events_per_second);
    push("total_time", "s", Lower, total_time);
    push("total_events", "events", Higher, total_events);

    const LATENCY: &str = "Latency (ms)";
    for (key, name) in [
        ("min", "latency_min"),
        ("avg", "latency_avg"),
        ("max", "latency_max"),
    ] {
        push(name, "ms", Lower, r.number(LATENCY, key)?);
    }
    for f in r.fields.iter().filter(|f| f.section == LATENCY) {
        if let Some(n) = f.key.strip_suffix("th percentile") {
            let value = finite(
                TOOL,
                &format!("`{}` in section `{LATENCY}:`", f.key),
                f.value,
            )?;
            push(&format!("latency_p{n}"), "ms", Lower, value);
        }
    }

    // memory: "Total operations: 14184 (14099.16 per second)" and
    // "14184.00 MiB transferred (14099.16 MiB/sec)".
    if let Some(line) = r.line_with("Total operations:") {
        let rate = parenthesized(line, " per second)")
            .ok_or_else(|| missing(&r, "`(N per second)` after `Total operations:`"))?;
        push(
            "operations_per_second",
            "ops/s",
            Higher,
            finite(TOOL, "`Total operations` per second", rate)?,
        );
    }
    if let Some(line) = r.line_with(" MiB transferred (") {
        let rate = parenthesized(line, " MiB/sec)")
            .ok_or_else(|| missing(&r, "`(N MiB/sec)` after `MiB transferred`"))?;
        push(
            "throughput",
            "MiB/s",
            Higher,
            finite(TOOL, "`MiB transferred` per second", rate)?,
        );
    }

    // fileio.
    const FILE_OPS: &str = "File operations";
    if r.has_section(FILE_OPS) {
        push(
            "reads_per_second",
            "ops/s",
            Higher,
            r.number(FILE_OPS, "reads/s")?,
        );
        push(
            "writes_per_second",
            "ops/s",
            Higher,
            r.number(FILE_OPS, "writes/s")?,
        );
        push(
            "fsyncs_per_second",
            "ops/s",
            Higher,
            r.number(FILE_OPS, "fsyncs/s")?,
        );
    }
    const THROUGHPUT: &str = "Throughput";
    if r.has_section(THROUGHPUT) {
        let read = r.number(THROUGHPUT, "read, MiB/s")?;
        let written = r.number(THROUGHPUT, "written, MiB/s")?;
        push("read_throughput", "MiB/s", Higher, read);
        push("write_throughput", "MiB/s", Higher, written);
        push("total_throughput", "MiB/s", Higher, read + written);
    }
    Ok(metrics)
}

fn missing(r: &Report, field: &str) -> ParseError {
    ParseError::MissingField {
        tool: TOOL,
        field: field.to_owned(),
        excerpt: excerpt(r.text),
    }
}

/// The number in the last `(` … `suffix` of `line`.
fn parenthesized<'l>(line: &'l str, suffix: &str) -> Option<&'l str> {
    let inner = line.strip_suffix(suffix)?;
    let open = inner.rfind('(')?;
    Some(&inner[open + 1..])
}

/// sysbench's `FATAL:` lines (and the `WARNING:` hints that follow them), from
/// stdout or stderr.
fn fatal(out: &RunOutput) -> Option<String> {
    let lines: Vec<&str> = out
        .stdout
        .lines()
        .chain(out.stderr.lines())
        .map(str::trim)
        .skip_while(|l| !l.starts_with("FATAL:"))
        .filter(|l| l.starts_with("FATAL:") || l.starts_with("WARNING:"))
        .collect();
    if lines.is_empty() {
        None
    } else {
        Some(excerpt(&lines.join("; ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const THREADS: &str = "sysbench 1.0.20 (using system LuaJIT 2.1.0-beta3)

Threads started!


General statistics:
    total time:                          2.0000s
    total number of events:              1000

Latency (ms):
         min:                                    0.33
         avg:                                    1.03
         max:                                   11.67
         99th percentile:                        3.62
         sum:                                 1998.18

Threads fairness:
    events (avg/stddev):           973.0000/1.00
    execution time (avg/stddev):   0.9991/0.00
";

    use crate::parsers::test_output as out;

    fn value(metrics: &[Metric], name: &str) -> f64 {
        metrics
            .iter()
            .find(|m| m.name == name)
            .map(|m| m.value)
            .unwrap()
    }

    #[test]
    fn computes_events_per_second_and_reads_any_percentile() {
        let m = parse(&out(THREADS)).unwrap();
        assert_eq!(value(&m, "events_per_second"), 500.0);
        assert_eq!(value(&m, "latency_p99"), 3.62);
        assert!(m.iter().all(|m| m.name != "latency_p95"));
    }

    #[test]
    fn truncated_report_names_the_missing_field() {
        let cut = &THREADS[..THREADS.find("Latency").unwrap()];
        let err = parse(&out(cut)).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.starts_with("sysbench: the report has no `min` in section `Latency (ms):`"),
            "{msg}"
        );
        assert!(
            msg.contains("total number of events"),
            "excerpt quoted: {msg}"
        );

        let err = parse(&out("sysbench 1.0.20\n\nThreads started!\n")).unwrap_err();
        assert!(
            err.to_string()
                .contains("`total time` in section `General statistics:`"),
            "{err}"
        );
    }

    #[test]
    fn a_present_section_must_be_complete() {
        let text = THREADS.replace(
            "Threads fairness:",
            "Throughput:\n    read, MiB/s:   1.00\n\nThreads fairness:",
        );
        let err = parse(&out(&text)).unwrap_err();
        assert!(
            err.to_string()
                .contains("`written, MiB/s` in section `Throughput:`"),
            "{err}"
        );
    }

    #[test]
    fn bad_numbers_are_quoted() {
        let text = THREADS.replace("1000\n", "lots\n");
        let err = parse(&out(&text)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "sysbench: `total number of events` in section `General statistics:` is \"lots\", not a finite number"
        );
    }

    #[test]
    fn empty_output_and_fatal_errors() {
        let err = parse(&RunOutput {
            stderr: "sysbench: command not found",
            ..out("  \n")
        })
        .unwrap_err();
        assert!(matches!(err, ParseError::Empty { .. }));
        assert!(err.to_string().contains("command not found"), "{err}");

        let err = parse(&RunOutput {
            stderr: "FATAL: `sysbench.cmdline.call_command' function failed: x\n",
            ..out("sysbench 1.0.20\n")
        })
        .unwrap_err();
        assert!(matches!(err, ParseError::ToolError { .. }));
    }
}
