//! `[workload.NAME]` tables: a command workload, a built-in tuned (`from`, `work`, in
//! `tuned.rs`), or a service stack (`[[workload.NAME.component]]` or a built-in `stack`, in
//! `service.rs`, measured by `[workload.NAME.load]`, in `load.rs`, or by the workload's
//! `command`), validated with the file, line and column of every error; and the matrix's
//! `workload` levels, which name them.

mod load;
mod service;
mod tuned;

use std::collections::BTreeMap;
use std::ops::Range;
use std::time::Duration;

use isolab_workloads::stacks::BuiltinStack;
use isolab_workloads::{FileTemplate, Measure, Params, ParserKind, StackDef, WorkloadDef};
use toml::Spanned;

use super::matrix::{Level, Levels};
use super::raw::RawWorkload;
use super::validator::{list, Validator};

/// How long a component may take to become ready unless its table says.
pub const DEFAULT_READY_TIMEOUT: Duration = Duration::from_secs(60);

/// A generator's per-request timeout unless the load table says.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The primary metric of a load-measured stack unless the table says.
pub const LOAD_PRIMARY: &str = "requests_per_second";

impl Validator<'_> {
    /// The catalog's workloads, then the spec's own tables; a table with errors is
    /// remembered in `broken_workloads`.
    pub(super) fn workloads(
        &mut self,
        raw: BTreeMap<String, Spanned<RawWorkload>>,
    ) -> BTreeMap<String, WorkloadDef> {
        let catalog = isolab_workloads::catalog();
        let (workloads, broken) = self.named(catalog, |w| w.name.clone(), raw, Self::workload);
        self.broken_workloads.extend(broken);
        workloads
    }

    /// `matrix.workload`: required, each a built-in or a `[workload.NAME]` table (one with
    /// errors counts: they are reported already); `span` is the `[matrix]` table's.
    pub(super) fn workload_levels(
        &mut self,
        raw: Levels,
        span: Range<usize>,
        workloads: &BTreeMap<String, WorkloadDef>,
    ) -> Vec<Level> {
        let broken = self.broken_workloads.clone();
        let workload_names: Vec<String> = workloads.keys().cloned().collect();
        if raw.is_none() {
            self.err(span, "missing `workload` in [matrix]: name at least one workload (see `isolab list --workloads`)");
        }
        self.levels("workload", raw, &[], |l| {
            if workloads.contains_key(l) || broken.iter().any(|b| b == l) {
                Ok(())
            } else {
                Err(format!(
                    "unknown workload `{l}`: expected one of {} or a [workload.{l}] table",
                    list(&workload_names)
                ))
            }
        })
    }

    /// A spec's `[workload.NAME]` table; `None` when it has errors (reported).
    fn workload(&mut self, name: String, raw: Spanned<RawWorkload>) -> Option<WorkloadDef> {
        let span = raw.span();
        let mut raw = raw.into_inner();
        let before = self.errors.len();
        let defines = raw.command.is_some() || raw.stack.is_some() || !raw.component.is_empty();
        if raw.from.is_some() || (!defines && isolab_workloads::builtin(&name).is_some()) {
            return self.tuned_builtin(name, span, raw);
        }
        let work = raw.work.as_ref().and_then(|w| self.work_amount(&name, w));
        // A load table, valid or not (its errors are reported with the stack's), means the
        // generator measures: no parser or command to ask for.
        let load = raw.load.is_some() && (raw.stack.is_some() || !raw.component.is_empty());
        let builtin = match &raw.stack {
            Some(s) => self.builtin_stack(&name, s, raw.component.is_empty()),
            None => None,
        };
        // The image needs a built-in stack's packages, then the table's own.
        let mut packages: Vec<String> = builtin
            .as_ref()
            .map(|b| b.packages.iter().map(|p| p.to_string()).collect())
            .unwrap_or_default();
        let assets = builtin
            .as_ref()
            .map(|b| isolab_workloads::stacks::assets(b.name))
            .unwrap_or_default();
        let own = std::mem::take(&mut raw.packages);
        packages.extend(self.packages(&format!("workload.{name}.packages"), own));
        let mut stack = self.workload_stack(&name, &span, builtin, &mut raw);
        if let Some(c) = &raw.client {
            self.client(&name, c, stack.as_mut());
        }
        let parser = self.parser(&name, raw.parser.as_ref(), load, &span);
        let command = self.measured_command(&name, raw.command.take(), load, stack.as_ref(), &span);
        for t in [
            raw.prepare.as_ref(),
            raw.cleanup.as_ref(),
            raw.server.as_ref(),
        ]
        .into_iter()
        .flatten()
        {
            self.check_command(t, None);
        }
        let files = self.workload_files(&name, std::mem::take(&mut raw.files), stack.is_some());
        if let (Some(s), Some(_)) = (&raw.server, &stack) {
            self.err(
                s.span(),
                "a service stack starts its servers as components: remove `server`",
            );
        }
        let primary = self.primary(&name, raw.primary.take(), parser, span);
        let tools = if !raw.tools.is_empty() {
            raw.tools
        } else if load {
            Vec::new()
        } else {
            tools_of(&command, stack.as_ref())
        };
        (self.errors.len() == before).then(|| WorkloadDef {
            description: raw
                .description
                .unwrap_or_else(|| format!("user-defined workload {name}")),
            name,
            command,
            prepare: raw.prepare.map(Spanned::into_inner),
            cleanup: raw.cleanup.map(Spanned::into_inner),
            server: raw.server.map(Spanned::into_inner),
            parser,
            primary,
            uses_disk: raw.uses_disk,
            tools,
            packages,
            stack,
            files,
            work: work.map(|amount| isolab_workloads::Work {
                amount,
                unit: "work".into(),
            }),
            assets,
        })
    }

    /// `stack = "NAME"` of workload `name`: a built-in stack, for a table without
    /// components of its own.
    fn builtin_stack(
        &mut self,
        name: &str,
        s: &Spanned<String>,
        no_components: bool,
    ) -> Option<BuiltinStack> {
        match isolab_workloads::stacks::stack(s.get_ref()) {
            Some(b) if no_components => Some(b),
            Some(_) => {
                self.err(s.span(), format!("workload.{name} takes its components from stack `{}`: remove its [[workload.{name}.component]] tables, or `stack`", s.get_ref()));
                None
            }
            None => {
                let known: Vec<&str> = isolab_workloads::stacks::stacks()
                    .iter()
                    .map(|b| b.name)
                    .collect();
                self.err(
                    s.span(),
                    format!(
                        "unknown stack `{}`: the built-in stacks are {}",
                        s.get_ref(),
                        if known.is_empty() {
                            "none".to_owned()
                        } else {
                            known.join(", ")
                        }
                    ),
                );
                None
            }
        }
    }

    /// The service stack of workload `name`: the `builtin` stack's components or the
    /// table's own; `None` for a command workload (where a stack's keys are errors) or an
    /// unknown `stack`. Takes the stack's keys out of `raw`.
    fn workload_stack(
        &mut self,
        name: &str,
        span: &Range<usize>,
        builtin: Option<BuiltinStack>,
        raw: &mut RawWorkload,
    ) -> Option<StackDef> {
        if let Some(k) = raw.keep_data.take() {
            self.err(k.span(), format!("`keep_data` tunes a built-in database workload (`[workload.pgbench-oltp]`); workload.{name}'s own stack keeps its data once it names `data_paths`"));
        }
        if let Some(b) = builtin {
            let data_load = raw
                .data_load
                .take()
                .or_else(|| b.data_load.map(|d| Spanned::new(span.clone(), d)));
            return self.stack_of(
                name,
                span.clone(),
                b.components,
                raw.shape_applies.take(),
                (data_load, raw.data_paths.take()),
                raw.load.take(),
            );
        }
        if raw.stack.is_some() {
            return None;
        }
        if raw.component.is_empty() {
            let stray = [
                raw.shape_applies
                    .as_ref()
                    .map(|s| (s.span(), "shape_applies")),
                raw.data_load.as_ref().map(|s| (s.span(), "data_load")),
                raw.data_paths.as_ref().map(|s| (s.span(), "data_paths")),
                raw.load.as_ref().map(|s| (s.span(), "load")),
            ];
            for (at, key) in stray.into_iter().flatten() {
                self.err(at, format!("`{key}` belongs to a service stack: add [[workload.{name}.component]] tables, or remove it"));
            }
            return None;
        }
        let components = std::mem::take(&mut raw.component)
            .into_iter()
            .map(|c| self.component(c))
            .collect();
        self.stack_of(
            name,
            span.clone(),
            components,
            raw.shape_applies.take(),
            (raw.data_load.take(), raw.data_paths.take()),
            raw.load.take(),
        )
    }

    /// `client` of workload `name`: where a stack's measured command runs, the platform
    /// (the default) or the host.
    fn client(&mut self, name: &str, c: &Spanned<String>, stack: Option<&mut StackDef>) {
        match (c.get_ref().as_str(), stack) {
            ("host", Some(s)) if s.measure == Measure::Command => s.measure = Measure::Client,
            ("platform", Some(s)) if s.measure == Measure::Command => {}
            ("host" | "platform", Some(_)) => self.err(c.span(), format!("workload.{name} is measured by its load generator: remove `client`")),
            ("host" | "platform", None) => self.err(c.span(), format!("`client` says where a service stack's measured command runs: give workload.{name} components or a `stack`, or remove it")),
            (other, _) => self.err(c.span(), format!("unknown client `{other}`: expected \"platform\" (the measured command runs in the platform, the default) or \"host\" (on the host, outside the platform's limits)")),
        }
    }

    /// `parser` of workload `name`: required unless a `load` table measures it (then it
    /// is `load`).
    fn parser(
        &mut self,
        name: &str,
        raw: Option<&Spanned<String>>,
        load: bool,
        span: &Range<usize>,
    ) -> ParserKind {
        match (raw, load) {
            (Some(p), _) => match p.get_ref().parse::<ParserKind>() {
                Ok(ParserKind::Load) if !load => {
                    self.err(p.span(), format!("parser `load` reads a load generator: give workload.{name} a [workload.{name}.load] table"));
                    ParserKind::Time
                }
                Ok(k) if load && k != ParserKind::Load => {
                    self.err(p.span(), format!("workload.{name} is measured by its load generator: remove `parser` (or write \"load\")"));
                    k
                }
                Ok(k) => k,
                Err(e) => {
                    self.err(p.span(), e.to_string());
                    ParserKind::Time
                }
            },
            (None, true) => ParserKind::Load,
            (None, false) => {
                let known: Vec<&str> = ParserKind::ALL
                    .iter()
                    .filter(|k| **k != ParserKind::Load)
                    .map(|k| k.as_str())
                    .collect();
                self.err(
                    span.clone(),
                    format!(
                        "workload.{name} needs `parser`: one of {}",
                        known.join(", ")
                    ),
                );
                ParserKind::Time
            }
        }
    }

    /// `command` of workload `name`: the measured command, required unless a `load`
    /// table measures it (then it is an error).
    fn measured_command(
        &mut self,
        name: &str,
        raw: Option<Spanned<String>>,
        load: bool,
        stack: Option<&StackDef>,
        span: &Range<usize>,
    ) -> String {
        match (raw, load) {
            (Some(c), true) => {
                self.err(c.span(), format!("workload.{name} is measured by its load generator, so it has no `command`: remove it (a client run in the platform is a separate workload with the same components)"));
                String::new()
            }
            (Some(c), false) => {
                self.check_command(&c, stack);
                c.into_inner()
            }
            (None, true) => String::new(),
            (None, false) => {
                self.err(span.clone(), format!("workload.{name} needs `command`: the measured command{}", if stack.is_some() { ", run in the platform against the components, or a [workload.NAME.load] table" } else { "" }));
                String::new()
            }
        }
    }

    /// `primary` of workload `name`: required unless `parser` has a default one.
    fn primary(
        &mut self,
        name: &str,
        raw: Option<Spanned<String>>,
        parser: ParserKind,
        span: Range<usize>,
    ) -> String {
        match raw {
            Some(p) => p.into_inner(),
            None if parser == ParserKind::Time => "wall_time".to_owned(),
            None if parser == ParserKind::Load => LOAD_PRIMARY.to_owned(),
            None => {
                self.err(span, format!("workload.{name} needs `primary`: the metric whose CV decides when a cell is stable"));
                String::new()
            }
        }
    }

    /// A command workload's `files`: each path inside the run's working directory and
    /// each text rendering with the placeholders. A service stack's (`in_stack`) belong
    /// to its components.
    fn workload_files(
        &mut self,
        name: &str,
        raw: BTreeMap<String, Spanned<String>>,
        in_stack: bool,
    ) -> Vec<FileTemplate> {
        if let (Some(first), true) = (raw.values().next(), in_stack) {
            self.err(
                first.span(),
                format!("a service stack's files belong to its components: move workload.{name}.files into a [[workload.{name}.component]] table"),
            );
        }
        let mut files = Vec::new();
        for (path, contents) in raw {
            let at = contents.span();
            let file = FileTemplate {
                path,
                contents: contents.into_inner(),
            };
            if !file.stays_inside() {
                self.err(at, format!("workload.{name}.files: `{}` must be a relative path inside the run's working directory (no `..`)", file.path));
            } else if let Err(e) =
                isolab_workloads::render_text(&file.contents, &sample_params(None))
            {
                self.err(at, format!("workload.{name}.files.\"{}\": {e}", file.path));
            }
            files.push(file);
        }
        files
    }

    /// Reports a command template that does not render (with every component's
    /// endpoint available when `stack` is given).
    fn check_command(&mut self, t: &Spanned<String>, stack: Option<&StackDef>) {
        match isolab_workloads::render(t.get_ref(), &sample_params(stack)) {
            Ok(argv) if argv.is_empty() => self.err(t.span(), "command is empty"),
            Ok(_) => {}
            Err(e) => self.err(t.span(), e.to_string()),
        }
    }

    /// A duration value of a workload table, at least `min`.
    fn duration(&mut self, t: &Spanned<String>, what: &str, min: Duration) -> Duration {
        match humantime::parse_duration(t.get_ref()) {
            Ok(d) if d >= min => d,
            _ => {
                self.err(
                    t.span(),
                    format!(
                        "invalid {what} `{}`: expected a duration of at least {} such as \"60s\"",
                        t.get_ref(),
                        humantime::format_duration(min)
                    ),
                );
                min
            }
        }
    }
}

