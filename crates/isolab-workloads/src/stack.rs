//! Service stacks: a workload made of named, long-running components (a web
//! server, a database) that the lab starts inside the cell's platform, waits for,
//! loads with data, measures, and always tears down.
//!
//! A [`StackDef`] says, in start order, what each [`ComponentDef`] runs (a command
//! template whose `{port}` is the component's own port and whose
//! `{NAME.host}`/`{NAME.port}`/`{NAME.address}` reach the components started before
//! it), which files it needs (text templates with `@NAME@` placeholders, see
//! [`crate::template::render_text`]), how its readiness is checked ([`Ready`]) and
//! how long it may take. The shape of the cell applies to each component or to the
//! stack as one instance ([`ShapeScope`]). Then an optional unmeasured data-load
//! command runs in the platform, and the run is measured either by a **load
//! generator** outside the platform ([`Measure::Load`], whose files and commands the
//! [`crate::load`] module builds) or by a **command** run in the platform against
//! the components ([`Measure::Command`], e.g. a database client timing one
//! `SELECT`, parsed like any command workload's output) or on the host outside the
//! platform ([`Measure::Client`], e.g. a latency client).

use std::time::Duration;

use serde::Serialize;

use crate::template::{endpoints_used, render_text, validate, Params, TemplateError};

/// A workload's service stack.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StackDef {
    /// The components, in start order: a component's templates may name the
    /// endpoints of the components before it only.
    pub components: Vec<ComponentDef>,
    /// Whether the cell's shape applies to each component or to the stack as one.
    pub shape: ShapeScope,
    /// Run in the platform once every component is ready, unmeasured (e.g. create
    /// and fill the database), with the stack's working directory and endpoints.
    pub data_load: Option<String>,
    /// Paths under the working directory that hold what the data load made (a
    /// database's data directory, a file saying the data set's size).
    pub data_paths: Vec<String>,
    /// Whether the data is made once per platform, workload and shape: the components'
    /// prepare steps and the data load run in the first such run, then the components
    /// are stopped and `data_paths` kept, and every later run gets a copy before its
    /// components start, their prepare steps and the data load skipped. Otherwise
    /// every run prepares and loads its own (the built-ins' default: a database
    /// started on a copy measured noisier here, see docs/services.md).
    pub keep_data: bool,
    /// What is measured.
    pub measure: Measure,
}

/// One component of a stack.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ComponentDef {
    /// Its name in the stack, used in placeholders and reports (e.g. `db`, `web`).
    pub name: String,
    /// Template of its long-running foreground command; `{port}` is its own port.
    pub command: String,
    /// Template run in the platform before the command, unmeasured (e.g. initialise
    /// a database directory); it must exit 0.
    pub prepare: Option<String>,
    /// Files written into the run's working directory before `prepare`.
    pub files: Vec<FileTemplate>,
    /// When it is ready to serve.
    pub ready: Ready,
    /// How long it may take to become ready.
    pub ready_timeout: Duration,
}

/// A file a component or a workload needs in the run's working directory, rendered
/// with [`render_text`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FileTemplate {
    /// Its path relative to the run's working directory (no `..`, not absolute).
    pub path: String,
    /// Its contents, with `@NAME@` placeholders.
    pub contents: String,
}

impl FileTemplate {
    /// Whether its path stays inside the run's working directory: relative, not
    /// empty, no `..` component.
    pub fn stays_inside(&self) -> bool {
        stays_inside(&self.path)
    }
}

/// Whether relative `path` names something inside the working directory.
fn stays_inside(path: &str) -> bool {
    !(path.is_empty() || path.starts_with('/') || path.split('/').any(|p| p == ".."))
}

/// How the lab decides that a component is ready.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Ready {
    /// Its port accepts a TCP connection.
    Tcp,
    /// An HTTP `GET path` on its port answers with `status`.
    Http {
        /// The request path, e.g. `/index.html`.
        path: String,
        /// The expected status code, e.g. 200.
        status: u16,
    },
    /// A command template run on the host exits 0 (e.g. `mariadb-admin --host={db.host}
    /// --port={db.port} ping`), after the port accepts connections.
    Command(String),
}

/// Whether the shape is each component's or the whole stack's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ShapeScope {
    /// Each component gets the whole shape in its own instance (seed 003 gave each
    /// container its own limits).
    Component,
    /// The components share one shape: cpus and memory are divided between them,
    /// cpus by their position (each gets at least one), memory equally.
    Stack,
}

