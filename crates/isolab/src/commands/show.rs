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
    let mut report = isolab_report::Report::new(&data, &analysis);
    if args.outliers {
        report = report.with_outliers();
    }
    let Some(style) = super::table_style(args.format.get()) else {
        let mut json = report.json();
        let r = &data.record;
        json.insert("id".into(), r.id.into());
        json.insert("name".into(), r.name.clone().into());
        json.insert("status".into(), r.status.as_str().into());
        json.insert("seed".into(), r.seed.to_string().into());
        json.insert("baseline".into(), serde_json::json!(options.baseline));
        println!("{}", super::json::document("summary", &json)?);
        return Ok(Exit::Success);
    };
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
    print!("{}", report.text(isolab_report::Reach::Report, style));
    Ok(Exit::Success)
}
