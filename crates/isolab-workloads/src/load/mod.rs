//! Real load generators driving a service over HTTP: what to run and how to read what
//! they wrote.
//!
//! A [`LoadSpec`] names a [`Generator`] (JMeter, Locust, wrk or vegeta), the named
//! [`Request`]s each simulated user sends in turn, a [`LoadProfile`] and a per-request
//! timeout. [`invocation`] turns it into an [`Invocation`]: the files to write into the
//! generator's working directory (a JMeter test plan, a locustfile, a wrk Lua script, a
//! vegeta targets file) and the commands to run one after another, all inside the
//! generator's own cgroup. Nothing here spawns a process: the lab does.
//!
//! After the commands ran, [`parse_load`] reads what the tool wrote — JMeter's CSV JTL,
//! Locust's `--csv` statistics and full history, the JSON file the wrk script writes,
//! vegeta's results encoded as CSV — into a [`LoadResult`]: totals per named request
//! ([`RequestTotals`]) and over all of them, and per-second [`Interval`]s (the run's
//! series). [`LoadResult::metrics`] gives the run's [`Metric`](crate::Metric)s and
//! [`saturation`] says when the generator itself may have been the bottleneck.
//!
//! Which generator drives which profile ([`Generator::supports`]):
//!
//! | profile | jmeter | locust | wrk | vegeta |
//! |---|---|---|---|---|
//! | users (closed loop) | yes | yes | yes (connections) | |
//! | ramp (closed loop) | yes | yes | | |
//! | rate, steps (open loop) | | | | yes |
//! | simultaneous | yes (Synchronizing Timer) | | | |
//!
//! Latencies are in milliseconds. Per-interval and total percentiles computed from
//! per-request rows (JMeter, vegeta) use [`isolab_stats::percentile`]: linear
//! interpolation between closest ranks (Hyndman & Fan definition 7, NumPy's default).
//! Locust and wrk compute their own percentiles (see their modules).

pub mod jmeter;
pub mod locust;
pub mod profile;
pub mod result;
pub mod vegeta;
pub mod wrk;

mod csv;

pub use profile::LoadProfile;
pub use result::{saturation, Interval, Latency, LoadResult, RequestTotals};

use crate::parsers::excerpt;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

/// A load generator isolab knows how to drive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Generator {
    /// Apache JMeter (Debian's 2.13), non-GUI mode with a generated test plan.
    Jmeter,
    /// Locust 2.x, headless, from the venv `scripts/setup.sh` creates.
    Locust,
    /// wrk 4.1 with a Lua script that writes a JSON report.
    Wrk,
    /// vegeta 12, `vegeta attack` at a constant rate per step.
    Vegeta,
}

impl Generator {
    /// Every generator, in declaration order.
    pub const ALL: [Generator; 4] = [
        Generator::Jmeter,
        Generator::Locust,
        Generator::Wrk,
        Generator::Vegeta,
    ];

