//! Command templates: shell-like words with `{placeholder}`s, rendered into an argv
//! without ever invoking a shell.
//!
//! Rendering happens in two steps, in this order:
//!
//! 1. the template is split into words with POSIX shell quoting rules
//!    ([`shell_words::split`]): `'single'`, `"double"` and `\` escapes group
//!    words, but nothing is expanded (no globs, no `$VAR`, no pipes);
//! 2. in every word, each `{name}` is replaced by its value from [`Params`].
//!    A value is never re-split, so a `{workdir}` containing spaces stays one
//!    argument. `{{` and `}}` stand for literal braces.
//!
//! A word that renders to the empty string stays an (empty) argument: write
//! `--flag={direct_flag}`, not a lone `{direct_flag}`. The one placeholder that gives
//! several words is `{entrypoint}`, the image's own command, which must be a word of its
//! own.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// Placeholder names known to [`render`], in the order they are documented.
///
/// | placeholder | value |
/// |---|---|
/// | `{cpus}` | CPUs granted to the instance ([`Params::cpus`]) |
/// | `{threads}` | worker threads or jobs the workload should start ([`Params::threads`]) |
/// | `{duration}` | measured duration in whole seconds, rounded up ([`Params::duration`]) |
/// | `{workdir}` | the run's working directory ([`Params::workdir`]) |
/// | `{port}` | a free TCP port for client/server workloads ([`Params::port`]) |
/// | `{server}` | the address at which the measured command reaches its server ([`Params::server`]) |
/// | `{direct}` | `1` when direct I/O works on `{workdir}`'s file system, else `0` (fio's `--direct=`) |
/// | `{direct_flag}` | `direct` when direct I/O works there, else the empty string (sysbench's `--file-extra-flags=`) |
/// | `{memory_mib}` | memory granted to the instance in MiB: the shape's limit, else the host's ([`Params::memory`]) |
/// | `{usable_memory_mib}` | three quarters of `{memory_mib}`: what a workload that sizes itself to memory (HPCC) may fill, the rest left to its runtime (MPI) and the page cache, so that a memory limit does not kill it |
/// | `{work}` | a workload's amount of fixed work, in its own unit (seconds of video, numbers searched): its default, or `[workload.NAME] work = N` ([`Params::work`]) |
/// | `{entrypoint}` | an image of one's own's command, its entrypoint then its command, as words of their own (a word by itself; see [`Params::image_command`]) |
///
/// A service stack's templates can also name its components' endpoints
/// ([`Params::components`]): `{NAME.host}`, `{NAME.port}` and `{NAME.address}`
/// (`host:port`) for the component `NAME` (e.g. `{db.host}`).
pub const PLACEHOLDERS: &[&str] = &[
    "cpus",
    "threads",
    "duration",
    "workdir",
    "port",
    "server",
    "direct",
    "direct_flag",
    "memory_mib",
    "usable_memory_mib",
    "work",
    ENTRYPOINT,
];

/// The placeholder of an image's own command ([`Params::image_command`]).
pub const ENTRYPOINT: &str = "entrypoint";

/// Values substituted into templates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Params {
    /// CPUs granted to the instance (`{cpus}`).
    pub cpus: u32,
    /// Worker threads or jobs the workload should start (`{threads}`).
    pub threads: u32,
    /// How long a time-bound workload runs (`{duration}`, whole seconds rounded up;
    /// must be positive when the template uses it, since several tools read `0` as
    /// "no limit").
    pub duration: Duration,
    /// The run's working directory (`{workdir}`): scratch files and report files go here.
    pub workdir: PathBuf,
    /// A free TCP port for client/server workloads (`{port}`).
    pub port: u16,
    /// Address at which the measured command reaches the workload's server
    /// (`{server}`): `127.0.0.1` when both share a network namespace, the host's
    /// address on the container bridge when the command runs in a container.
    pub server: std::net::Ipv4Addr,
    /// Whether direct I/O (`O_DIRECT`) is supported on `workdir`'s file system
    /// (`{direct}` = `1`|`0`, `{direct_flag}` = `direct`|empty).
    pub direct: bool,
    /// Memory granted to the instance in bytes: the shape's limit, or the host's memory
    /// when the shape sets none (`{memory_mib}`).
    pub memory: u64,
    /// A fixed-work workload's amount of work (`{work}`), in the unit its definition
    /// states; 0 for the others.
    pub work: u64,
    /// The endpoints of a service stack's components started so far
    /// (`{NAME.host}`, `{NAME.port}`, `{NAME.address}`); empty for a command workload.
    pub components: Vec<Endpoint>,
    /// An image of one's own's command (`{entrypoint}`): its `Entrypoint` then its `Cmd`;
    /// empty where the workload does not run from such an image.
    pub image_command: Vec<String>,
}

