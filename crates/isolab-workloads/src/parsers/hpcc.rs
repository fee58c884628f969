//! HPC Challenge (Debian's `hpcc`): the summary section of `{workdir}/hpccoutf.txt`.
//!
//! HPCC runs HPL (LINPACK), DGEMM, STREAM, PTRANS, RandomAccess, FFT and the MPI
//! latency/bandwidth tests in one go and ends its report file with
//! `Begin of Summary section.` … `End of Summary section.`: one `Key=value` per
//! line, the machine-readable part of its output. Run it in the working directory
//! (`mpirun --wdir {workdir}`), where it reads `hpccmemf.txt` and appends to
//! `hpccoutf.txt`; the last summary in the file is read.
//!
//! | name | unit | direction | source |
//! |---|---|---|---|
//! | `hpl_gflops` | GFLOPS | higher | `HPL_Tflops` × 1000 |
//! | `hpl_time` | s | lower | `HPL_time` |
//! | `stream_copy`, `stream_scale`, `stream_add`, `stream_triad` | GB/s | higher | `SingleSTREAM_*`: one process alone, as a plain `stream` binary |
//! | `stream_triad_all` | GB/s | higher | `StarSTREAM_Triad` × `CommWorldProcs`: every process at once |
//! | `dgemm_gflops` | GFLOPS | higher | `StarDGEMM_Gflops` (per process, all at once) |
//! | `ptrans_gbs` | GB/s | higher | `PTRANS_GBs` |
//! | `random_access_gups` | GUP/s | higher | `MPIRandomAccess_GUPs` |
//! | `fft_gflops` | GFLOPS | higher | `MPIFFT_Gflops` |
//! | `pingpong_latency` | µs | lower | `AvgPingPongLatency_usec` (two or more processes) |
//! | `pingpong_bandwidth` | GB/s | higher | `AvgPingPongBandwidth_GBytes` (two or more processes) |
//!
//! A summary with `Success=0` (a test failed, e.g. its memory could not be
//! allocated) is a [`ParseError::ToolError`] quoting the report's failure lines.

use super::{excerpt, finite, report_file, tail, ParseError};
use crate::{Metric, ParserKind, RunOutput};
use isolab_stats::Direction::{Higher, Lower};
use std::collections::HashMap;

const TOOL: ParserKind = ParserKind::Hpcc;

/// HPCC's report file inside the run's working directory.
pub const HPCC_REPORT: &str = "hpccoutf.txt";

const BEGIN: &str = "Begin of Summary section.";
const END: &str = "End of Summary section.";

pub(super) fn parse(out: &RunOutput) -> Result<Vec<Metric>, ParseError> {
    let text = report_file(
        TOOL,
        out,
        HPCC_REPORT,
        "run hpcc in the run's working directory (mpirun --wdir {workdir})",
    )?;
    let summary = summary(&text).ok_or_else(|| ParseError::MissingField {
        tool: TOOL,
        field: format!("summary section (`{BEGIN}` … `{END}`)"),
        excerpt: tail(&text),
    })?;
    let get = |key: &str| -> Result<f64, ParseError> {
        let v = summary.get(key).ok_or_else(|| ParseError::MissingField {
            tool: TOOL,
            field: format!("`{key}` in the summary"),
            excerpt: excerpt(&text),
        })?;
        finite(TOOL, key, v)
    };
    if get("Success")? != 1.0 {
        let failures: Vec<&str> = text
            .lines()
            .filter(|l| {
                let l = l.to_ascii_lowercase();
                l.contains("fail") && !l.contains("0 tests completed and failed")
            })
            .take(4)
            .collect();
        return Err(ParseError::ToolError {
            tool: TOOL,
            message: format!(
                "its summary says Success=0 (a test failed): {}",
                if failures.is_empty() {
                    excerpt(&text)
                } else {
                    failures.join("; ")
                }
            ),
        });
    }
    let procs = get("CommWorldProcs")?;
    let mut metrics = vec![
        Metric::new("hpl_gflops", "GFLOPS", Higher, get("HPL_Tflops")? * 1000.0),
        Metric::new("hpl_time", "s", Lower, get("HPL_time")?),
    ];
    for op in ["Copy", "Scale", "Add", "Triad"] {
        let name = format!("stream_{}", op.to_ascii_lowercase());
        metrics.push(Metric::new(
            name,
            "GB/s",
            Higher,
            get(&format!("SingleSTREAM_{op}"))?,
        ));
    }
    metrics.extend([
        Metric::new(
            "stream_triad_all",
            "GB/s",
            Higher,
            get("StarSTREAM_Triad")? * procs,
        ),
        Metric::new("dgemm_gflops", "GFLOPS", Higher, get("StarDGEMM_Gflops")?),
        Metric::new("ptrans_gbs", "GB/s", Higher, get("PTRANS_GBs")?),
        Metric::new(
            "random_access_gups",
            "GUP/s",
            Higher,
            get("MPIRandomAccess_GUPs")?,
        ),
        Metric::new("fft_gflops", "GFLOPS", Higher, get("MPIFFT_Gflops")?),
    ]);
    if procs >= 2.0 {
        metrics.push(Metric::new(
            "pingpong_latency",
            "µs",
            Lower,
            get("AvgPingPongLatency_usec")?,
        ));
        metrics.push(Metric::new(
            "pingpong_bandwidth",
            "GB/s",
            Higher,
            get("AvgPingPongBandwidth_GBytes")?,
        ));
    }
    Ok(metrics)
}

/// The `Key=value` lines of the last complete summary section of `text`.
fn summary(text: &str) -> Option<HashMap<&str, &str>> {
    let start = text.rfind(BEGIN)? + BEGIN.len();
    let len = text[start..].find(END)?;
    Some(
        text[start..start + len]
            .lines()
            .filter_map(|l| l.trim().split_once('='))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_closed_summary_counts() {
        assert!(summary("Begin of Summary section.\nA=1\n").is_none());
        let s = summary("Begin of Summary section.\nA=1\nB=x\nEnd of Summary section.\n").unwrap();
        assert_eq!(s.get("A"), Some(&"1"));
        assert_eq!(s.get("B"), Some(&"x"));
    }
}