    /// The word used in specs and the store: `jmeter`, `locust`, `wrk` or `vegeta`.
    pub fn as_str(self) -> &'static str {
        match self {
            Generator::Jmeter => "jmeter",
            Generator::Locust => "locust",
            Generator::Wrk => "wrk",
            Generator::Vegeta => "vegeta",
        }
    }

    /// The executable's name: `jmeter`, `locust`, `wrk` or `vegeta`.
    pub fn executable(self) -> &'static str {
        self.as_str()
    }

    /// Where `scripts/setup.sh` installs the executable when it is not a Debian package:
    /// `/opt/isolab/locust/bin/locust` (a Python venv) and `/usr/local/bin/vegeta`
    /// (`go install`); `None` for JMeter and wrk (Debian packages, on `PATH`).
    pub fn install_path(self) -> Option<&'static str> {
        match self {
            Generator::Locust => Some("/opt/isolab/locust/bin/locust"),
            Generator::Vegeta => Some("/usr/local/bin/vegeta"),
            Generator::Jmeter | Generator::Wrk => None,
        }
    }

    /// The program the [`Invocation`]'s commands start: `java` for JMeter (started
    /// through a launcher, see [`jmeter`]), [`Generator::install_path`] for Locust (whose
    /// venv is not on `PATH`), [`Generator::executable`] for wrk and vegeta (looked up on
    /// `PATH`, where `/usr/bin` and `/usr/local/bin` are).
    pub fn program(self) -> &'static str {
        match self {
            Generator::Jmeter => "java",
            Generator::Locust => "/opt/isolab/locust/bin/locust",
            Generator::Wrk | Generator::Vegeta => self.executable(),
        }
    }

    /// Files the [`Invocation`]'s commands need besides [`Generator::program`]: the lab
    /// checks that they exist (and that the program is found) before a run, and
    /// otherwise reports [`Generator::install_hint`]. JMeter's jars (the HTTP sampler is
    /// Debian's `jmeter-http`) and BeanShell's; the venv's `locust`; nothing for wrk and
    /// vegeta, found on `PATH`.
    pub fn required_files(self) -> &'static [&'static str] {
        match self {
            Generator::Jmeter => &[
                "/usr/share/jmeter/bin/ApacheJMeter.jar",
                "/usr/share/jmeter/lib/ext/ApacheJMeter_http.jar",
                "/usr/share/java/bsh.jar",
            ],
            Generator::Locust => &["/opt/isolab/locust/bin/locust"],
            Generator::Wrk | Generator::Vegeta => &[],
        }
    }

    /// How to install the generator.
    pub fn install_hint(self) -> &'static str {
        match self {
            Generator::Jmeter => "apt-get install jmeter jmeter-http",
            Generator::Locust => {
                "scripts/setup.sh installs it (a Python venv in /opt/isolab/locust: \
                 python3 -m venv /opt/isolab/locust && /opt/isolab/locust/bin/pip install locust==2.47.0)"
            }
            Generator::Wrk => "apt-get install wrk",
            Generator::Vegeta => {
                "scripts/setup.sh installs it (GOBIN=/usr/local/bin go install \
                 github.com/tsenart/vegeta/v12@v12.13.0)"
            }
        }
    }

    /// The profile kinds ([`LoadProfile::kind`]) this generator drives.
    fn profile_kinds(self) -> &'static [&'static str] {
        match self {
            Generator::Jmeter => &["users", "ramp", "simultaneous"],
            Generator::Locust => &["users", "ramp"],
            Generator::Wrk => &["users"],
            Generator::Vegeta => &["rate", "steps"],
        }
    }

    /// What kind of load the generator drives, for [`UnsupportedProfile`]'s message.
    fn drives(self) -> &'static str {
        match self {
            Generator::Jmeter => {
                "JMeter drives closed-loop users (constant or ramped) and simultaneous requests"
            }
            Generator::Locust => "Locust drives closed-loop users (constant or ramped)",
            Generator::Wrk => "wrk drives a closed loop of constant connections",
            Generator::Vegeta => "vegeta drives an open loop at a target rate",
        }
    }

    /// `Ok` when the generator can drive `profile`, otherwise an error naming the
    /// profile, the generator and the generators that can.
    pub fn supports(self, profile: &LoadProfile) -> Result<(), UnsupportedProfile> {
        let kind = profile.kind();
        if self.profile_kinds().contains(&kind) {
            return Ok(());
        }
        Err(UnsupportedProfile {
            profile: kind,
            generator: self,
            supported: Generator::ALL
                .into_iter()
                .filter(|g| g.profile_kinds().contains(&kind))
                .collect(),
        })
    }
}

impl fmt::Display for Generator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Generator {
    type Err = UnknownGenerator;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Generator::ALL
            .into_iter()
            .find(|g| g.as_str() == s)
            .ok_or_else(|| UnknownGenerator(s.to_owned()))
    }
}