impl ShapeScope {
    /// The word used in specs: `component` or `stack`.
    pub fn as_str(self) -> &'static str {
        match self {
            ShapeScope::Component => "component",
            ShapeScope::Stack => "stack",
        }
    }
}

/// How a stack's runs are measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Measure {
    /// A load generator outside the platform drives a component over the network.
    Load(LoadDef),
    /// The workload's `command` runs in the platform (its parser reads the output),
    /// with the components' endpoints as placeholders.
    Command,
    /// The workload's `command` runs on the host, outside the platform's limits, on
    /// the cpus the components leave (as a load generator does), against the
    /// components: a client whose own timing must not share the platform's
    /// overhead, e.g. a request-response latency client.
    Client,
}

/// The load a generator puts on a component.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LoadDef {
    /// The component the generator drives (its HTTP endpoint).
    pub target: String,
    /// What the generator runs: tool, requests, profile.
    pub spec: crate::load::LoadSpec,
}

/// Why a stack definition is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StackError {
    /// No components.
    #[error("a service stack needs at least one component")]
    Empty,
    /// Two components with one name.
    #[error("component `{0}` is defined twice")]
    Duplicate(String),
    /// A component name that cannot be used in placeholders.
    #[error("component name `{0}` must be lowercase letters, digits, `-` or `_`, starting with a letter")]
    BadName(String),
    /// A template names a component that is not started before it.
    #[error("{place} names component `{named}`, which {why}; components start in the order they are declared and reach only those before them")]
    NotBefore {
        /// Which template.
        place: String,
        /// The component it names.
        named: String,
        /// Whether it does not exist or starts later.
        why: &'static str,
    },
    /// The load targets an unknown component.
    #[error("the load targets component `{0}`, which the stack does not have")]
    UnknownTarget(String),
    /// A file path outside the working directory.
    #[error("file `{0}` must be a relative path inside the run's working directory (no `..`)")]
    BadPath(String),
    /// A data path outside the working directory.
    #[error(
        "data_paths: `{0}` must be a relative path inside the run's working directory (no `..`)"
    )]
    BadDataPath(String),
    /// `keep_data` without `data_paths` to keep.
    #[error("keep_data keeps the data_paths of the stack's data load, and it has none")]
    KeepWithoutPaths,
    /// `data_paths` without a data load to make them.
    #[error("data_paths name what the data load makes: give the stack a data_load, or remove data_paths")]
    DataPathsWithoutLoad,
    /// A template is wrong.
    #[error("{place}: {source}")]
    Template {
        /// Which template.
        place: String,
        /// What is wrong with it.
        source: TemplateError,
    },
}

impl StackDef {
    /// Checks names, the order of endpoint references, templates and file paths.
    pub fn validate(&self) -> Result<(), StackError> {
        if self.components.is_empty() {
            return Err(StackError::Empty);
        }
        let names: Vec<&str> = self.components.iter().map(|c| c.name.as_str()).collect();
        for (i, c) in self.components.iter().enumerate() {
            if !valid_name(&c.name) {
                return Err(StackError::BadName(c.name.clone()));
            }
            if names[..i].contains(&c.name.as_str()) {
                return Err(StackError::Duplicate(c.name.clone()));
            }
            let before = &names[..i];
            let mut templates = vec![(format!("component {} command", c.name), &c.command)];
            if let Some(p) = &c.prepare {
                templates.push((format!("component {} prepare", c.name), p));
            }
            if let Ready::Command(t) = &c.ready {
                templates.push((format!("component {} ready command", c.name), t));
            }
            for (place, t) in templates {
                // A component's own readiness command may name itself.
                let own = place.ends_with("ready command");
                check_template(&place, t, before, own.then_some(c.name.as_str()), &names)?;
            }
            for f in &c.files {
                if !f.stays_inside() {
                    return Err(StackError::BadPath(f.path.clone()));
                }
                let sample = Params::sample(before.iter().copied());
                render_text(&f.contents, &sample).map_err(|source| StackError::Template {
                    place: format!("component {} file {}", c.name, f.path),
                    source,
                })?;
            }
        }
        if let Some(t) = &self.data_load {
            check_template("data_load", t, &names, None, &names)?;
        }
        if let Some(p) = self.data_paths.iter().find(|p| !stays_inside(p)) {
            return Err(StackError::BadDataPath(p.clone()));
        }
        if !self.data_paths.is_empty() && self.data_load.is_none() {
            return Err(StackError::DataPathsWithoutLoad);
        }
        if self.keep_data && self.data_paths.is_empty() {
            return Err(StackError::KeepWithoutPaths);
        }
        if let Measure::Load(l) = &self.measure {
            if !names.contains(&l.target.as_str()) {
                return Err(StackError::UnknownTarget(l.target.clone()));
            }
        }
        Ok(())
    }

