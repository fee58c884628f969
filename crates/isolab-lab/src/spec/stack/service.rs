//! The service stack of a workload: its `[[workload.NAME.component]]` tables (command,
//! files, readiness check and its timeout), how the shape applies to them, the data load,
//! and what measures the stack (its load generator, else the workload's command).

use std::ops::Range;
use std::time::Duration;

use isolab_workloads::{ComponentDef, FileTemplate, Measure, Ready, ShapeScope, StackDef};
use toml::Spanned;

use super::DEFAULT_READY_TIMEOUT;
use crate::spec::raw::{RawComponent, RawLoad, RawReady};
use crate::spec::validator::Validator;

impl Validator<'_> {
    pub(super) fn stack_of(
        &mut self,
        name: &str,
        span: Range<usize>,
        components: Vec<ComponentDef>,
        shape_applies: Option<Spanned<String>>,
        (data_load, data_paths): (Option<Spanned<String>>, Option<Spanned<Vec<String>>>),
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
            keep_data: data_paths.is_some(),
            data_paths: data_paths.map(Spanned::into_inner).unwrap_or_default(),
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

#[cfg(test)]
mod tests {
    use crate::spec::tests::{errors, parse};
    use isolab_workloads::ParserKind;
    use std::time::Duration;

    /// A two-component stack measured by a JMeter ramp, on the host and on isolab's
    /// runtime with the host network.
    const STACK: &str = r#"[experiment]
name = "web"
impossible = "skip"

[platform.isolab-host]
engine = "isolab"
network = "host"

[matrix]
platform = ["host", "isolab-host", "docker"]
workload = ["web"]

[workload.web]
description = "nginx behind a database"
shape_applies = "stack"

[[workload.web.component]]
name = "db"
command = "mariadbd --port={port} --datadir={workdir}/db"
prepare = "mariadb-install-db --datadir={workdir}/db"
ready = { command = "mariadb-admin --host={db.host} --port={db.port} ping" }
ready_timeout = "90s"

[[workload.web.component]]
name = "web"
command = "nginx -e stderr -c {workdir}/nginx.conf"
files = { "nginx.conf" = "listen @port@; upstream @db.address@;" }
ready = { http = "/index.html", status = 200 }

[workload.web.load]
generator = "jmeter"
target = "web"
requests = [{ name = "home", path = "/" }, { name = "page", path = "/index.html" }]
profile = { ramp = [1, 100], over = "720s", hold = "80s" }
"#;

    #[test]
    fn a_service_stack_with_a_load_parses_into_its_components_and_profile() {
        use isolab_workloads::load::{Generator, LoadProfile};
        use isolab_workloads::{Measure, Ready, ShapeScope};
        let spec = parse(STACK).unwrap();
        // docker's default network is `none`: no generator could reach the stack.
        assert_eq!(spec.cells.len(), 2);
        assert_eq!(spec.dropped.len(), 1);
        assert!(
            spec.dropped[0].reason.starts_with(
                "workload `web` is a service stack: platform `docker` has network `none`"
            ),
            "{}",
            spec.dropped[0].reason
        );
        assert!(spec.dropped[0].reason.ends_with(
            "use a [platform.NAME] with engine = \"docker\" and network = \"host\" or \"bridge\""
        ));
        let w = &spec.cells[0].workload;
        assert_eq!(w.parser, ParserKind::Load);
        assert_eq!(w.primary, "requests_per_second");
        let stack = w.stack.as_ref().unwrap();
        assert_eq!(stack.shape, ShapeScope::Stack);
        assert_eq!(stack.components[0].name, "db");
        assert_eq!(stack.components[0].ready_timeout, Duration::from_secs(90));
        assert!(
            matches!(&stack.components[0].ready, Ready::Command(c) if c.starts_with("mariadb-admin"))
        );
        assert_eq!(
            stack.components[1].ready,
            Ready::Http {
                path: "/index.html".into(),
                status: 200
            }
        );
        assert_eq!(stack.components[1].files[0].path, "nginx.conf");
        let Measure::Load(load) = &stack.measure else {
            panic!("{:?}", stack.measure)
        };
        assert_eq!(load.target, "web");
        assert_eq!(load.spec.generator, Generator::Jmeter);
        assert_eq!(load.spec.requests.len(), 2);
        assert_eq!(
            load.spec.profile,
            LoadProfile::Ramp {
                from: 1,
                to: 100,
                over: Duration::from_secs(720),
                hold: Duration::from_secs(80)
            }
        );
    }

    #[test]
    fn bad_stacks_point_at_the_offending_value() {
        let cases = [
            (
                STACK.replace("\"jmeter\"", "\"ab\""),
                "exp.toml:31:13: unknown load generator `ab`: expected one of jmeter, locust, wrk, vegeta",
            ),
            (
                STACK.replace("ramp = [1, 100], ", ""),
                "exp.toml:34:11: a profile is one of",
            ),
            (
                STACK.replace("ramp = [1, 100]", "ramp = [100, 1]"),
                "exp.toml:34:11: ramp [100, 1] goes down",
            ),
            (
                STACK.replace("over = \"720s\"", "over = \"soon\""),
                "exp.toml:34:11: invalid over `soon`",
            ),
            (
                STACK.replace("\"stack\"", "\"pod\""),
                "exp.toml:15:17: unknown shape_applies `pod`",
            ),
            (
                STACK.replace("target = \"web\"", "target = \"cache\""),
                "exp.toml:13:1: workload.web: the load targets component `cache`, which the stack does not have",
            ),
            (
                STACK.replace("upstream @db.address@", "upstream @cache.address@"),
                "workload.web: component web file nginx.conf: unknown placeholder `{cache.address}`",
            ),
            (
                STACK.replace("ready = { http", "ready = { command = \"x\", http"),
                "exp.toml:28:9: a readiness check is",
            ),
            (
                STACK.replace("ready_timeout = \"90s\"", "ready_timeout = \"0s\""),
                "exp.toml:22:17: invalid ready_timeout `0s`",
            ),
            (
                STACK.replace("description = \"nginx behind a database\"", "command = \"curl {web.host}\""),
                "exp.toml:14:11: workload.web is measured by its load generator, so it has no `command`",
            ),
            (
                STACK.replace("shape_applies = \"stack\"", "stack = \"nginx-php\""),
                "exp.toml:15:9: unknown stack `nginx-php`",
            ),
        ];
        let mut wrong = Vec::new();
        for (text, expected) in cases {
            let errs = errors(&text);
            if !errs.iter().any(|e| e.contains(expected)) {
                wrong.push(format!("expected {expected:?} in {errs:?}"));
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    #[test]
    fn a_stack_measured_by_a_client_command_reaches_every_component() {
        let text = STACK
            .replace("[workload.web.load]", "[workload.unused]")
            .replace("generator = \"jmeter\"\ntarget = \"web\"\nrequests = [{ name = \"home\", path = \"/\" }, { name = \"page\", path = \"/index.html\" }]\nprofile = { ramp = [1, 100], over = \"720s\", hold = \"80s\" }\n", "command = \"true\"\nparser = \"time\"\n")
            .replace(
                "description = \"nginx behind a database\"",
                "command = \"php select.php {db.host} {db.port} {web.address}\"\nparser = \"json\"\nprimary = \"select_time\"",
            )
            .replace("workload = [\"web\"]", "workload = [\"web\", \"unused\"]");
        let spec = parse(&text).unwrap();
        let w = &spec.cells[0].workload;
        assert_eq!(w.parser, ParserKind::Json);
        assert_eq!(
            w.stack.as_ref().unwrap().measure,
            isolab_workloads::Measure::Command
        );
        // `client = "host"` runs that command on the host, outside the platform.
        let on_host = text.replace("parser = \"json\"", "parser = \"json\"\nclient = \"host\"");
        let spec = parse(&on_host).unwrap();
        assert_eq!(
            spec.cells[0].workload.stack.as_ref().unwrap().measure,
            isolab_workloads::Measure::Client
        );
        let errs = errors(&on_host.replace("client = \"host\"", "client = \"guest\""));
        assert!(
            errs.iter().any(|e| e.contains("unknown client `guest`")),
            "{errs:?}"
        );
        let errs = errors(&text.replace(
            "command = \"true\"\nparser = \"time\"",
            "command = \"true\"\nparser = \"time\"\nclient = \"host\"",
        ));
        assert!(
            errs.iter().any(|e| e.contains("workload.unused")
                && e.contains("`client` says where a service stack's measured command runs")),
            "{errs:?}"
        );
        // A command workload cannot name components it does not have.
        let errs = errors(&text.replace("command = \"true\"", "command = \"ping {db.host}\""));
        assert!(
            errs.iter()
                .any(|e| e.contains("unknown placeholder `{db.host}`")),
            "{errs:?}"
        );
    }

    #[test]
    fn data_paths_keep_what_the_data_load_made_and_need_one() {
        let with_load = STACK.replace(
            "shape_applies = \"stack\"",
            "shape_applies = \"stack\"\ndata_load = \"sh {workdir}/load.sh {db.port}\"\ndata_paths = [\"db\", \"data-set.json\"]",
        );
        let spec = parse(&with_load).unwrap();
        let stack = spec.cells[0].workload.stack.as_ref().unwrap();
        assert_eq!(stack.data_paths, ["db", "data-set.json"]);
        let errs =
            errors(&with_load.replace("data_load = \"sh {workdir}/load.sh {db.port}\"\n", ""));
        assert!(
            errs.iter()
                .any(|e| e.contains("workload.web: data_paths name what the data load makes")),
            "{errs:?}"
        );
        let errs = errors(&with_load.replace("\"db\", \"data", "\"/var/lib/mysql\", \"data"));
        assert!(
            errs.iter()
                .any(|e| e.contains("data_paths: `/var/lib/mysql` must be a relative path")),
            "{errs:?}"
        );
        // A command workload has no data load to keep.
        let errs = errors(&STACK.replace(
            "[workload.web.load]",
            "[workload.other]\ncommand = \"true\"\nparser = \"time\"\ndata_paths = [\"db\"]\n\n[workload.web.load]",
        ));
        assert!(
            errs.iter()
                .any(|e| e.contains("`data_paths` belongs to a service stack")),
            "{errs:?}"
        );
    }
}