/// A generator name other than the known ones.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown load generator `{0}`: expected one of jmeter, locust, wrk, vegeta")]
pub struct UnknownGenerator(pub String);

/// A generator asked to drive a profile it cannot.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{generator} cannot drive a `{profile}` load profile ({why}): use {use_}", why = generator.drives(), use_ = names(supported))]
pub struct UnsupportedProfile {
    /// The profile's kind ([`LoadProfile::kind`]).
    pub profile: &'static str,
    /// The generator asked.
    pub generator: Generator,
    /// The generators that drive this profile.
    pub supported: Vec<Generator>,
}

/// `a`, `a or b`, `a, b or c`.
fn names(gs: &[Generator]) -> String {
    let words: Vec<&str> = gs.iter().map(|g| g.as_str()).collect();
    match words.split_last() {
        None => "another profile".to_owned(),
        Some((last, [])) => (*last).to_owned(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}

/// One named HTTP request a simulated user sends; each name is its own measurement
/// point.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// The name in results and metrics (`front`, `login`): letters, digits, `_`, `-`, `.`.
    pub name: String,
    /// The HTTP method (`GET` by default).
    #[serde(default = "default_method")]
    pub method: String,
    /// The path below the base URL, starting with `/` (`/index.html`).
    pub path: String,
}

fn default_method() -> String {
    "GET".to_owned()
}

impl Request {
    /// A `GET` of `path` named `name`.
    pub fn get(name: impl Into<String>, path: impl Into<String>) -> Self {
        Request {
            name: name.into(),
            method: default_method(),
            path: path.into(),
        }
    }

    fn validate(&self) -> Result<(), LoadError> {
        let bad = |reason: &str| {
            Err(LoadError::BadRequest {
                name: self.name.clone(),
                reason: reason.to_owned(),
            })
        };
        let word = |s: &str, extra: &[char]| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || extra.contains(&c))
        };
        if !word(&self.name, &['_', '-', '.']) {
            return bad("a request name is letters, digits, `_`, `-` and `.`");
        }
        if !word(&self.method, &[]) || self.method.chars().any(|c| c.is_ascii_lowercase()) {
            return bad("the method is an upper-case word such as GET or POST");
        }
        if !self.path.starts_with('/')
            || self
                .path
                .chars()
                .any(|c| c.is_whitespace() || c.is_control() || c == '"' || c == '\\')
        {
            return bad("the path starts with `/` and has no spaces, quotes or backslashes");
        }
        Ok(())
    }
}

/// What to drive: the generator, the requests each user sends in turn, the profile
/// and the per-request timeout.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LoadSpec {
    /// The tool.
    pub generator: Generator,
    /// The requests, sent in this order by each user (JMeter, Locust) or spread over
    /// the rate (vegeta sends them in turn); wrk sends exactly one.
    pub requests: Vec<Request>,
    /// The load over time.
    pub profile: LoadProfile,
    /// How long one request may take before it counts as failed.
    pub timeout: Duration,
}

/// What the lab runs: files to write into the generator's working directory first, then
/// the commands, one after another (vegeta's steps need several), all inside the
/// generator's cgroup, with `env` added to the environment. Paths in the commands and
/// files are absolute (below the `workdir` given to [`invocation`]); running the
/// commands with that directory as their current directory is still advised (JMeter
/// writes `jmeter.log` there when asked to, Locust its log file).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invocation {
    /// (file name relative to the working directory, content).
    pub files: Vec<(String, String)>,
    /// argv of each command, the program first ([`Generator::program`]).
    pub commands: Vec<Vec<String>>,
    /// Environment variables to set for every command.
    pub env: Vec<(String, String)>,
}