/// Where a service stack's component is reached by the other components and by the
/// load generator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// The component's name in its stack (e.g. `db`).
    pub name: String,
    /// Its host name or address as the others reach it (e.g. `127.0.0.1`).
    pub host: String,
    /// Its TCP port.
    pub port: u16,
    /// The file holding its cgroup's cpu time (v1 `cpuacct.usage` in nanoseconds,
    /// v2 `cpu.stat` with `usage_usec`), `{NAME.cpu_usage}`: a client that reads it
    /// before and after each statement gives each its own database cpu time. Empty
    /// when its cgroup cannot be read.
    pub cpu_usage: String,
}

/// The fields of a component endpoint placeholder: `{NAME.host}`, `{NAME.port}`,
/// `{NAME.address}`, `{NAME.cpu_usage}`.
pub const ENDPOINT_FIELDS: &[&str] = &["host", "port", "address", "cpu_usage"];

impl Params {
    /// Parameters with every value set, for checking templates without a run: one cpu
    /// and thread, 1 s, `/tmp`, port 5201 on loopback, direct I/O, 1 GiB, and each of
    /// `components` reachable at `127.0.0.1:1`.
    pub fn sample<'a>(components: impl IntoIterator<Item = &'a str>) -> Params {
        Params {
            cpus: 1,
            threads: 1,
            duration: Duration::from_secs(1),
            workdir: "/tmp".into(),
            port: 5201,
            server: std::net::Ipv4Addr::LOCALHOST,
            direct: true,
            memory: 1 << 30,
            work: 1,
            components: components
                .into_iter()
                .map(|name| Endpoint {
                    name: name.to_owned(),
                    host: "127.0.0.1".into(),
                    port: 1,
                    cpu_usage: "/sys/fs/cgroup/cpu.stat".into(),
                })
                .collect(),
            image_command: vec!["app".into()],
        }
    }

    /// The rendered value of placeholder `name`, `None` when `name` is not one of
    /// [`PLACEHOLDERS`].
    pub fn value(&self, name: &str) -> Option<Result<String, TemplateError>> {
        let v = match name {
            "cpus" => self.cpus.to_string(),
            "threads" => self.threads.to_string(),
            "duration" => return Some(whole_seconds(self.duration)),
            "workdir" => self.workdir.display().to_string(),
            "port" => self.port.to_string(),
            "server" => self.server.to_string(),
            "direct" => if self.direct { "1" } else { "0" }.to_owned(),
            "direct_flag" => if self.direct { "direct" } else { "" }.to_owned(),
            "memory_mib" => (self.memory >> 20).to_string(),
            "usable_memory_mib" => ((self.memory >> 20) * 3 / 4).to_string(),
            "work" => self.work.to_string(),
            ENTRYPOINT => return Some(Err(TemplateError::EntrypointInAWord)),
            _ => {
                let (component, field) = name.split_once('.')?;
                let c = self.components.iter().find(|c| c.name == component)?;
                match field {
                    "host" => c.host.clone(),
                    "port" => c.port.to_string(),
                    "address" => format!("{}:{}", c.host, c.port),
                    "cpu_usage" => c.cpu_usage.clone(),
                    _ => return None,
                }
            }
        };
        Some(Ok(v))
    }
}