    /// The component named `name`.
    pub fn component(&self, name: &str) -> Option<&ComponentDef> {
        self.components.iter().find(|c| c.name == name)
    }
}

/// Valid component names: they appear in placeholders, cgroup and container names.
fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && name.len() <= 16
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

fn check_template(
    place: &str,
    template: &str,
    before: &[&str],
    own: Option<&str>,
    all: &[&str],
) -> Result<(), StackError> {
    let wrap = |source| StackError::Template {
        place: place.to_owned(),
        source,
    };
    validate(template).map_err(wrap)?;
    for named in endpoints_used(template).map_err(wrap)? {
        if before.contains(&named.as_str()) || own == Some(named.as_str()) {
            continue;
        }
        return Err(StackError::NotBefore {
            place: place.to_owned(),
            why: if all.contains(&named.as_str()) {
                "starts later"
            } else {
                "the stack does not have"
            },
            named,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn component(name: &str, command: &str) -> ComponentDef {
        ComponentDef {
            name: name.into(),
            command: command.into(),
            prepare: None,
            files: vec![],
            ready: Ready::Tcp,
            ready_timeout: Duration::from_secs(30),
        }
    }

    fn stack(components: Vec<ComponentDef>) -> StackDef {
        StackDef {
            components,
            shape: ShapeScope::Component,
            data_load: None,
            data_paths: Vec::new(),
            keep_data: false,
            measure: Measure::Command,
        }
    }

    #[test]
    fn components_reach_only_those_started_before_them() {
        let ok = stack(vec![
            component("db", "mariadbd --port={port}"),
            component("web", "php -S 0.0.0.0:{port} -d db={db.address}"),
        ]);
        ok.validate().unwrap();

        let later = stack(vec![
            component("web", "php -S 0.0.0.0:{port} -d db={db.address}"),
            component("db", "mariadbd --port={port}"),
        ]);
        assert_eq!(
            later.validate().unwrap_err().to_string(),
            "component web command names component `db`, which starts later; components start in the order they are declared and reach only those before them"
        );
        let unknown = stack(vec![component("web", "x {cache.port}")]);
        assert!(unknown
            .validate()
            .unwrap_err()
            .to_string()
            .contains("which the stack does not have"));
    }

    #[test]
    fn names_paths_and_files_are_checked() {
        assert_eq!(stack(vec![]).validate().unwrap_err(), StackError::Empty);
        let dup = stack(vec![component("db", "a"), component("db", "b")]);
        assert_eq!(
            dup.validate().unwrap_err(),
            StackError::Duplicate("db".into())
        );
        assert!(matches!(
            stack(vec![component("Web", "a")]).validate(),
            Err(StackError::BadName(_))
        ));
        let mut c = component("web", "nginx");
        c.files.push(FileTemplate {
            path: "../etc/passwd".into(),
            contents: String::new(),
        });
        assert!(matches!(
            stack(vec![c]).validate(),
            Err(StackError::BadPath(_))
        ));
        let mut c = component("web", "nginx");
        c.files.push(FileTemplate {
            path: "nginx.conf".into(),
            contents: "listen @port@; root @workdir@/www; pass @db.address@;".into(),
        });
        let e = stack(vec![c]).validate().unwrap_err();
        assert!(
            e.to_string()
                .starts_with("component web file nginx.conf: unknown placeholder `{db.address}`"),
            "{e}"
        );
    }

    #[test]
    fn a_readiness_command_may_name_its_own_component() {
        let mut db = component("db", "mariadbd --port={port}");
        db.ready = Ready::Command("mariadb-admin --port={db.port} ping".into());
        stack(vec![db]).validate().unwrap();
    }

    #[test]
    fn data_paths_stay_inside_and_need_a_data_load() {
        let mut s = stack(vec![component("db", "postgres -p {port}")]);
        s.data_paths = vec!["db/data".into()];
        assert!(matches!(
            s.validate(),
            Err(StackError::DataPathsWithoutLoad)
        ));
        s.data_load = Some("sh {workdir}/load.sh {db.port}".into());
        s.validate().unwrap();
        s.keep_data = true;
        s.validate().unwrap();
        for bad in ["/var/lib/db", "db/../../etc", ""] {
            s.data_paths = vec![bad.into()];
            s.keep_data = false;
            assert!(
                matches!(s.validate(), Err(StackError::BadDataPath(ref p)) if p == bad),
                "{bad}"
            );
        }
    }
}