/// Why an [`Invocation`] cannot be built.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LoadError {
    /// The generator does not drive this profile.
    #[error(transparent)]
    Unsupported(#[from] UnsupportedProfile),
    /// The profile's numbers make no load.
    #[error("the `{profile}` load profile is invalid: {reason}")]
    BadProfile {
        /// The profile's kind.
        profile: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// A request cannot be sent as given.
    #[error("request `{name}`: {reason}")]
    BadRequest {
        /// The request's name.
        name: String,
        /// What is wrong and what is expected.
        reason: String,
    },
    /// No request, or the same name twice.
    #[error("the load sends {0}: give each request once, with its own name")]
    Requests(String),
    /// A zero per-request timeout (JMeter would wait for ever, vegeta would fail every
    /// request).
    #[error("the per-request timeout is zero: give each request a timeout above zero")]
    ZeroTimeout,
    /// wrk sends one request.
    #[error("wrk sends one request but the load has {count} ({names}): use jmeter or locust for several named requests")]
    WrkSeveralRequests {
        /// How many requests the spec has.
        count: usize,
        /// Their names.
        names: String,
    },
    /// The base URL is not `http://HOST[:PORT][/PREFIX]`.
    #[error("the service URL {url:?} is not http(s)://HOST[:PORT][/PREFIX]: {reason}")]
    BadUrl {
        /// The URL as given.
        url: String,
        /// What is wrong.
        reason: String,
    },
}

/// Builds what the lab runs to drive `spec` against `base_url`
/// (`http://10.0.0.2:8080`), with `workdir` the generator's working directory (the
/// paths inside the files and commands point there) and `threads` the cpus the
/// generator may use (wrk's `-t`, Locust's `--processes`, vegeta's `-cpus`, the JVM's
/// processor count for JMeter).
pub fn invocation(
    spec: &LoadSpec,
    base_url: &str,
    workdir: &Path,
    threads: u32,
) -> Result<Invocation, LoadError> {
    spec.generator.supports(&spec.profile)?;
    spec.profile.validate()?;
    if spec.requests.is_empty() {
        return Err(LoadError::Requests("no request".to_owned()));
    }
    for (i, r) in spec.requests.iter().enumerate() {
        r.validate()?;
        if spec.requests[..i].iter().any(|o| o.name == r.name) {
            return Err(LoadError::Requests(format!(
                "two requests named `{}`",
                r.name
            )));
        }
    }
    if spec.timeout.is_zero() {
        return Err(LoadError::ZeroTimeout);
    }
    let url = BaseUrl::parse(base_url)?;
    let threads = threads.max(1);
    match spec.generator {
        Generator::Jmeter => Ok(jmeter::invocation(spec, &url, workdir, threads)),
        Generator::Locust => Ok(locust::invocation(spec, &url, workdir, threads)),
        Generator::Wrk => wrk::invocation(spec, &url, workdir, threads),
        Generator::Vegeta => Ok(vegeta::invocation(spec, &url, workdir, threads)),
    }
}

/// Reads what `generator` wrote into `workdir` (and printed: `stdout`, `stderr`, quoted
/// in errors) after the commands of its [`Invocation`] ran.
pub fn parse_load(
    generator: Generator,
    workdir: &Path,
    stdout: &str,
    stderr: &str,
) -> Result<LoadResult, ParseError> {
    let output = Output { stdout, stderr };
    match generator {
        Generator::Jmeter => jmeter::parse(workdir, &output),
        Generator::Locust => locust::parse(workdir, &output),
        Generator::Wrk => wrk::parse(workdir, &output),
        Generator::Vegeta => vegeta::parse(workdir, &output),
    }
}

/// What the generator printed, quoted in errors.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Output<'a> {
    stdout: &'a str,
    stderr: &'a str,
}

impl Output<'_> {
    /// The end of stderr, else of stdout: where tools print why they failed.
    fn tail(&self) -> String {
        if self.stderr.trim().is_empty() {
            crate::parsers::tail(self.stdout)
        } else {
            crate::parsers::tail(self.stderr)
        }
    }
}

