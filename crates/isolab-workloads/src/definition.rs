//! What a workload is ([`WorkloadDef`]), whether built in or from a spec, and its
//! templates rendered ([`RenderedWorkload`]). Below the catalog ([`crate::builtins`])
//! and the definitions of its families (OLTP, OLAP, NoSQL), which all build these.

use crate::template::{render, Params, TemplateError};
use crate::ParserKind;
use serde::Serialize;

/// A workload definition: a built-in or one from a spec's `[workload.NAME]` table.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WorkloadDef {
    /// Unique name, used in specs and reports (e.g. `sysbench-cpu`).
    pub name: String,
    /// One line saying what it measures.
    pub description: String,
    /// Template of the measured command (see [`render`]).
    pub command: String,
    /// Template run before the measured command, not measured (e.g. sysbench fileio prepare).
    pub prepare: Option<String>,
    /// Template run after the measured command, always, even when it failed.
    pub cleanup: Option<String>,
    /// Template started in the background before `command` (e.g. `iperf3 -s`);
    /// the lab waits until `{port}` is listening, runs `command`, then stops the server.
    pub server: Option<String>,
    /// Files written into the run's working directory before `prepare` (an input file
    /// the tool reads from its current directory, e.g. HPCC's `hpccinf.txt`).
    pub files: Vec<crate::FileTemplate>,
    /// The parser that reads the measured command's output.
    pub parser: ParserKind,
    /// The metric whose coefficient of variation decides when a cell is stable.
    pub primary: String,
    /// Needs `{workdir}` on a real disk (fio, sysbench fileio).
    pub uses_disk: bool,
    /// Executables it needs, for environment capture and "not installed" errors.
    pub tools: Vec<String>,
    /// The service stack it runs, for a service workload: the measured `command`
    /// then runs against the stack's components ([`crate::Measure::Command`]) or
    /// is empty and a load generator measures ([`crate::Measure::Load`]).
    pub stack: Option<crate::StackDef>,
    /// Debian packages it needs inside the image (added to the experiment's image recipe).
    pub packages: Vec<String>,
    /// The amount of fixed work (`{work}`) of a workload that takes one, with its
    /// unit; `[workload.NAME] work = N` changes it.
    pub work: Option<Work>,
    /// Files built once on the host and placed into each run's working directory
    /// (`{workdir}/NAME`): a compiled program, an input video.
    pub assets: Vec<crate::AssetDef>,
}

/// A fixed-work workload's amount of work.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Work {
    /// How much (`{work}`).
    pub amount: u64,
    /// Of what, for listings and reports ("s of video", "numbers tested").
    pub unit: String,
}

/// The argv vectors of a workload's templates, rendered with one set of [`Params`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RenderedWorkload {
    /// The rendered [`WorkloadDef::prepare`].
    pub prepare: Option<Vec<String>>,
    /// The rendered [`WorkloadDef::command`].
    pub command: Vec<String>,
    /// The rendered [`WorkloadDef::cleanup`].
    pub cleanup: Option<Vec<String>>,
    /// The rendered [`WorkloadDef::server`].
    pub server: Option<Vec<String>>,
}

impl WorkloadDef {
    /// Renders every template of the workload with `p`.
    pub fn render(&self, p: &Params) -> Result<RenderedWorkload, TemplateError> {
        let optional = |t: &Option<String>| t.as_deref().map(|t| render(t, p)).transpose();
        Ok(RenderedWorkload {
            prepare: optional(&self.prepare)?,
            command: render(&self.command, p)?,
            cleanup: optional(&self.cleanup)?,
            server: optional(&self.server)?,
        })
    }
}