fn whole_seconds(d: Duration) -> Result<String, TemplateError> {
    if d.is_zero() {
        return Err(TemplateError::ZeroDuration);
    }
    let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
    Ok(secs.to_string())
}

/// Why a template could not be rendered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// The template's quoting is broken (an unterminated quote or a trailing backslash).
    #[error(
        "template `{template}` has unbalanced quotes: close every ' and \" (or escape it with \\)"
    )]
    Quoting {
        /// The template as written.
        template: String,
    },
    /// A `{name}` that is not a known placeholder.
    #[error(
        "unknown placeholder `{{{name}}}` in template `{template}`; known placeholders: {}",
        KnownList
    )]
    UnknownPlaceholder {
        /// The name between the braces.
        name: String,
        /// The template as written.
        template: String,
    },
    /// A `{` without its `}` or a `}` without its `{`.
    #[error("unbalanced `{brace}` in word `{word}` of template `{template}`: write placeholders as {{name}} and literal braces as {{{{ or }}}}; known placeholders: {}", KnownList)]
    UnbalancedBrace {
        /// The offending brace, `{` or `}`.
        brace: char,
        /// The word (after shell-style splitting) that holds it.
        word: String,
        /// The template as written.
        template: String,
    },
    /// The template uses `{duration}` but the duration is zero.
    #[error("`{{duration}}` is zero: give the workload a positive duration (tools such as sysbench read 0 as \"no time limit\")")]
    ZeroDuration,
    /// The template has no words at all.
    #[error("template is empty: give the command to run")]
    Empty,
    /// `{entrypoint}` is part of a longer word.
    #[error("`{{entrypoint}}` (the image's own command, several words) must be a word by itself, e.g. `{{entrypoint}} --extra-flag`")]
    EntrypointInAWord,
    /// `{entrypoint}` where the image has no command of its own.
    #[error("`{{entrypoint}}`: the image has neither an entrypoint nor a command (only an image of one's own, `[experiment] image = \"docker-archive:…\"`, may have one, and only container and VM platforms run it)")]
    NoImageCommand,
}

/// Displays [`PLACEHOLDERS`] as `{cpus}, {threads}, …` in error messages.
struct KnownList;

impl fmt::Display for KnownList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, name) in PLACEHOLDERS.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{{{name}}}")?;
        }
        Ok(())
    }
}

/// One piece of a template word.
enum Piece<'a> {
    Literal(&'a str),
    Brace(char),
    Placeholder(&'a str),
}

/// Splits `word` into literal text and placeholders, checking brace balance.
fn pieces<'a>(word: &'a str, template: &str) -> Result<Vec<Piece<'a>>, TemplateError> {
    let unbalanced = |brace| TemplateError::UnbalancedBrace {
        brace,
        word: word.to_owned(),
        template: template.to_owned(),
    };
    let mut out = Vec::new();
    let mut rest = word;
    while let Some(i) = rest.find(['{', '}']) {
        out.push(Piece::Literal(&rest[..i]));
        let after = &rest[i + 1..];
        if rest[i..].starts_with('}') {
            // A `}` outside a placeholder must be doubled.
            match after.strip_prefix('}') {
                Some(next) => {
                    out.push(Piece::Brace('}'));
                    rest = next;
                }
                None => return Err(unbalanced('}')),
            }
        } else if let Some(next) = after.strip_prefix('{') {
            out.push(Piece::Brace('{'));
            rest = next;
        } else {
            let end = after.find('}').ok_or_else(|| unbalanced('{'))?;
            let name = &after[..end];
            if name.contains('{') {
                return Err(unbalanced('{'));
            }
            out.push(Piece::Placeholder(name));
            rest = &after[end + 1..];
        }
    }
    out.push(Piece::Literal(rest));
    Ok(out)
}

