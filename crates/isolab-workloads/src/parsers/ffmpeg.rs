//! ffmpeg `-benchmark` on stderr and its `-progress` file in the working directory.
//!
//! With `-benchmark`, ffmpeg ends its log with `bench: utime=…s stime=…s rtime=…s`
//! (user, system and real time of the transcode, measured by ffmpeg itself from
//! the start of transcoding to its end, so the process's start-up is not in it)
//! and `bench: maxrss=…kB`. `-progress FILE` writes `key=value` blocks while it
//! runs; the last block ends with `progress=end` only when the transcode finished.
//!
//! | name | unit | direction | source |
//! |---|---|---|---|
//! | `execution_time` | s | lower | `bench: rtime` |
//! | `cpu_user`, `cpu_system` | s | lower | `bench: utime`, `stime` |
//! | `max_rss` | KiB | lower | `bench: maxrss` |
//! | `frames` | frames | higher | the last `frame=` of the progress file (a check: every run encodes the same frames) |
//! | `fps` | frames/s | higher | `frames` / `execution_time` |
//!
//! A progress file without `progress=end` (the transcode was cut short) or a log
//! without the `bench:` lines is an error that quotes the end of ffmpeg's log.

use super::{excerpt, finite, report_file, tail, ParseError};
use crate::{Metric, ParserKind, RunOutput};
use isolab_stats::Direction::{Higher, Lower};

/// The progress file the ffmpeg workloads write (`-progress {workdir}/ffmpeg-progress.txt`).
pub const FFMPEG_PROGRESS: &str = "ffmpeg-progress.txt";

const TOOL: ParserKind = ParserKind::Ffmpeg;

pub(super) fn parse(out: &RunOutput) -> Result<Vec<Metric>, ParseError> {
    let progress = report_file(
        TOOL,
        out,
        FFMPEG_PROGRESS,
        "run ffmpeg with `-progress {workdir}/ffmpeg-progress.txt`",
    )?;
    let last = |key: &str| {
        progress
            .lines()
            .rev()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
            .map(str::trim)
    };
    if last("progress") != Some("end") {
        return Err(ParseError::MissingField {
            tool: TOOL,
            field: format!("`progress=end` in {FFMPEG_PROGRESS} (the transcode did not finish)"),
            excerpt: tail(out.stderr),
        });
    }
    let frames = last("frame").ok_or_else(|| ParseError::MissingField {
        tool: TOOL,
        field: format!("`frame=` in {FFMPEG_PROGRESS}"),
        excerpt: tail(&progress),
    })?;
    let frames = finite(TOOL, "frame", frames)?;
    // `bench: utime=31.418s stime=0.327s rtime=16.270s` and `bench: maxrss=527032kB`.
    let bench: Vec<(&str, &str)> = out
        .stderr
        .lines()
        .filter_map(|l| l.trim().strip_prefix("bench:"))
        .flat_map(str::split_whitespace)
        .filter_map(|kv| kv.split_once('='))
        .collect();
    let value = |key: &str, suffix: &str| -> Result<f64, ParseError> {
        let (_, v) = bench.iter().rev().find(|(k, _)| *k == key).ok_or_else(|| {
            ParseError::MissingField {
                tool: TOOL,
                field: format!("`bench: {key}=` on stderr (run ffmpeg with -benchmark)"),
                excerpt: excerpt(out.stderr),
            }
        })?;
        finite(TOOL, key, v.strip_suffix(suffix).unwrap_or(v))
    };
    let rtime = value("rtime", "s")?;
    let mut metrics = vec![
        Metric::new("execution_time", "s", Lower, rtime),
        Metric::new("cpu_user", "s", Lower, value("utime", "s")?),
        Metric::new("cpu_system", "s", Lower, value("stime", "s")?),
        Metric::new("max_rss", "KiB", Lower, value("maxrss", "kB")?),
        Metric::new("frames", "frames", Higher, frames),
    ];
    if rtime > 0.0 {
        metrics.push(Metric::new("fps", "frames/s", Higher, frames / rtime));
    }
    Ok(metrics)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Path, PathBuf};
    use std::time::Duration;

    /// A fixture directory: ffmpeg's stderr in `output.txt`, its progress file beside it.
    fn fixture(name: &str) -> (PathBuf, String) {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(name);
        let stderr = std::fs::read_to_string(dir.join("output.txt")).unwrap();
        (dir, stderr)
    }

    fn output<'a>(dir: &'a Path, stderr: &'a str) -> RunOutput<'a> {
        RunOutput {
            stdout: "",
            stderr,
            workdir: dir,
            wall: Duration::from_secs(5),
        }
    }

    #[test]
    fn a_finished_transcode_gives_time_cpu_memory_and_frames() {
        let (dir, stderr) = fixture("ffmpeg-x265");
        let m = parse(&output(&dir, &stderr)).unwrap();
        let get = |n: &str| m.iter().find(|x| x.name == n).unwrap().value;
        assert_eq!(get("execution_time"), 4.167);
        assert_eq!(get("cpu_user"), 7.776);
        assert_eq!(get("cpu_system"), 0.245);
        assert_eq!(get("max_rss"), 504840.0);
        assert_eq!(get("frames"), 60.0);
        assert!((get("fps") - 60.0 / 4.167).abs() < 1e-9);
    }

    #[test]
    fn a_transcode_cut_short_is_an_error_that_quotes_the_log() {
        let (dir, stderr) = fixture("ffmpeg-x265-killed");
        let e = parse(&output(&dir, &stderr)).unwrap_err().to_string();
        assert!(e.contains("progress=end"), "{e}");
        assert!(e.contains("Killed"), "{e}");
    }

    #[test]
    fn a_missing_input_is_an_error_that_quotes_ffmpeg() {
        let (dir, stderr) = fixture("ffmpeg-no-input");
        let e = parse(&output(&dir, &stderr)).unwrap_err().to_string();
        assert!(e.contains(FFMPEG_PROGRESS), "{e}");
        assert!(e.contains("No such file or directory"), "{e}");
    }

    #[test]
    fn a_log_without_bench_lines_names_the_missing_option() {
        let (dir, _) = fixture("ffmpeg-x265");
        let e = parse(&output(&dir, "frame=60\n")).unwrap_err().to_string();
        assert!(e.contains("-benchmark"), "{e}");
    }
}