/// Parameters with every value set and every component of `stack` reachable, for
/// checking templates.
fn sample_params(stack: Option<&StackDef>) -> Params {
    Params::sample(
        stack
            .iter()
            .flat_map(|s| s.components.iter().map(|c| c.name.as_str())),
    )
}

/// The tool a command workload runs: its command's program.
fn tools_of(command: &str, stack: Option<&StackDef>) -> Vec<String> {
    isolab_workloads::render(command, &sample_params(stack))
        .ok()
        .and_then(|a| a.into_iter().next())
        .into_iter()
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::spec::tests::{errors, parse};

    #[test]
    fn user_workloads_are_checked() {
        let ok = parse("[experiment]\nname = \"x\"\n[matrix]\nworkload = [\"nothing\"]\n[workload.nothing]\ncommand = \"true\"\nparser = \"time\"\n").unwrap();
        assert_eq!(ok.cells[0].workload.primary, "wall_time");
        assert_eq!(ok.cells[0].workload.tools, vec!["true".to_string()]);

        let errs = errors("[experiment]\nname = \"x\"\n[matrix]\nworkload = [\"w\"]\n[workload.w]\ncommand = \"sleep {secs}\"\nparser = \"jsonx\"\n");
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert!(
            errs.iter()
                .any(|e| e.starts_with("exp.toml:7:10: unknown parser `jsonx`")),
            "{errs:?}"
        );
        assert!(
            errs.iter()
                .any(|e| e.starts_with("exp.toml:6:11:") && e.contains("secs")),
            "{errs:?}"
        );
    }

    #[test]
    fn a_workload_s_files_are_kept_and_checked() {
        let spec = parse("[experiment]\nname = \"x\"\n[matrix]\nworkload = [\"w\"]\n[workload.w]\ncommand = \"cat {workdir}/in.txt\"\nparser = \"time\"\nfiles = { \"in.txt\" = \"Total=@usable_memory_mib@\" }\n").unwrap();
        let w = &spec.cells[0].workload;
        assert_eq!(w.files.len(), 1);
        assert_eq!(
            (w.files[0].path.as_str(), w.files[0].contents.as_str()),
            ("in.txt", "Total=@usable_memory_mib@")
        );
        let errs = errors("[experiment]\nname = \"x\"\n[matrix]\nworkload = [\"w\"]\n[workload.w]\ncommand = \"true\"\nparser = \"time\"\nfiles = { \"../out\" = \"x\", \"ok\" = \"@nope@\" }\n");
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert!(
            errs[0].starts_with("exp.toml:8:")
                && errs[0].contains("`../out` must be a relative path"),
            "{errs:?}"
        );
        assert!(errs[1].contains("unknown placeholder `{nope}`"), "{errs:?}");
    }
}
