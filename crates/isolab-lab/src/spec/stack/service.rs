//! The service stack of a workload: its `[[workload.NAME.component]]` tables (command,
//! files, readiness check and its timeout), how the shape applies to them, the data load,
//! and what measures the stack (its load generator, else the workload's command).

use std::ops::Range;
use std::time::Duration;

use isolab_workloads::{ComponentDef, FileTemplate, Measure, Ready, ShapeScope, StackDef};
use toml::Spanned;

use super::DEFAULT_READY_TIMEOUT;
use crate::spec::check::Validator;
use crate::spec::raw::{RawComponent, RawLoad, RawReady};

impl Validator<'_> {
    pub(super) fn stack_of(
        &mut self,
        name: &str,
        span: Range<usize>,
        components: Vec<ComponentDef>,
        shape_applies: Option<Spanned<String>>,
        data_load: Option<Spanned<String>>,
        load: Option<Spanned<RawLoad>>,
    ) -> Option<StackDef> {
        let before = self.errors.len();
        let shape = match shape_applies {
            None => ShapeScope::Component,
            Some(s) => match s.get_ref().as_str() {
                "component" => ShapeScope::Component,
                "stack" => ShapeScope::Stack,
                other => {
                    self.err(s.span(), format!("unknown shape_applies `{other}`: expected \"component\" (each component gets the shape) or \"stack\" (the components share it)"));
                    ShapeScope::Component
                }
            },
        };
        let measure = match load {
            None => Measure::Command,
            Some(l) => match self.load(l) {
                Some(l) => Measure::Load(l),
                None => Measure::Command,
            },
        };
        let stack = StackDef {
            components,
            shape,
            data_load: data_load.map(Spanned::into_inner),
            measure,
        };
        if self.errors.len() == before {
            if let Err(e) = stack.validate() {
                self.err(span, format!("workload.{name}: {e}"));
            }
        }
        Some(stack)
    }

    pub(super) fn component(&mut self, raw: Spanned<RawComponent>) -> ComponentDef {
        let raw = raw.into_inner();
        let ready = self.ready(raw.ready);
        let ready_timeout = raw
            .ready_timeout
            .map(|t| self.duration(&t, "ready_timeout", Duration::from_secs(1)))
            .unwrap_or(DEFAULT_READY_TIMEOUT);
        ComponentDef {
            name: raw.name.into_inner(),
            command: raw.command.into_inner(),
            prepare: raw.prepare.map(Spanned::into_inner),
            files: raw
                .files
                .into_iter()
                .map(|(path, contents)| FileTemplate {
                    path,
                    contents: contents.into_inner(),
                })
                .collect(),
            ready,
            ready_timeout,
        }
    }

    /// `ready`: `"tcp"` (the default), `{ http = "/path", status = 200 }` or
    /// `{ command = "..." }`.
    fn ready(&mut self, raw: Option<Spanned<RawReady>>) -> Ready {
        match raw {
            None => Ready::Tcp,
            Some(r) => {
                let at = r.span();
                match r.into_inner() {
                    RawReady::Word(w) if w == "tcp" => Ready::Tcp,
                    RawReady::Word(w) => {
                        self.err(at, format!("unknown readiness check `{w}`: expected \"tcp\", {{ http = \"/path\", status = 200 }} or {{ command = \"...\" }}"));
                        Ready::Tcp
                    }
                    RawReady::Check(c) => match (c.http, c.command) {
                        (Some(path), None) => {
                            let status = c.status.unwrap_or(200);
                            if !(100..=599).contains(&status) || !path.starts_with('/') {
                                self.err(at, "an http readiness check needs a path starting with `/` and a status from 100 to 599");
                            }
                            Ready::Http {
                                path,
                                status: status.clamp(100, 599) as u16,
                            }
                        }
                        (None, Some(command)) if c.status.is_none() => Ready::Command(command),
                        _ => {
                            self.err(at, "a readiness check is \"tcp\", { http = \"/path\", status = 200 } or { command = \"...\" }: give exactly one of http and command (status goes with http)");
                            Ready::Tcp
                        }
                    },
                }
            }
        }
    }
}
