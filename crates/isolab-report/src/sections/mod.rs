//! The report's sections and their one ordered list.
//!
//! A section is one part of what a report says about an experiment (the summary table,
//! the isolation table, the data quality, …). It implements [`Section`]: a title, whether
//! the experiment has anything for it, and each form it has: terminal text or Markdown
//! ([`Style`]), HTML, and members of `isolab show --format json`. [`SECTIONS`] lists them
//! in the order every output shows them; [`Report`] renders the list for one experiment
//! and [`Reach`] says which outputs show which sections:
//!
//! - `isolab show` prints [`Report::text`] with [`Reach::Report`] (every section with a
//!   text form) and its JSON is [`Report::json`];
//! - `isolab run`, at the end of the run, prints [`Report::text`] with [`Reach::Run`];
//! - the HTML report ([`crate::html::html`]) is [`Report::html`] with [`Reach::Report`]
//!   inside the page's frame;
//! - the fleet report ([`crate::html::fleet_html`], `isolab fleet show`) shows each host
//!   with [`Reach::Host`].
//!
//! Adding a section: one file in this directory with a unit struct that implements
//! [`Section`], and one line `module::Struct,` in the `sections!` list below, where it
//! belongs in the order (the line declares the module and lists the section).

use isolab_stats::Verdict;

use crate::analysis::Analysis;
use crate::data::ExperimentData;
use crate::table::Style;

/// Declares each section's module and lists its section, in order: one line each.
macro_rules! sections {
    ($($module:ident::$section:ident),* $(,)?) => {
        $(pub mod $module;)*

        /// Every section, in the order every output shows them.
        pub const SECTIONS: &[&dyn Section] = &[$(&$module::$section),*];
    };
}

sections![
    summary::Summary,
    noisy::Noisy,
    findings::Findings,
    stand_in::StandIn,
    overhead::Overhead,
    platforms::Platforms,
    grid::Grid,
    isolation::Isolation,
    scalability::Scalability,
    sizes::Sizes,
    cpu_share::CpuShare,
    histogram::Histogram,
    load::Load,
    time_series::TimeSeries,
    trend::Trend,
    quality::Quality,
    stop_reasons::StopReasons,
    failed_runs::FailedRuns,
    interruptions::Interruptions,
    environment::Environment,
    spec::Spec,
];

/// Which outputs show a section. Each output shows the sections of its reach and of
/// every narrower one: `Host` ⊂ `Run` ⊂ `Report`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Reach {
    /// Every output, each host's part of a fleet's report included.
    Host,
    /// Also the printout at the end of `isolab run`.
    Run,
    /// Only the whole report of one experiment: `isolab show` and the HTML report.
    Report,
}

/// One part of a report. Only [`Section::title`] is required; a form a section does not
/// have renders empty, and outputs skip a section that does not [apply](Section::applies).
pub trait Section: Sync {
    /// What the section is about; its heading in the HTML report.
    fn title(&self) -> &'static str;

    /// The narrowest output that shows it ([`Reach::Report`] unless said otherwise).
    fn reach(&self) -> Reach {
        Reach::Report
    }

    /// Whether this experiment has anything for the section (text and HTML are only
    /// asked of a section that applies).
    fn applies(&self, _report: &Report) -> bool {
        true
    }

    /// The section as terminal text or Markdown, with the blank lines that separate it
    /// from the section before; empty when it has no text form.
    fn text(&self, _report: &Report, _style: Style) -> String {
        String::new()
    }

    /// The section as HTML; empty when it has no HTML form.
    fn html(&self, _report: &Report) -> String {
        String::new()
    }

    /// Its members of `isolab show --format json` (asked whether or not the section
    /// applies, so that a script always finds its keys).
    fn json(&self, _report: &Report) -> Vec<(&'static str, serde_json::Value)> {
        Vec::new()
    }
}

/// One experiment's data and analysis, rendered section by section.
#[derive(Debug, Clone, Copy)]
pub struct Report<'a> {
    /// What is stored about the experiment.
    pub data: &'a ExperimentData,
    /// What the report says about it.
    pub analysis: &'a Analysis,
    /// Whether text and Markdown list every outlier run (`isolab show --outliers`);
    /// otherwise one line counts them. HTML and JSON always list them.
    pub outliers: bool,
}

impl<'a> Report<'a> {
    /// The report of `data` as `analysis` reads it.
    pub fn new(data: &'a ExperimentData, analysis: &'a Analysis) -> Self {
        Report {
            data,
            analysis,
            outliers: false,
        }
    }

    /// The same report, listing every outlier run in text and Markdown too.
    pub fn with_outliers(self) -> Self {
        Report {
            outliers: true,
            ..self
        }
    }

    /// The sections an output of `reach` shows and that apply to this experiment.
    pub fn sections(&self, reach: Reach) -> impl Iterator<Item = &'static dyn Section> + '_ {
        SECTIONS
            .iter()
            .copied()
            .filter(move |s| s.reach() <= reach && s.applies(self))
    }

    /// Every section of `reach` as text or Markdown, in order.
    pub fn text(&self, reach: Reach, style: Style) -> String {
        self.sections(reach).map(|s| s.text(self, style)).collect()
    }

    /// Every section of `reach` as HTML, in order (the page around it is
    /// [`crate::html::html`]'s); the sections are rendered on every cpu at once.
    pub fn html(&self, reach: Reach) -> String {
        let sections: Vec<&dyn Section> = self.sections(reach).collect();
        crate::parallel::map_in_order(&sections, |s| s.html(self)).concat()
    }

    /// The JSON members of every section.
    pub fn json(&self) -> serde_json::Map<String, serde_json::Value> {
        SECTIONS
            .iter()
            .flat_map(|s| s.json(self))
            .map(|(k, v)| (k.to_owned(), v))
            .collect()
    }
}

/// The CSS class of a verdict's cell.
fn verdict_class(v: Option<Verdict>) -> &'static str {
    match v {
        Some(Verdict::Worse) => "worse",
        Some(Verdict::Better) => "better",
        Some(Verdict::Equivalent) => "same",
        _ => "undecided",
    }
}

/// The level of `factor` in `levels`, empty when it has none.
fn level<'a>(levels: &'a [(String, String)], factor: &str) -> &'a str {
    levels
        .iter()
        .find(|(f, _)| f == factor)
        .map_or("", |(_, l)| l.as_str())
}

/// Lines under a heading: indented for a terminal, a list in Markdown.
fn item(style: Style) -> &'static str {
    if style.is_markdown() {
        "- "
    } else {
        "  "
    }
}