/// Opens `workdir/name` to stream it, or [`ParseError::File`] quoting the generator's
/// output.
fn open_file(
    tool: Generator,
    workdir: &Path,
    name: &str,
    output: &Output,
) -> Result<(PathBuf, std::io::BufReader<std::fs::File>), ParseError> {
    let path = workdir.join(name);
    match std::fs::File::open(&path) {
        Ok(file) => Ok((path, std::io::BufReader::new(file))),
        Err(source) => Err(ParseError::File {
            tool,
            path,
            source,
            output: output.tail(),
        }),
    }
}

/// Reads `workdir/name`, or [`ParseError::File`] quoting the generator's output.
fn read_file(
    tool: Generator,
    workdir: &Path,
    name: &str,
    output: &Output,
) -> Result<(PathBuf, String), ParseError> {
    let path = workdir.join(name);
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok((path, text)),
        Err(source) => Err(ParseError::File {
            tool,
            path,
            source,
            output: output.tail(),
        }),
    }
}

/// Why a generator's output could not be read into a [`LoadResult`].
///
/// Every message names the tool and the file, says what was missing or unreadable and
/// quotes a short excerpt.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    /// A file the generator writes is not there.
    #[error("{tool}: cannot read {path}: {source}; the generator writes it when it runs to its end (check its exit status); its output ended with: {output:?}")]
    File {
        /// The generator.
        tool: Generator,
        /// The file looked for.
        path: PathBuf,
        /// Why it could not be read.
        source: std::io::Error,
        /// The end of what the generator printed.
        output: String,
    },
    /// A CSV file is empty: not even its header line was written.
    #[error("{tool}: {path} has no header line (the generator stopped before writing it, or the save settings are not the ones isolab passes)")]
    NoHeader {
        /// The generator.
        tool: Generator,
        /// The CSV file.
        path: PathBuf,
    },
    /// A CSV file lacks a column isolab reads.
    #[error("{tool}: {path} has no column `{column}` (another version of the tool, or other save settings?); header: {header:?}")]
    MissingColumn {
        /// The generator.
        tool: Generator,
        /// The CSV file.
        path: PathBuf,
        /// The missing column.
        column: String,
        /// The header as written.
        header: String,
    },
    /// A record cannot be read.
    #[error("{tool}: {path} line {line}: {reason}; excerpt: {excerpt:?}")]
    BadRow {
        /// The generator.
        tool: Generator,
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        reason: String,
        /// A short excerpt of the record.
        excerpt: String,
    },
    /// A JSON file is not complete JSON.
    #[error("{tool}: {path} is not a complete JSON report ({source}); excerpt: {excerpt:?}")]
    Json {
        /// The generator.
        tool: Generator,
        /// The file.
        path: PathBuf,
        /// A short excerpt of it.
        excerpt: String,
        /// What the JSON parser said.
        source: serde_json::Error,
    },
    /// A JSON report lacks a field.
    #[error("{tool}: {path} has no {field} (truncated, or written by another version of the script?); excerpt: {excerpt:?}")]
    MissingField {
        /// The generator.
        tool: Generator,
        /// The file.
        path: PathBuf,
        /// The field.
        field: String,
        /// A short excerpt of the file.
        excerpt: String,
    },
    /// The files hold no request at all.
    #[error("{tool}: {path} records no request: the generator sent none or none completed (is the service reachable at the URL given?); its output ended with: {output:?}")]
    NoRequests {
        /// The generator.
        tool: Generator,
        /// The file that should hold them.
        path: PathBuf,
        /// The end of what the generator printed.
        output: String,
    },
}

/// A service URL split as JMeter wants it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct BaseUrl {
    /// `http` or `https`.
    pub scheme: String,
    /// Host name or address (IPv6 without brackets).
    pub host: String,
    /// The port, explicit or the scheme's default.
    pub port: u16,
    /// The path prefix without a trailing `/` (often empty).
    pub prefix: String,
}

