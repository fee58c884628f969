//! `isolab check SPEC`: validate and print the expanded matrix.

use anyhow::Result;

use super::Exit;
use crate::cli::CheckArgs;
use crate::host;

pub fn check(db: &std::path::Path, args: CheckArgs) -> Result<Exit> {
    let facts = host::facts()?;
    let spec = super::load_spec(&args.spec, &facts)?;
    let (lo, hi) = spec.run_bounds();
    let (pace, pace_note) = stored_pace(db);
    let estimate = spec.estimate(|c| {
        pace.iter()
            .find(|p| p.platform == c.platform.name && p.workload == c.workload.name)
            .map(|p| p.per_run)
    });
    let (tlo, thi) = (estimate.at_least, estimate.at_most);
    if args.json {
        println!(
            "{}",
            super::json::document(
                "check",
                &serde_json::json!({
                    "spec": spec,
                    "runs": { "at_least": lo, "at_most": hi, "warmups": spec.cells.len() as u64 * u64::from(spec.repetitions.warmup) },
                    "estimated_seconds": { "at_least": tlo.as_secs(), "at_most": thi.as_secs(), "cells_from_stored_runs": estimate.from_history },
                })
            )?
        );
        return Ok(Exit::Success);
    }
    println!("{}: ok — experiment `{}`", args.spec.display(), spec.name);
    for (f, levels) in &spec.factors {
        println!("  {f}: {}", levels.join(", "));
    }
    println!("{} cells:", spec.cells.len());
    for c in &spec.cells {
        println!(
            "  [{}] {}  ({} cpus, {})",
            c.index,
            c.key(),
            c.shape.cpu_count(),
            c.workload.primary
        );
    }
    for d in &spec.dropped {
        println!("  dropped: {} — {}", d.key, d.reason);
    }
    for w in &spec.warnings {
        println!("  warning: {w}");
    }
    let r = spec.repetitions;
    println!(
        "runs: {lo}..{hi} counted (+{} warm-ups), {}..{} per cell: a cell compared with the baseline until its comparisons are decided (never before {} rounds), others until CV ≤ {:.1}%",
        spec.cells.len() as u32 * r.warmup,
        r.min,
        r.max,
        isolab_stats::MIN_PAIRS,
        r.target_cv * 100.0
    );
    if r.max < isolab_stats::MIN_PAIRS as u32 && !spec.baseline.is_empty() {
        let n = r.max as usize;
        let min_p = isolab_stats::mann_whitney_min_p(n, n);
        let alpha = isolab_stats::VerdictRule::default().alpha;
        let consequence = if min_p >= alpha {
            "every verdict will be `?`"
        } else {
            "only large effects can be called"
        };
        println!(
            "  warning: repetitions.max = {n} is below {}, the fewest rounds at which comparisons are paired: they are unpaired (Mann–Whitney, smallest p {min_p:.3} with {n} runs a side, against α = {alpha}), so {consequence}",
            isolab_stats::MIN_PAIRS,
        );
    }
    let basis = match (estimate.from_history, spec.cells.len()) {
        (0, _) => format!(
            "from the spec alone (duration or load profile, a few seconds of start-up a run){}",
            pace_note.map(|n| format!("; {n}")).unwrap_or_default()
        ),
        (k, n) if k == n => format!("every cell from the pace of its platform and workload's runs in {}", db.display()),
        (k, n) => format!("{k} of {n} cells from the pace of their platform and workload's runs in {}, the others from the spec alone", db.display()),
    };
    println!(
        "estimated time: {} to {} ({basis})",
        humanize(tlo),
        humanize(thi)
    );
    if spec.cells.iter().any(|c| c.platform.kind.needs_image()) {
        match &spec.recipe {
            Some(r) => {
                let packages: Vec<&str> = r.packages().iter().map(String::as_str).collect();
                let cached =
                    isolab_image::cached(r, std::path::Path::new(isolab_image::DEFAULT_CACHE_ROOT));
                println!(
                    "image: {} (Debian {}: {}; {})",
                    spec.image.display(),
                    r.suite(),
                    packages.join(", "),
                    if cached.is_some() {
                        "built"
                    } else {
                        "not built yet: `isolab run` builds it first, about 2 minutes"
                    }
                );
            }
            None => println!("image: {} (as it is)", spec.image.display()),
        }
        for r in &spec.guest_recipes {
            let root = std::path::Path::new(isolab_image::DEFAULT_CACHE_ROOT);
            println!(
                "guest image: {} (Debian {}, the same packages; {})",
                r.dir_in(root).display(),
                r.suite(),
                if isolab_image::cached(r, root).is_some() {
                    "built"
                } else {
                    "not built yet: `isolab run` builds it first, about 2 minutes, and fetches the guests' kernels"
                }
            );
        }
    }
    println!(
        "baseline: {}",
        if spec.baseline.is_empty() {
            "none".into()
        } else {
            isolab_lab::spec::levels_key(&spec.baseline)
        }
    );
    Ok(Exit::Success)
}

fn humanize(d: std::time::Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    } else {
        format!("{}m{:02}s", s / 60, s % 60)
    }
}

/// How long runs of each platform and workload took in the store at `db`, when there is
/// one to read (a check never creates a store); else why not, when that is worth saying.
fn stored_pace(db: &std::path::Path) -> (Vec<isolab_store::Pace>, Option<String>) {
    if !host::is_url(db) && !db.exists() {
        return (Vec::new(), None);
    }
    match host::existing_store(db).and_then(|s| Ok(s.run_pace()?)) {
        Ok(pace) => (pace, None),
        Err(e) => (
            Vec::new(),
            Some(format!("the store's past runs could not be read: {e:#}")),
        ),
    }
}