/// Renders `template` into an argv without a shell: shell-words splitting, then
/// placeholder substitution in each word (see the [module documentation](self)).
///
/// Errors name the unknown placeholder or the unbalanced brace or quote and list
/// the known placeholders.
pub fn render(template: &str, p: &Params) -> Result<Vec<String>, TemplateError> {
    let words = split(template)?;
    let mut argv = Vec::with_capacity(words.len());
    for word in &words {
        if word == "{entrypoint}" {
            if p.image_command.is_empty() {
                return Err(TemplateError::NoImageCommand);
            }
            argv.extend(p.image_command.iter().cloned());
            continue;
        }
        let mut out = String::with_capacity(word.len());
        for piece in pieces(word, template)? {
            match piece {
                Piece::Literal(s) => out.push_str(s),
                Piece::Brace(c) => out.push(c),
                Piece::Placeholder(name) => match p.value(name) {
                    Some(v) => out.push_str(&v?),
                    None => {
                        return Err(TemplateError::UnknownPlaceholder {
                            name: name.to_owned(),
                            template: template.to_owned(),
                        })
                    }
                },
            }
        }
        argv.push(out);
    }
    Ok(argv)
}

/// Checks `template` without values: quoting, braces and placeholder names, for
/// validating a spec before anything runs. Returns the placeholders it uses, in
/// order of first use.
pub fn validate(template: &str) -> Result<Vec<&'static str>, TemplateError> {
    let mut used: Vec<&'static str> = Vec::new();
    for word in &split(template)? {
        for piece in pieces(word, template)? {
            if let Piece::Placeholder(name) = piece {
                if endpoint_placeholder(name).is_some() {
                    continue;
                }
                if name == ENTRYPOINT && word != "{entrypoint}" {
                    return Err(TemplateError::EntrypointInAWord);
                }
                let known = PLACEHOLDERS.iter().find(|k| **k == name).ok_or_else(|| {
                    TemplateError::UnknownPlaceholder {
                        name: name.to_owned(),
                        template: template.to_owned(),
                    }
                })?;
                if !used.contains(known) {
                    used.push(known);
                }
            }
        }
    }
    Ok(used)
}

/// The component a `{NAME.FIELD}` placeholder names, when `name` has that form
/// (a non-empty component name and one of [`ENDPOINT_FIELDS`]).
pub fn endpoint_placeholder(name: &str) -> Option<&str> {
    let (component, field) = name.split_once('.')?;
    (!component.is_empty() && ENDPOINT_FIELDS.contains(&field)).then_some(component)
}

/// The components that `template`'s endpoint placeholders name, in order of first use.
pub fn endpoints_used(template: &str) -> Result<Vec<String>, TemplateError> {
    let mut used: Vec<String> = Vec::new();
    for word in &split(template)? {
        for piece in pieces(word, template)? {
            if let Piece::Placeholder(name) = piece {
                if let Some(c) = endpoint_placeholder(name) {
                    if !used.iter().any(|u| u == c) {
                        used.push(c.to_owned());
                    }
                }
            }
        }
    }
    Ok(used)
}