impl BaseUrl {
    fn parse(url: &str) -> Result<BaseUrl, LoadError> {
        let bad = |reason: &str| LoadError::BadUrl {
            url: url.to_owned(),
            reason: reason.to_owned(),
        };
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| bad("no scheme such as http://"))?;
        let default_port = match scheme {
            "http" => 80,
            "https" => 443,
            _ => return Err(bad("the scheme is neither http nor https")),
        };
        let (authority, prefix) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (host, after) = v6
                .split_once(']')
                .ok_or_else(|| bad("an IPv6 address without its closing `]`"))?;
            (host, after.strip_prefix(':'))
        } else {
            match authority.split_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (authority, None),
            }
        };
        if host.is_empty() {
            return Err(bad("no host"));
        }
        let port = match port {
            Some(p) => p.parse().map_err(|_| bad("the port is not a number"))?,
            None => default_port,
        };
        if prefix
            .chars()
            .any(|c| c.is_whitespace() || c == '"' || c == '\\' || c == '?' || c == '#')
        {
            return Err(bad(
                "the path prefix has spaces, quotes, a query or a fragment",
            ));
        }
        Ok(BaseUrl {
            scheme: scheme.to_owned(),
            host: host.to_owned(),
            port,
            prefix: prefix.trim_end_matches('/').to_owned(),
        })
    }

    /// `scheme://host:port` (brackets around an IPv6 address).
    pub fn origin(&self) -> String {
        if self.host.contains(':') {
            format!("{}://[{}]:{}", self.scheme, self.host, self.port)
        } else {
            format!("{}://{}:{}", self.scheme, self.host, self.port)
        }
    }

    /// The full URL of `request`.
    pub fn url(&self, request: &Request) -> String {
        format!("{}{}{}", self.origin(), self.prefix, request.path)
    }
}

/// Whole seconds of `d`, rounded up, at least 1 (tools that take whole seconds).
fn whole_secs(d: Duration) -> u64 {
    d.as_secs_f64().ceil().max(1.0) as u64
}

/// `d` as a Go duration (`1500ms`) for vegeta, rounded up to the millisecond.
fn go_duration(d: Duration) -> String {
    format!("{}ms", (d.as_secs_f64() * 1000.0).ceil() as u64)
}

