//! `isolab show EXP`: the summary of a stored experiment, as text, Markdown or JSON.

use std::path::Path;

use anyhow::Result;

use super::Exit;
use crate::cli::ShowArgs;
use crate::host;

pub fn show(db: &Path, args: ShowArgs) -> Result<Exit> {
    let store = host::existing_store(db)?;
    let id = store.resolve(&args.experiment)?;
    let data = isolab_report::ExperimentData::load(&store, id)?;
    let analysis = super::analyse(&data, args.all_metrics);
    let options = &analysis.options;
    let Some(style) = super::table_style(args.format.get()) else {
        let cells: Vec<serde_json::Value> = data
            .cells
            .iter()
            .map(|c| serde_json::json!({ "index": c.index, "key": c.key, "stop_reason": c.stop_reason }))
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "id": data.record.id,
                "name": data.record.name,
                "status": data.record.status.as_str(),
                "seed": data.record.seed.to_string(),
                "baseline": options.baseline,
                "cells": cells,
                "rows": analysis.rows,
                "comparisons": analysis.comparisons,
                "quality": analysis.quality,
                "isolation": analysis.isolation,
                "scalability": analysis.scalability,
                "load": analysis.load,
                "interruptions": data.interruptions.len(),
            }))?
        );
        return Ok(Exit::Success);
    };
    let markdown = style.is_markdown();
    // Lines under a heading: indented for a terminal, a list in Markdown.
    let item = if markdown { "- " } else { "  " };
    let r = &data.record;
    println!(
        "experiment {} ({}): {}, {} cells, {} runs stored, seed {}, baseline {}",
        r.id,
        r.name,
        r.status.as_str(),
        data.cells.len(),
        data.runs.len(),
        r.seed,
        if options.baseline.is_empty() {
            "none".into()
        } else {
            isolab_lab::spec::levels_key(&options.baseline)
        }
    );
    print!(
        "{}",
        isolab_report::table::summary_table(&analysis.rows, &analysis.factors, style)
    );
    for line in isolab_report::findings::findings(&analysis.rows, &analysis.options.baseline) {
        println!("finding: {line}");
    }
    if let Some(isolation) = &analysis.isolation {
        println!();
        print!("{}", isolation.render(style));
    }
    if !analysis.scalability.is_empty() {
        println!();
        print!(
            "{}",
            isolab_report::scalability::render(&analysis.scalability, style)
        );
    }
    if !analysis.load.is_empty() {
        println!();
        print!("{}", isolab_report::load::render(&analysis.load, style));
    }
    if markdown {
        println!();
    }
    for line in isolab_report::quality::quality_lines(&analysis.quality) {
        println!("{}{line}", if markdown { "- " } else { "" });
    }
    println!("{}stop reasons:", if markdown { "\n" } else { "" });
    for c in &data.cells {
        println!(
            "{item}[{}] {}: {}",
            c.index,
            c.key,
            c.stop_reason.as_deref().unwrap_or("not finished")
        );
    }
    let failed: Vec<_> = data.runs.iter().filter(|r| r.error.is_some()).collect();
    for run in failed.iter().take(10) {
        println!(
            "{item}failed run {} (cell {} repetition {}): {}",
            run.id,
            run.cell,
            run.repetition,
            run.error.as_deref().unwrap_or("")
        );
    }
    if !data.interruptions.is_empty() {
        println!(
            "{}{} interrupted attempts recorded (not counted as runs)",
            if markdown { "\n" } else { "" },
            data.interruptions.len()
        );
    }
    Ok(Exit::Success)
}