/// Renders a text file's template: every `@NAME@` whose `NAME` is a placeholder
/// (see [`PLACEHOLDERS`], endpoints included) is replaced by its value; other text,
/// braces and `$` included, is kept as written (configuration files of nginx, PHP
/// and SQL use those). `@@` stands for a literal `@` where it would otherwise start
/// a placeholder.
pub fn render_text(text: &str, p: &Params) -> Result<String, TemplateError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('@') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(next) = after.strip_prefix('@') {
            out.push('@');
            rest = next;
            continue;
        }
        let name_len = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '-'))
            .unwrap_or(after.len());
        let name = &after[..name_len];
        if name.is_empty() || !after[name_len..].starts_with('@') {
            out.push('@');
            rest = after;
            continue;
        }
        match p.value(name) {
            Some(v) => out.push_str(&v?),
            None => {
                return Err(TemplateError::UnknownPlaceholder {
                    name: name.to_owned(),
                    template: excerpt(text, i),
                })
            }
        }
        rest = &after[name_len + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The line of `text` that holds byte `at`, for error messages about long files.
fn excerpt(text: &str, at: usize) -> String {
    let start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let end = text[at..].find('\n').map_or(text.len(), |i| at + i);
    text[start..end].to_owned()
}

fn split(template: &str) -> Result<Vec<String>, TemplateError> {
    let words = shell_words::split(template).map_err(|_| TemplateError::Quoting {
        template: template.to_owned(),
    })?;
    if words.is_empty() {
        return Err(TemplateError::Empty);
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> Params {
        Params {
            cpus: 4,
            threads: 8,
            duration: Duration::from_secs(10),
            workdir: PathBuf::from("/tmp/run dir"),
            port: 5201,
            server: std::net::Ipv4Addr::LOCALHOST,
            direct: true,
            memory: 2 << 30,
            work: 0,
            components: vec![Endpoint {
                name: "db".into(),
                host: "10.0.0.2".into(),
                port: 3306,
                cpu_usage: String::new(),
            }],
            image_command: Vec::new(),
        }
    }

    #[test]
    fn the_image_command_is_words_of_their_own_and_only_a_word_by_itself() {
        let mut p = params();
        assert_eq!(
            render("{entrypoint} --time={duration}", &p),
            Err(TemplateError::NoImageCommand)
        );
        p.image_command = vec!["sysbench".into(), "cpu".into(), "run".into()];
        assert_eq!(
            render("{entrypoint} --time={duration}", &p).unwrap(),
            ["sysbench", "cpu", "run", "--time=10"]
        );
        assert_eq!(
            render("x={entrypoint}", &p),
            Err(TemplateError::EntrypointInAWord)
        );
        assert_eq!(validate("{entrypoint} -v").unwrap(), ["entrypoint"]);
        assert_eq!(
            validate("a{entrypoint}"),
            Err(TemplateError::EntrypointInAWord)
        );
    }

    #[test]
    fn memory_renders_in_mib_in_commands_and_files() {
        let p = params();
        assert_eq!(render("x {memory_mib}", &p).unwrap(), ["x", "2048"]);
        assert_eq!(render("{usable_memory_mib}", &p).unwrap(), ["1536"]);
        assert_eq!(
            render_text("Total=@memory_mib@\n", &p).unwrap(),
            "Total=2048\n"
        );
    }

    #[test]
    fn component_endpoints_render_in_commands_and_files() {
        let p = params();
        assert_eq!(
            render(
                "client -h {db.host} -P {db.port} --url=tcp://{db.address}",
                &p
            )
            .unwrap(),
            [
                "client",
                "-h",
                "10.0.0.2",
                "-P",
                "3306",
                "--url=tcp://10.0.0.2:3306"
            ]
        );
        assert_eq!(validate("c {db.host} {web.port} {cpus}").unwrap(), ["cpus"]);
        assert_eq!(
            endpoints_used("c {db.host} {web.port} {db.port}").unwrap(),
            ["db", "web"]
        );
        let e = render("c {web.host}", &p).unwrap_err();
        assert!(
            e.to_string().contains("unknown placeholder `{web.host}`"),
            "{e}"
        );
        assert!(validate("c {db.user}").is_err());

        let conf = "server { listen @port@; location @php { fastcgi_pass @db.address@; } }\nmail me@@example.org, $uri @ @x\n";
        assert_eq!(
            render_text(conf, &p).unwrap(),
            "server { listen 5201; location @php { fastcgi_pass 10.0.0.2:3306; } }\nmail me@example.org, $uri @ @x\n"
        );
        let e = render_text("a\nlisten @nope@;\nb", &p).unwrap_err();
        assert_eq!(
            e,
            TemplateError::UnknownPlaceholder {
                name: "nope".into(),
                template: "listen @nope@;".into()
            }
        );
    }

    #[test]
    fn substitutes_every_placeholder() {
        let argv = render(
            "tool -c{cpus} -t {threads} --time={duration} {workdir}/f -p {port} --direct={direct} --x={direct_flag}",
            &params(),
        )
        .unwrap();
        assert_eq!(
            argv,
            [
                "tool",
                "-c4",
                "-t",
                "8",
                "--time=10",
                "/tmp/run dir/f",
                "-p",
                "5201",
                "--direct=1",
                "--x=direct"
            ]
        );
        let mut p = params();
        p.direct = false;
        let argv = render("t --direct={direct} --x={direct_flag}", &p).unwrap();
        assert_eq!(argv, ["t", "--direct=0", "--x="]);
    }

    #[test]
    fn quoting_groups_words_and_values_are_not_resplit() {
        let argv = render(r#"sh -c 'echo "a b"' "{workdir}" x\ y"#, &params()).unwrap();
        assert_eq!(argv, ["sh", "-c", r#"echo "a b""#, "/tmp/run dir", "x y"]);
        // No shell: metacharacters are plain words.
        let argv = render("echo $HOME | wc > out *", &params()).unwrap();
        assert_eq!(argv, ["echo", "$HOME", "|", "wc", ">", "out", "*"]);
    }

    #[test]
    fn doubled_braces_are_literal() {
        let argv = render("awk '{{print $1}}' {{threads}}={threads}", &params()).unwrap();
        assert_eq!(argv, ["awk", "{print $1}", "{threads}=8"]);
    }

    #[test]
    fn duration_is_whole_seconds_rounded_up_and_never_zero() {
        let mut p = params();
        p.duration = Duration::from_millis(1500);
        assert_eq!(render("x {duration}", &p).unwrap(), ["x", "2"]);
        p.duration = Duration::ZERO;
        assert_eq!(render("x {duration}", &p), Err(TemplateError::ZeroDuration));
        // A zero duration only matters to templates that use it.
        assert_eq!(render("x {threads}", &p).unwrap(), ["x", "8"]);
    }

    #[test]
    fn unknown_placeholder_is_named_with_the_known_ones() {
        let err = render("x --n={nthreads}", &params()).unwrap_err();
        assert_eq!(
            err,
            TemplateError::UnknownPlaceholder {
                name: "nthreads".into(),
                template: "x --n={nthreads}".into()
            }
        );
        let msg = err.to_string();
        assert!(msg.contains("`{nthreads}`"), "{msg}");
        assert!(
            msg.contains(
                "{cpus}, {threads}, {duration}, {workdir}, {port}, {server}, {direct}, {direct_flag}"
            ),
            "{msg}"
        );
        assert!(validate("x --n={nthreads}").is_err());
        assert!(render("x {}", &params()).is_err());
    }

    #[test]
    fn unbalanced_braces_and_quotes_are_errors() {
        for (t, brace) in [("x {threads", '{'), ("x threads}", '}'), ("x {a{b}", '{')] {
            match render(t, &params()) {
                Err(TemplateError::UnbalancedBrace { brace: b, .. }) => assert_eq!(b, brace, "{t}"),
                other => panic!("{t}: {other:?}"),
            }
        }
        let err = render("x 'open", &params()).unwrap_err();
        assert!(matches!(err, TemplateError::Quoting { .. }));
        assert!(err.to_string().contains("x 'open"));
        assert_eq!(render("  ", &params()), Err(TemplateError::Empty));
    }

    #[test]
    fn validate_lists_used_placeholders_once() {
        assert_eq!(
            validate("t {threads} {workdir}/a {threads} {{x}}").unwrap(),
            ["threads", "workdir"]
        );
    }

    #[test]
    fn every_listed_placeholder_has_a_value() {
        for name in PLACEHOLDERS {
            assert!(params().value(name).is_some(), "{name}");
        }
        assert!(params().value("nope").is_none());
    }
}