/// `workdir/name` as a string for a command line.
fn in_dir(workdir: &Path, name: &str) -> String {
    workdir.join(name).display().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    /// What `generator`'s parser makes of `files` (name, content) in a fresh directory,
    /// with `stderr` as its output.
    pub(crate) fn parse_files(
        generator: Generator,
        files: &[(&str, &str)],
        stderr: &str,
    ) -> Result<LoadResult, ParseError> {
        let dir = tempfile::tempdir().unwrap();
        for (name, content) in files {
            std::fs::write(dir.path().join(name), content).unwrap();
        }
        parse_load(generator, dir.path(), "", stderr)
    }

    pub(crate) fn spec(generator: Generator, profile: LoadProfile) -> LoadSpec {
        LoadSpec {
            generator,
            requests: vec![Request::get("front", "/index.html")],
            profile,
            timeout: Duration::from_secs(5),
        }
    }

    #[test]
    fn generator_round_trips_through_its_word() {
        for g in Generator::ALL {
            assert_eq!(g.as_str().parse::<Generator>().unwrap(), g);
            assert_eq!(g.to_string(), g.as_str());
            assert_eq!(g.executable(), g.as_str());
            let json = serde_json::to_string(&g).unwrap();
            assert_eq!(json, format!("\"{}\"", g.as_str()));
            assert_eq!(serde_json::from_str::<Generator>(&json).unwrap(), g);
            assert!(!g.install_hint().is_empty());
        }
        assert_eq!(
            "ab".parse::<Generator>().unwrap_err().to_string(),
            "unknown load generator `ab`: expected one of jmeter, locust, wrk, vegeta"
        );
        assert_eq!(Generator::Locust.program(), "/opt/isolab/locust/bin/locust");
        assert_eq!(Generator::Wrk.program(), "wrk");
        assert_eq!(Generator::Jmeter.program(), "java");
        assert!(Generator::Jmeter
            .required_files()
            .contains(&"/usr/share/java/bsh.jar"));
    }

    #[test]
    fn unsupported_profiles_name_who_supports_them() {
        let rate = LoadProfile::Rate {
            rate: 100.0,
            duration: Duration::from_secs(1),
        };
        let e = Generator::Wrk.supports(&rate).unwrap_err();
        assert_eq!(e.supported, [Generator::Vegeta]);
        assert_eq!(
            e.to_string(),
            "wrk cannot drive a `rate` load profile (wrk drives a closed loop of constant connections): use vegeta"
        );
        let ramp = LoadProfile::Ramp {
            from: 1,
            to: 2,
            over: Duration::from_secs(1),
            hold: Duration::ZERO,
        };
        let e = Generator::Wrk.supports(&ramp).unwrap_err().to_string();
        assert!(e.ends_with("use jmeter or locust"), "{e}");
        let e = Generator::Vegeta
            .supports(&LoadProfile::Users {
                users: 1,
                duration: Duration::from_secs(1),
            })
            .unwrap_err()
            .to_string();
        assert!(e.ends_with("use jmeter, locust or wrk"), "{e}");
        let e = Generator::Locust
            .supports(&LoadProfile::Simultaneous { requests: 5 })
            .unwrap_err()
            .to_string();
        assert!(e.ends_with("use jmeter"), "{e}");
        for g in Generator::ALL {
            let ok = g.supports(&rate).is_ok();
            assert_eq!(ok, g == Generator::Vegeta);
        }
        // invocation refuses it the same way
        let e = invocation(
            &spec(Generator::Wrk, rate),
            "http://127.0.0.1",
            Path::new("/w"),
            1,
        )
        .unwrap_err();
        assert!(matches!(e, LoadError::Unsupported(_)), "{e}");
    }

    #[test]
    fn requests_and_urls_are_checked() {
        let users = LoadProfile::Users {
            users: 2,
            duration: Duration::from_secs(1),
        };
        let mut s = spec(Generator::Jmeter, users);
        s.requests.push(Request::get("front", "/other"));
        let e = invocation(&s, "http://h", Path::new("/w"), 1).unwrap_err();
        assert!(e.to_string().contains("two requests named `front`"), "{e}");
        s.requests = vec![Request::get("a b", "/")];
        assert!(invocation(&s, "http://h", Path::new("/w"), 1).is_err());
        s.requests = vec![Request::get("a", "index.html")];
        assert!(invocation(&s, "http://h", Path::new("/w"), 1).is_err());
        s.requests.clear();
        assert!(invocation(&s, "http://h", Path::new("/w"), 1).is_err());
        s.requests = vec![Request::get("a", "/")];
        s.timeout = Duration::ZERO;
        let e = invocation(&s, "http://h", Path::new("/w"), 1).unwrap_err();
        assert_eq!(e, LoadError::ZeroTimeout);

        let u = BaseUrl::parse("http://10.0.0.2:8080").unwrap();
        assert_eq!(u.origin(), "http://10.0.0.2:8080");
        assert_eq!(
            u.url(&Request::get("a", "/index.html")),
            "http://10.0.0.2:8080/index.html"
        );
        let u = BaseUrl::parse("https://[fd00::2]/wp/").unwrap();
        assert_eq!((u.host.as_str(), u.port), ("fd00::2", 443));
        assert_eq!(
            u.url(&Request::get("a", "/x")),
            "https://[fd00::2]:443/wp/x"
        );
        for bad in [
            "10.0.0.2:80",
            "ftp://h",
            "http://:80",
            "http://h:x",
            "http://h/a b",
        ] {
            let e = BaseUrl::parse(bad).unwrap_err().to_string();
            assert!(e.contains(bad), "{e}");
        }
    }
}
