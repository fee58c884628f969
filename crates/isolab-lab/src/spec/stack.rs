//! `[workload.NAME]` tables: a command workload, or a service stack
//! (`[[workload.NAME.component]]`, measured by `[workload.NAME.load]` or by the
//! workload's `command`), validated with the file, line and column of every error.

use std::ops::Range;
use std::time::Duration;

use isolab_workloads::load::{Generator, LoadProfile, LoadSpec, Request};
use isolab_workloads::{
    ComponentDef, FileTemplate, LoadDef, Measure, Params, ParserKind, Ready, ShapeScope, StackDef,
    WorkloadDef,
};
use toml::Spanned;

use super::raw::{RawComponent, RawLoad, RawProfile, RawReady, RawWorkload};
use super::Validator;

/// How long a component may take to become ready unless its table says.
pub const DEFAULT_READY_TIMEOUT: Duration = Duration::from_secs(60);

/// A generator's per-request timeout unless the load table says.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The primary metric of a load-measured stack unless the table says.
pub const LOAD_PRIMARY: &str = "requests_per_second";

impl Validator<'_> {
    /// A spec's `[workload.NAME]` table.
    pub(super) fn workload(
        &mut self,
        name: String,
        raw: Spanned<RawWorkload>,
    ) -> Option<WorkloadDef> {
        let span = raw.span();
        let raw = raw.into_inner();
        let before = self.errors.len();
        let defines = raw.command.is_some() || raw.stack.is_some() || !raw.component.is_empty();
        if raw.from.is_some() || (!defines && isolab_workloads::builtin(&name).is_some()) {
            return self.tuned_builtin(name, span, raw);
        }
        let work = raw.work.as_ref().and_then(|w| self.work_amount(&name, w));
        let has_load = raw.load.is_some() && (raw.stack.is_some() || !raw.component.is_empty());
        let builtin = match &raw.stack {
            None => None,
            Some(s) => match isolab_workloads::stacks::stack(s.get_ref()) {
                Some(b) if raw.component.is_empty() => Some(b),
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
            },
        };
        // The image needs a built-in stack's packages, then the table's own.
        let mut packages: Vec<String> = builtin
            .as_ref()
            .map(|b| b.packages.iter().map(|p| p.to_string()).collect())
            .unwrap_or_default();
        packages.extend(self.packages(&format!("workload.{name}.packages"), raw.packages));
        let stack = if let Some(b) = builtin {
            let data_load = raw
                .data_load
                .or_else(|| b.data_load.map(|d| Spanned::new(span.clone(), d)));
            self.stack_of(
                &name,
                span.clone(),
                b.components,
                raw.shape_applies,
                data_load,
                raw.load,
            )
        } else if raw.stack.is_some() {
            None
        } else if raw.component.is_empty() {
            let stray = [
                raw.shape_applies
                    .as_ref()
                    .map(|s| (s.span(), "shape_applies")),
                raw.data_load.as_ref().map(|s| (s.span(), "data_load")),
                raw.load.as_ref().map(|s| (s.span(), "load")),
            ];
            for (at, key) in stray.into_iter().flatten() {
                self.err(at, format!("`{key}` belongs to a service stack: add [[workload.{name}.component]] tables, or remove it"));
            }
            None
        } else {
            let components = raw
                .component
                .into_iter()
                .map(|c| self.component(c))
                .collect();
            self.stack_of(
                &name,
                span.clone(),
                components,
                raw.shape_applies,
                raw.data_load,
                raw.load,
            )
        };
        let mut stack = stack;
        if let Some(c) = &raw.client {
            match (c.get_ref().as_str(), stack.as_mut()) {
                ("host", Some(s)) if s.measure == Measure::Command => s.measure = Measure::Client,
                ("platform", Some(s)) if s.measure == Measure::Command => {}
                ("host" | "platform", Some(_)) => self.err(c.span(), format!("workload.{name} is measured by its load generator: remove `client`")),
                ("host" | "platform", None) => self.err(c.span(), format!("`client` says where a service stack's measured command runs: give workload.{name} components or a `stack`, or remove it")),
                (other, _) => self.err(c.span(), format!("unknown client `{other}`: expected \"platform\" (the measured command runs in the platform, the default) or \"host\" (on the host, outside the platform's limits)")),
            }
        }
        // A load table, valid or not (its errors are reported already), means the
        // generator measures: no parser or command to ask for.
        let load = has_load;

        let parser = match (&raw.parser, load) {
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
        };
        let command = match (raw.command, load) {
            (Some(c), true) => {
                self.err(c.span(), format!("workload.{name} is measured by its load generator, so it has no `command`: remove it (a client run in the platform is a separate workload with the same components)"));
                String::new()
            }
            (Some(c), false) => {
                self.check_command(&c, stack.as_ref());
                c.into_inner()
            }
            (None, true) => String::new(),
            (None, false) => {
                self.err(span.clone(), format!("workload.{name} needs `command`: the measured command{}", if stack.is_some() { ", run in the platform against the components, or a [workload.NAME.load] table" } else { "" }));
                String::new()
            }
        };
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
        if let (Some(first), Some(_)) = (raw.files.values().next(), &stack) {
            self.err(
                first.span(),
                format!("a service stack's files belong to its components: move workload.{name}.files into a [[workload.{name}.component]] table"),
            );
        }
        let files = self.workload_files(&name, raw.files);
        if let (Some(s), Some(_)) = (&raw.server, &stack) {
            self.err(
                s.span(),
                "a service stack starts its servers as components: remove `server`",
            );
        }
        let primary = match raw.primary {
            Some(p) => p.into_inner(),
            None if parser == ParserKind::Time => "wall_time".to_owned(),
            None if parser == ParserKind::Load => LOAD_PRIMARY.to_owned(),
            None => {
                self.err(span, format!("workload.{name} needs `primary`: the metric whose CV decides when a cell is stable"));
                String::new()
            }
        };
        let tools = if !raw.tools.is_empty() {
            raw.tools
        } else if load {
            Vec::new()
        } else {
            isolab_workloads::render(&command, &sample_params(stack.as_ref()))
                .ok()
                .and_then(|a| a.into_iter().next())
                .into_iter()
                .collect()
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
            assets: Vec::new(),
        })
    }

    /// `[workload.NAME]` with `from = "BUILTIN"` (or named as a built-in) and `work`:
    /// the built-in with another amount of work, under the table's name.
    fn tuned_builtin(
        &mut self,
        name: String,
        span: Range<usize>,
        raw: RawWorkload,
    ) -> Option<WorkloadDef> {
        let before = self.errors.len();
        let from = raw
            .from
            .as_ref()
            .map_or(name.as_str(), |f| f.get_ref().as_str());
        let Some(mut def) = isolab_workloads::builtin(from) else {
            let at = raw.from.as_ref().map_or(span.clone(), |f| f.span());
            self.err(at, format!("unknown built-in workload `{from}` in workload.{name}.from: see `isolab list --workloads`"));
            return None;
        };
        let others = [
            raw.command.as_ref().map(|c| (c.span(), "command")),
            raw.stack.as_ref().map(|c| (c.span(), "stack")),
            raw.parser.as_ref().map(|c| (c.span(), "parser")),
            raw.primary.as_ref().map(|c| (c.span(), "primary")),
            raw.prepare.as_ref().map(|c| (c.span(), "prepare")),
            raw.cleanup.as_ref().map(|c| (c.span(), "cleanup")),
            raw.server.as_ref().map(|c| (c.span(), "server")),
            raw.load.as_ref().map(|c| (c.span(), "load")),
        ];
        for (at, key) in others.into_iter().flatten() {
            self.err(at, format!("workload.{name} tunes the built-in `{from}`, which takes only `from`, `work` and `description`: remove `{key}` (or `from`, to define a workload of your own)"));
        }
        match (&raw.work, def.work.as_mut()) {
            (Some(w), Some(work)) => {
                if let Some(amount) = self.work_amount(&name, w) {
                    work.amount = amount;
                }
            }
            (Some(w), None) => {
                let fixed: Vec<String> = isolab_workloads::catalog()
                    .into_iter()
                    .filter(|b| b.work.is_some())
                    .map(|b| b.name)
                    .collect();
                self.err(w.span(), format!("the built-in `{from}` has no amount of work to set (it runs for `duration`); these do: {}", fixed.join(", ")));
            }
            (None, _) => self.err(span, format!("workload.{name} names the built-in `{from}` but changes nothing: give `work = N`, or remove the table")),
        }
        def.name = name;
        if let Some(d) = raw.description {
            def.description = d;
        }
        (self.errors.len() == before).then_some(def)
    }

    /// `work = N` of workload `name`: a positive whole number.
    fn work_amount(&mut self, name: &str, w: &Spanned<i64>) -> Option<u64> {
        match u64::try_from(*w.get_ref()) {
            Ok(n) if n > 0 => Some(n),
            _ => {
                self.err(
                    w.span(),
                    format!(
                        "workload.{name}.work must be a positive whole number, not {}",
                        w.get_ref()
                    ),
                );
                None
            }
        }
    }

    /// A command workload's `files`: each path inside the run's working directory and
    /// each text rendering with the placeholders.
    fn workload_files(
        &mut self,
        name: &str,
        raw: std::collections::BTreeMap<String, Spanned<String>>,
    ) -> Vec<FileTemplate> {
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

    fn stack_of(
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

    fn component(&mut self, raw: Spanned<RawComponent>) -> ComponentDef {
        let raw = raw.into_inner();
        let ready = match raw.ready {
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
        };
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

    fn load(&mut self, raw: Spanned<RawLoad>) -> Option<LoadDef> {
        let raw = raw.into_inner();
        let before = self.errors.len();
        let generator = match raw.generator.get_ref().parse::<Generator>() {
            Ok(g) => Some(g),
            Err(_) => {
                let known: Vec<&str> = Generator::ALL.iter().map(|g| g.as_str()).collect();
                self.err(
                    raw.generator.span(),
                    format!(
                        "unknown load generator `{}`: expected one of {}",
                        raw.generator.get_ref(),
                        known.join(", ")
                    ),
                );
                None
            }
        };
        let profile_span = raw.profile.span();
        let profile = self.profile(raw.profile);
        let requests: Vec<Request> = if raw.requests.is_empty() {
            vec![Request {
                name: "home".into(),
                method: "GET".into(),
                path: "/".into(),
            }]
        } else {
            raw.requests
                .into_iter()
                .filter_map(|r| {
                    let at = r.span();
                    let r = r.into_inner();
                    let ok = !r.name.is_empty()
                        && r.name
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
                        && r.path.starts_with('/');
                    if !ok {
                        self.err(at, "a request needs a name of letters, digits, `-` or `_`, and a path starting with `/`");
                        return None;
                    }
                    Some(Request {
                        name: r.name,
                        method: r.method.unwrap_or_else(|| "GET".into()),
                        path: r.path,
                    })
                })
                .collect()
        };
        let timeout = raw
            .timeout
            .map(|t| self.duration(&t, "timeout", Duration::from_millis(1)))
            .unwrap_or(DEFAULT_REQUEST_TIMEOUT);
        let (generator, profile) = (generator?, profile?);
        if let Err(e) = generator.supports(&profile) {
            self.err(profile_span, e.to_string());
        }
        (self.errors.len() == before).then(|| LoadDef {
            target: raw.target.into_inner(),
            spec: LoadSpec {
                generator,
                requests,
                profile,
                timeout,
            },
        })
    }

    fn profile(&mut self, raw: Spanned<RawProfile>) -> Option<LoadProfile> {
        let at = raw.span();
        let p = raw.into_inner();
        let kinds = [
            p.users.is_some(),
            p.ramp.is_some(),
            p.rate.is_some(),
            p.steps.is_some(),
            p.simultaneous.is_some(),
        ];
        let usage = "a profile is one of { users = N, duration = \"60s\" }, { ramp = [1, 100], over = \"720s\", hold = \"80s\" }, { rate = 500, duration = \"30s\" }, { steps = [[100, \"10s\"], [200, \"10s\"]] } or { simultaneous = N }";
        if kinds.iter().filter(|k| **k).count() != 1 {
            self.err(at, usage);
            return None;
        }
        let dur = |v: &Option<String>, what: &str| -> Result<Duration, String> {
            let v = v
                .as_deref()
                .ok_or_else(|| format!("this profile needs `{what}`; {usage}"))?;
            humantime::parse_duration(v)
                .ok()
                .filter(|d| !d.is_zero())
                .ok_or_else(|| format!("invalid {what} `{v}`: expected a positive duration such as \"80s\" or \"12m\""))
        };
        let count = |n: i64, what: &str| -> Result<u32, String> {
            u32::try_from(n)
                .ok()
                .filter(|n| *n >= 1)
                .ok_or_else(|| format!("{what} must be a whole number ≥ 1, not {n}"))
        };
        let stray = |allowed: &[&str]| -> Result<(), String> {
            let given = [
                ("duration", p.duration.is_some()),
                ("over", p.over.is_some()),
                ("hold", p.hold.is_some()),
            ];
            match given.iter().find(|(k, g)| *g && !allowed.contains(k)) {
                Some((k, _)) => Err(format!("`{k}` does not belong to this profile; {usage}")),
                None => Ok(()),
            }
        };
        let rate = |r: f64| -> Result<f64, String> {
            (r.is_finite() && r > 0.0).then_some(r).ok_or_else(|| {
                format!("a rate must be a positive number of requests per second, not {r}")
            })
        };
        let result = (|| -> Result<LoadProfile, String> {
            if let Some(n) = p.users {
                stray(&["duration"])?;
                return Ok(LoadProfile::Users {
                    users: count(n, "users")?,
                    duration: dur(&p.duration, "duration")?,
                });
            }
            if let Some(r) = &p.ramp {
                stray(&["over", "hold"])?;
                let [from, to] = r[..] else {
                    return Err("ramp is [from, to] users, e.g. [1, 100]".into());
                };
                let (from, to) = (
                    count(from, "ramp's first user count")?,
                    count(to, "ramp's last user count")?,
                );
                if to < from {
                    return Err(format!(
                        "ramp [{from}, {to}] goes down: write [from, to] with from ≤ to"
                    ));
                }
                let hold = match &p.hold {
                    None => Duration::ZERO,
                    Some(_) => dur(&p.hold, "hold")?,
                };
                return Ok(LoadProfile::Ramp {
                    from,
                    to,
                    over: dur(&p.over, "over")?,
                    hold,
                });
            }
            if let Some(r) = p.rate {
                stray(&["duration"])?;
                return Ok(LoadProfile::Rate {
                    rate: rate(r)?,
                    duration: dur(&p.duration, "duration")?,
                });
            }
            if let Some(steps) = &p.steps {
                stray(&[])?;
                if steps.is_empty() {
                    return Err("steps needs at least one [rate, \"duration\"]".into());
                }
                let steps = steps
                    .iter()
                    .map(|(r, d)| Ok((rate(*r)?, dur(&Some(d.clone()), "step duration")?)))
                    .collect::<Result<Vec<_>, String>>()?;
                return Ok(LoadProfile::Steps { steps });
            }
            stray(&[])?;
            Ok(LoadProfile::Simultaneous {
                requests: count(p.simultaneous.unwrap_or(0), "simultaneous")?,
            })
        })();
        match result {
            Ok(p) => Some(p),
            Err(message) => {
                self.err(at, message);
                None
            }
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
