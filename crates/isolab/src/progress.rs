//! Showing a running experiment: a progress bar with ETA, the current cell and its
//! CV so far; nothing with --quiet; JSON lines with --json.

use indicatif::{ProgressBar, ProgressStyle};
use isolab_lab::{Event, Observer};

pub enum Progress {
    Bar {
        bar: ProgressBar,
        at_most: u64,
        /// CV and n of each cell's primary metric so far, by cell index.
        cv: std::collections::HashMap<u32, (f64, usize)>,
    },
    Quiet,
    Json,
}

impl Progress {
    pub fn new(quiet: bool, json: bool) -> Self {
        if json {
            Progress::Json
        } else if quiet {
            Progress::Quiet
        } else {
            Progress::Bar {
                bar: ProgressBar::hidden(),
                at_most: 0,
                cv: Default::default(),
            }
        }
    }

    pub fn finish(&self) {
        if let Progress::Bar { bar, .. } = self {
            bar.finish_and_clear();
        }
    }
}

impl Observer for Progress {
    fn event(&mut self, event: &Event) {
        match self {
            Progress::Quiet => {}
            Progress::Json => {
                if let Ok(line) = crate::commands::json::line(event) {
                    println!("{line}");
                }
            }
            Progress::Bar {
                bar,
                at_most,
                cv: cvs,
            } => match event {
                Event::Started {
                    experiment,
                    name,
                    cells,
                    runs_at_least,
                    runs_at_most,
                    seed,
                    runs_stored,
                } => {
                    eprintln!(
                        "experiment {experiment} ({name}): {cells} cells, {runs_at_least}..{runs_at_most} runs to go (warm-ups included), seed {seed}{}",
                        if *runs_stored > 0 { format!(", {runs_stored} runs already stored") } else { String::new() }
                    );
                    *bar = ProgressBar::new(*runs_at_least);
                    *at_most = *runs_at_most;
                    cvs.clear();
                    bar.set_style(
                        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} runs (at most {prefix}) ETA {eta}  {msg}")
                            .unwrap_or_else(|_| ProgressStyle::default_bar())
                            .progress_chars("=> "),
                    );
                    bar.set_prefix(at_most.to_string());
                }
                Event::RunStarted {
                    cell,
                    repetition,
                    warmup,
                    ..
                } => {
                    bar.set_message(format!(
                        "{cell} {}{repetition}",
                        if *warmup { "warm-up " } else { "run " }
                    ));
                }
                Event::RunFinished {
                    cell,
                    repetition,
                    warmup,
                    ok,
                    cv,
                    n,
                    error,
                    ..
                } => {
                    // More runs than the minimum plan: the cell is not stable yet.
                    if bar.position() + 1 > bar.length().unwrap_or(0) {
                        bar.set_length(bar.position() + 1);
                    }
                    bar.inc(1);
                    let cv = cv.map_or(String::new(), |c| format!(" CV {:.1}% (n={n})", c * 100.0));
                    bar.set_message(format!(
                        "{cell} {}{repetition}{cv}",
                        if *warmup { "warm-up " } else { "run " }
                    ));
                    match error.as_deref() {
                        Some(e) if !ok && e.starts_with("did not report") => {
                            bar.println(format!("run {repetition} of {cell}: {e}"));
                        }
                        _ if !ok => bar.println(format!(
                            "run {repetition} of {cell} failed: {}",
                            error.as_deref().unwrap_or("unknown error")
                        )),
                        _ => {}
                    }
                }
                Event::CellStopped { cell, reason, .. } => {
                    if ["failed", "max", "did not report"]
                        .iter()
                        .any(|r| reason.starts_with(r))
                    {
                        bar.println(format!("{cell}: {reason}"));
                    }
                }
            },
        }
    }
}
