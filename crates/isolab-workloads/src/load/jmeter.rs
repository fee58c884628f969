//! Apache JMeter 2.13 (Debian's `jmeter`): a generated test plan run in non-GUI mode,
//! read back from its CSV JTL.
//!
//! The test plan (`plan.jmx`) holds thread groups whose threads loop over the
//! requests, one HTTP sampler each (keep-alive, the spec's timeout as connect and
//! response timeout), until the scheduler's duration ends:
//!
//! - `users`: one group of that many threads, all started at once.
//! - `ramp` from `from` to `to` over `over`, then `hold`: JMeter starts a group's
//!   threads `ramp_time / threads` apart, the first at once. A group `initial` of
//!   `from − 1` threads starts at once; a group `ramp` of `n = to − from + 1` threads
//!   has `ramp_time = over · n / (n − 1)`, so its first thread joins the initial ones at
//!   0 s (`from` users) and its last one starts at `over` (`to` users): users at `t` are
//!   `from + ⌊(to − from)·t/over⌋`, the profile's line rounded down. `ramp_time` is in
//!   whole seconds in JMeter 2.13, so the last thread starts within `n/(2(n−1))` s of
//!   `over` (seed 003: 727 s for 100 threads, the 100th user at 719.7 s instead of
//!   720 s). A ramp from 0 starts like one from 1 (JMeter cannot delay a group's first
//!   thread by less than a whole second). Both groups stop at `over + hold`.
//! - `simultaneous`: one group of N threads, each sending every request once, held by
//!   a Synchronizing Timer until all N are ready, then released together.
//!
//! Durations are whole seconds, rounded up (JMeter 2.13's scheduler takes seconds).
//!
//! **Why not `/usr/bin/jmeter`.** Debian 12's JMeter 2.13 runs with Debian's XStream
//! 1.4.20, which refuses to deserialise any class it was not told to allow, and JMeter
//! 2.13 allows none: `jmeter -n -t plan.jmx` prints `Error in NonGUIDriver
//! com.thoughtworks.xstream.security.ForbiddenClassException:
//! org.apache.jmeter.save.ScriptWrapper`, writes no results and exits 0 (for any plan,
//! JMeter's own examples too). JMeter's `beanshell.init.file` runs only after the plan is
//! loaded, so it cannot help. isolab therefore starts JMeter through BeanShell
//! (`libbsh-java`, a dependency of Debian's jmeter): `java … -cp
//! /usr/share/jmeter/bin/ApacheJMeter.jar:/usr/share/java/bsh.jar bsh.Interpreter
//! jmeter-launcher.bsh -n -t plan.jmx …` where [`LAUNCHER`] loads JMeter's properties in
//! JMeter's own class loader, allows every type to the XStream instance that reads test
//! plans (`SaveService.JMXSAVER`; the only plan it reads is the one isolab generated),
//! then calls JMeter's usual entry point `org.apache.jmeter.NewDriver.main` with the
//! arguments. The JVM gets a 512 MiB heap, the generator's cpus as its processor
//! count, and no performance-data file in `/tmp`. The HTTP sampler is in Debian's
//! `jmeter-http` package.
//!
//! The command sets every JTL save property isolab reads (CSV with a header, ms epoch
//! timestamps of the sample's **start**, elapsed, label, responseCode, success,
//! failureMessage, bytes, thread counts, Latency) instead of relying on
//! `jmeter.properties`. JMeter exits 0 even when it could not run the plan: the
//! missing `results.jtl` is then the error [`parse_load`] reports, quoting its output.
//!
//! [`parse_load`] reads `results.jtl` by header names: one sample per row, its end being
//! `timeStamp + elapsed`, a success when `success` is `true` (JMeter counts responses
//! other than 2xx and 3xx as failures), users from `allThreads`.
//!
//! [`parse_load`]: super::parse_load

use super::csv::{number, Csv};
use super::result::{summarize, Sample};
use super::{
    in_dir, open_file, whole_secs, BaseUrl, Generator, Invocation, LoadProfile, LoadResult,
    LoadSpec, Output, ParseError,
};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// The test plan's file name in the working directory.
pub const PLAN: &str = "plan.jmx";
/// The JTL (CSV results) file's name in the working directory.
pub const RESULTS: &str = "results.jtl";
/// JMeter's log file's name in the working directory.
pub const LOG: &str = "jmeter.log";

/// The JTL save settings, passed as `-J` properties.
const SAVE: &[(&str, &str)] = &[
    ("jmeter.save.saveservice.output_format", "csv"),
    ("jmeter.save.saveservice.print_field_names", "true"),
    ("jmeter.save.saveservice.default_delimiter", ","),
    ("jmeter.save.saveservice.timestamp_format", "ms"),
    ("sampleresult.timestamp.start", "true"),
    ("jmeter.save.saveservice.time", "true"),
    ("jmeter.save.saveservice.label", "true"),
    ("jmeter.save.saveservice.response_code", "true"),
    ("jmeter.save.saveservice.successful", "true"),
    (
        "jmeter.save.saveservice.assertion_results_failure_message",
        "true",
    ),
    ("jmeter.save.saveservice.bytes", "true"),
    ("jmeter.save.saveservice.thread_counts", "true"),
    ("jmeter.save.saveservice.latency", "true"),
    ("jmeter.save.saveservice.response_message", "false"),
    ("jmeter.save.saveservice.thread_name", "false"),
    ("jmeter.save.saveservice.data_type", "false"),
    ("jmeter.save.saveservice.url", "false"),
    ("jmeter.save.saveservice.subresults", "false"),
    ("jmeter.save.saveservice.assertions", "false"),
    ("jmeter.save.saveservice.response_data", "false"),
    ("jmeter.save.saveservice.samplerData", "false"),
    ("jmeter.save.saveservice.requestHeaders", "false"),
    ("jmeter.save.saveservice.responseHeaders", "false"),
    ("jmeter.save.saveservice.encoding", "false"),
    ("jmeter.save.saveservice.filename", "false"),
    ("jmeter.save.saveservice.hostname", "false"),
    ("jmeter.save.saveservice.sample_count", "false"),
    ("jmeter.save.saveservice.idle_time", "false"),
];

/// Where Debian installs JMeter (`jmeter.home`).
pub const JMETER_HOME: &str = "/usr/share/jmeter";
/// The class path of the launch: JMeter's bootstrap jar (whose manifest names the
/// libraries in `/usr/share/java`) and BeanShell.
pub const CLASS_PATH: &str = "/usr/share/jmeter/bin/ApacheJMeter.jar:/usr/share/java/bsh.jar";
/// The launcher's file name in the working directory.
pub const LAUNCHER_FILE: &str = "jmeter-launcher.bsh";

/// The BeanShell launcher (see the module's documentation).
pub const LAUNCHER: &str = r#"// Generated by isolab: runs JMeter 2.13 (org.apache.jmeter.NewDriver) with the
// arguments after allowing the XStream that reads test plans to read this one: Debian's
// XStream 1.4.20 denies every type unless allowed, and JMeter 2.13 allows none.
home = System.getProperty("jmeter.home");
driver = Class.forName("org.apache.jmeter.NewDriver");
loaderField = driver.getDeclaredField("loader");
loaderField.setAccessible(true);
loader = loaderField.get(null);
utils = Class.forName("org.apache.jmeter.util.JMeterUtils", true, loader);
utils.getMethod("setJMeterHome", new Class[] { String.class }).invoke(null, new Object[] { home });
utils.getMethod("loadJMeterProperties", new Class[] { String.class })
    .invoke(null, new Object[] { home + "/bin/jmeter.properties" });
saveService = Class.forName("org.apache.jmeter.save.SaveService", true, loader);
saver = saveService.getDeclaredField("JMXSAVER");
saver.setAccessible(true);
saver.get(null).addPermission(com.thoughtworks.xstream.security.AnyTypePermission.ANY);
driver.getMethod("main", new Class[] { String[].class }).invoke(null, new Object[] { bsh.args });
"#;

/// The plan, the launcher and the command for `spec` (checked by
/// [`super::invocation`]).
pub(crate) fn invocation(
    spec: &LoadSpec,
    url: &BaseUrl,
    workdir: &Path,
    threads: u32,
) -> Invocation {
    let mut command: Vec<String> = vec![
        spec.generator.program().to_owned(),
        "-Xms256m".to_owned(),
        "-Xmx512m".to_owned(),
        format!("-XX:ActiveProcessorCount={threads}"),
        // no /tmp/hsperfdata_USER/PID file
        "-XX:-UsePerfData".to_owned(),
        format!("-Djmeter.home={JMETER_HOME}"),
        "-cp".to_owned(),
        CLASS_PATH.to_owned(),
        "bsh.Interpreter".to_owned(),
        in_dir(workdir, LAUNCHER_FILE),
    ];
    command.extend(
        [
            "-n",
            "-t",
            &in_dir(workdir, PLAN),
            "-l",
            &in_dir(workdir, RESULTS),
            "-j",
            &in_dir(workdir, LOG),
        ]
        .map(str::to_owned),
    );
    command.extend(SAVE.iter().map(|(k, v)| format!("-J{k}={v}")));
    Invocation {
        files: vec![
            (PLAN.to_owned(), plan(spec, url)),
            (LAUNCHER_FILE.to_owned(), LAUNCHER.to_owned()),
        ],
        commands: vec![command],
        env: Vec::new(),
    }
}

/// One thread group of the plan.
#[derive(Debug, PartialEq)]
pub(crate) struct Group {
    /// Its name.
    pub name: &'static str,
    /// Threads (users).
    pub threads: u32,
    /// Seconds over which its threads start.
    pub ramp_s: u64,
    /// Scheduler duration in seconds; `None`: each thread runs its loop once.
    pub duration_s: Option<u64>,
}

/// The thread groups of a closed-loop or simultaneous profile (see the module's
/// documentation for the ramp).
pub(crate) fn groups(profile: &LoadProfile) -> Vec<Group> {
    match profile {
        LoadProfile::Users { users, duration } => vec![Group {
            name: "users",
            threads: *users,
            ramp_s: 0,
            duration_s: Some(whole_secs(*duration)),
        }],
        LoadProfile::Ramp {
            from,
            to,
            over,
            hold,
        } => {
            let duration_s = Some(whole_secs(*over + *hold));
            let initial = from.saturating_sub(1);
            let n = to - initial;
            let mut out = Vec::new();
            if initial > 0 {
                out.push(Group {
                    name: "initial",
                    threads: initial,
                    ramp_s: 0,
                    duration_s,
                });
            }
            let ramp_s = if n > 1 {
                (over.as_secs_f64() * f64::from(n) / f64::from(n - 1)).round() as u64
            } else {
                0
            };
            out.push(Group {
                name: "ramp",
                threads: n,
                ramp_s,
                duration_s,
            });
            out
        }
        LoadProfile::Simultaneous { requests } => vec![Group {
            name: "simultaneous",
            threads: *requests,
            ramp_s: 0,
            duration_s: None,
        }],
        LoadProfile::Rate { .. } | LoadProfile::Steps { .. } => Vec::new(),
    }
}

/// `text` with XML's special characters escaped.
fn xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            _ => out.push(c),
        }
    }
    out
}

/// The `.jmx` test plan.
pub(crate) fn plan(spec: &LoadSpec, url: &BaseUrl) -> String {
    let timeout_ms = spec.timeout.as_millis().max(1);
    let mut samplers = String::new();
    for r in &spec.requests {
        let _ = write!(
            samplers,
            r#"        <HTTPSamplerProxy guiclass="HttpTestSampleGui" testclass="HTTPSamplerProxy" testname="{name}" enabled="true">
          <elementProp name="HTTPsampler.Arguments" elementType="Arguments" guiclass="HTTPArgumentsPanel" testclass="Arguments" testname="User Defined Variables" enabled="true">
            <collectionProp name="Arguments.arguments"/>
          </elementProp>
          <stringProp name="HTTPSampler.domain">{host}</stringProp>
          <stringProp name="HTTPSampler.port">{port}</stringProp>
          <stringProp name="HTTPSampler.connect_timeout">{timeout_ms}</stringProp>
          <stringProp name="HTTPSampler.response_timeout">{timeout_ms}</stringProp>
          <stringProp name="HTTPSampler.protocol">{scheme}</stringProp>
          <stringProp name="HTTPSampler.contentEncoding"></stringProp>
          <stringProp name="HTTPSampler.path">{path}</stringProp>
          <stringProp name="HTTPSampler.method">{method}</stringProp>
          <boolProp name="HTTPSampler.follow_redirects">true</boolProp>
          <boolProp name="HTTPSampler.auto_redirects">false</boolProp>
          <boolProp name="HTTPSampler.use_keepalive">true</boolProp>
          <boolProp name="HTTPSampler.DO_MULTIPART_POST">false</boolProp>
          <boolProp name="HTTPSampler.monitor">false</boolProp>
          <stringProp name="HTTPSampler.embedded_url_re"></stringProp>
        </HTTPSamplerProxy>
        <hashTree/>
"#,
            name = xml(&r.name),
            host = xml(&url.host),
            port = url.port,
            scheme = xml(&url.scheme),
            path = xml(&format!("{}{}", url.prefix, r.path)),
            method = xml(&r.method),
        );
    }
    if let LoadProfile::Simultaneous { requests } = spec.profile {
        let _ = write!(
            samplers,
            r#"        <SyncTimer guiclass="TestBeanGUI" testclass="SyncTimer" testname="Synchronizing Timer" enabled="true">
          <intProp name="groupSize">{requests}</intProp>
          <longProp name="timeoutInMs">0</longProp>
        </SyncTimer>
        <hashTree/>
"#
        );
    }
    let mut tree = String::new();
    for g in groups(&spec.profile) {
        let (loops, scheduler, duration) = match g.duration_s {
            Some(d) => (-1, true, d.to_string()),
            None => (1, false, String::new()),
        };
        let _ = write!(
            tree,
            r#"      <ThreadGroup guiclass="ThreadGroupGui" testclass="ThreadGroup" testname="{name}" enabled="true">
        <stringProp name="ThreadGroup.on_sample_error">continue</stringProp>
        <elementProp name="ThreadGroup.main_controller" elementType="LoopController" guiclass="LoopControlPanel" testclass="LoopController" testname="Loop Controller" enabled="true">
          <boolProp name="LoopController.continue_forever">false</boolProp>
          <intProp name="LoopController.loops">{loops}</intProp>
        </elementProp>
        <stringProp name="ThreadGroup.num_threads">{threads}</stringProp>
        <stringProp name="ThreadGroup.ramp_time">{ramp}</stringProp>
        <longProp name="ThreadGroup.start_time">0</longProp>
        <longProp name="ThreadGroup.end_time">0</longProp>
        <boolProp name="ThreadGroup.scheduler">{scheduler}</boolProp>
        <stringProp name="ThreadGroup.duration">{duration}</stringProp>
        <stringProp name="ThreadGroup.delay"></stringProp>
      </ThreadGroup>
      <hashTree>
{samplers}      </hashTree>
"#,
            name = g.name,
            threads = g.threads,
            ramp = g.ramp_s,
        );
    }
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<!-- Generated by isolab for a {kind} load; JMeter 2.13. -->
<jmeterTestPlan version="1.2" properties="2.8" jmeter="2.13 r1665067">
  <hashTree>
    <TestPlan guiclass="TestPlanGui" testclass="TestPlan" testname="isolab" enabled="true">
      <stringProp name="TestPlan.comments"></stringProp>
      <boolProp name="TestPlan.functional_mode">false</boolProp>
      <boolProp name="TestPlan.serialize_threadgroups">false</boolProp>
      <elementProp name="TestPlan.user_defined_variables" elementType="Arguments" guiclass="ArgumentsPanel" testclass="Arguments" testname="User Defined Variables" enabled="true">
        <collectionProp name="Arguments.arguments"/>
      </elementProp>
      <stringProp name="TestPlan.user_define_classpath"></stringProp>
    </TestPlan>
    <hashTree>
{tree}    </hashTree>
  </hashTree>
</jmeterTestPlan>
"#,
        kind = spec.profile.kind(),
    )
}

/// Reads `results.jtl` in `workdir`.
pub(crate) fn parse(workdir: &Path, output: &Output) -> Result<LoadResult, ParseError> {
    let tool = Generator::Jmeter;
    let (path, file) = open_file(tool, workdir, RESULTS, output)?;
    let mut rows = Csv::open(tool, &path, file)?;
    let col = |name| rows.column(name);
    let (ts, elapsed, label, code, success, threads) = (
        col("timeStamp")?,
        col("elapsed")?,
        col("label")?,
        col("responseCode")?,
        col("success")?,
        col("allThreads")?,
    );
    let message = rows.header.iter().position(|h| h == "failureMessage");
    let mut names: Vec<String> = Vec::new();
    let mut samples = Vec::new();
    // (name, responseCode or failure message) → count
    let mut failures: BTreeMap<(String, String), u64> = BTreeMap::new();
    for row in rows.by_ref() {
        let (line, row) = row?;
        let num = |i: usize, column| number(tool, &path, line, column, &row[i]);
        let name = &row[label];
        let index = match names.iter().position(|n| n == name) {
            Some(i) => i,
            None => {
                names.push(name.clone());
                names.len() - 1
            }
        };
        let ok = match row[success].as_str() {
            "true" => true,
            "false" => false,
            other => {
                return Err(ParseError::BadRow {
                    tool,
                    path: path.clone(),
                    line,
                    reason: format!("column `success` is {other:?}, not true or false"),
                    excerpt: super::excerpt(&row.join(",")),
                })
            }
        };
        if !ok {
            let why = match message.map(|i| row[i].trim()) {
                Some(m) if !m.is_empty() => format!("{} {m}", row[code]),
                _ => row[code].clone(),
            };
            *failures.entry((name.clone(), why)).or_default() += 1;
        }
        samples.push(Sample {
            name: index,
            start_ms: num(ts, "timeStamp")?,
            latency_ms: num(elapsed, "elapsed")?,
            ok,
            users: Some(num(threads, "allThreads")?),
        });
    }
    if samples.is_empty() {
        return Err(ParseError::NoRequests {
            tool,
            path,
            output: output.tail(),
        });
    }
    let mut result = summarize(&names, &samples);
    result.notes = failure_notes(&failures);
    Ok(result)
}

/// `name: N failed with WHY` for each (name, why), most frequent first within a name.
pub(crate) fn failure_notes(failures: &BTreeMap<(String, String), u64>) -> Vec<String> {
    let mut v: Vec<(&(String, String), &u64)> = failures.iter().collect();
    v.sort_by(|a, b| a.0 .0.cmp(&b.0 .0).then(b.1.cmp(a.1)));
    v.into_iter()
        .map(|((name, why), n)| format!("{name}: {n} failed with {why}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::tests::{parse_files, secs, spec};
    use super::super::{invocation as build, Request};
    use super::*;
    use std::time::Duration;

    #[test]
    fn seed_003_ramp_starts_one_user_then_one_every_7_27_s() {
        let p = LoadProfile::Ramp {
            from: 1,
            to: 100,
            over: secs(720),
            hold: secs(80),
        };
        let g = groups(&p);
        assert_eq!(
            g,
            [Group {
                name: "ramp",
                threads: 100,
                ramp_s: 727,
                duration_s: Some(800)
            }]
        );
        // JMeter starts thread i at i·ramp/threads: the 100th at 719.73 s.
        let last = 99.0 * 727.0 / 100.0;
        assert!((last - 720.0f64).abs() < 0.5, "{last}");
    }

    #[test]
    fn ramp_from_more_than_one_user_starts_them_in_a_group_of_their_own() {
        let p = LoadProfile::Ramp {
            from: 5,
            to: 9,
            over: secs(4),
            hold: secs(2),
        };
        let g = groups(&p);
        assert_eq!(g.len(), 2);
        assert_eq!((g[0].name, g[0].threads, g[0].ramp_s), ("initial", 4, 0));
        // 5 threads 1 s apart: 5 users at 0 s, 9 at 4 s
        assert_eq!((g[1].name, g[1].threads, g[1].ramp_s), ("ramp", 5, 5));
        assert!(g.iter().all(|g| g.duration_s == Some(6)));
        // a flat ramp is constant users
        let flat = groups(&LoadProfile::Ramp {
            from: 3,
            to: 3,
            over: secs(1),
            hold: secs(1),
        });
        assert_eq!(flat.iter().map(|g| g.threads).sum::<u32>(), 3);
        assert_eq!(flat.last().unwrap().ramp_s, 0);
        // from 0 starts like from 1: 10 threads 1 s apart, the first at once
        let zero = groups(&LoadProfile::Ramp {
            from: 0,
            to: 10,
            over: secs(9),
            hold: secs(1),
        });
        assert_eq!(
            zero,
            [Group {
                name: "ramp",
                threads: 10,
                ramp_s: 10,
                duration_s: Some(10)
            }]
        );
    }

    #[test]
    fn plan_is_well_formed_xml_with_every_request() {
        let mut s = spec(
            Generator::Jmeter,
            LoadProfile::Users {
                users: 10,
                duration: Duration::from_millis(2500),
            },
        );
        s.requests.push(Request::get("search", "/?s=a&b=<c>"));
        let inv = build(&s, "http://10.0.0.2:8080/wp", Path::new("/work/run"), 2).unwrap();
        let (name, plan) = &inv.files[0];
        assert_eq!(name, PLAN);
        let mut reader = quick_xml::Reader::from_str(plan);
        let mut samplers = Vec::new();
        loop {
            match reader.read_event().unwrap() {
                quick_xml::events::Event::Eof => break,
                quick_xml::events::Event::Start(e) if e.name().as_ref() == b"HTTPSamplerProxy" => {
                    let tn = e.try_get_attribute("testname").unwrap().unwrap();
                    samplers.push(String::from_utf8(tn.value.to_vec()).unwrap());
                }
                _ => {}
            }
        }
        assert_eq!(samplers, ["front", "search"]);
        assert!(plan.contains(
            "<stringProp name=\"HTTPSampler.path\">/wp/?s=a&amp;b=&lt;c&gt;</stringProp>"
        ));
        assert!(plan.contains("<stringProp name=\"ThreadGroup.duration\">3</stringProp>"));
        assert!(
            plan.contains("<stringProp name=\"HTTPSampler.response_timeout\">5000</stringProp>")
        );
        assert!(plan.contains("<stringProp name=\"HTTPSampler.port\">8080</stringProp>"));
        let cmd = inv.commands[0].join(" ");
        assert!(
            cmd.starts_with(
                "java -Xms256m -Xmx512m -XX:ActiveProcessorCount=2 -XX:-UsePerfData \
                 -Djmeter.home=/usr/share/jmeter \
                 -cp /usr/share/jmeter/bin/ApacheJMeter.jar:/usr/share/java/bsh.jar bsh.Interpreter \
                 /work/run/jmeter-launcher.bsh -n -t /work/run/plan.jmx -l /work/run/results.jtl \
                 -j /work/run/jmeter.log -Jjmeter.save.saveservice.output_format=csv "
            ),
            "{cmd}"
        );
        assert!(cmd.contains(" -Jsampleresult.timestamp.start=true "));
        assert_eq!(
            inv.files[1],
            (LAUNCHER_FILE.to_owned(), LAUNCHER.to_owned())
        );
    }

    #[test]
    fn simultaneous_requests_wait_on_a_synchronizing_timer() {
        let s = spec(
            Generator::Jmeter,
            LoadProfile::Simultaneous { requests: 50 },
        );
        let inv = build(&s, "http://h", Path::new("/w"), 1).unwrap();
        let plan = &inv.files[0].1;
        assert!(plan.contains("<intProp name=\"groupSize\">50</intProp>"));
        assert!(plan.contains("<intProp name=\"LoopController.loops\">1</intProp>"));
        assert!(plan.contains("<boolProp name=\"ThreadGroup.scheduler\">false</boolProp>"));
    }

    fn parse_text(jtl: &str) -> Result<LoadResult, ParseError> {
        parse_files(Generator::Jmeter, &[(RESULTS, jtl)], "")
    }

    #[test]
    fn bad_jtl_names_jmeter_and_what_is_missing() {
        let e = parse_files(Generator::Jmeter, &[], "Error in NonGUIDriver")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("jmeter: cannot read") && e.contains("Error in NonGUIDriver"),
            "{e}"
        );
        let e = parse_text("").unwrap_err().to_string();
        assert!(e.contains("jmeter") && e.contains("no header"), "{e}");
        let e = parse_text("timeStamp,elapsed,label\n1,2,a\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("no column `responseCode`"), "{e}");
        let header = "timeStamp,elapsed,label,responseCode,success,failureMessage,bytes,grpThreads,allThreads,Latency\n";
        let e = parse_text(header).unwrap_err().to_string();
        assert!(e.contains("records no request"), "{e}");
        let e = parse_text(&format!(
            "{header}1000,5,front,200,true,,10000,1,1,4\n1001,5,fr"
        ))
        .unwrap_err()
        .to_string();
        assert!(e.contains("line 3") && e.contains("truncated"), "{e}");
        let e = parse_text(&format!("{header}1000,x,front,200,true,,10000,1,1,4\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("`elapsed` is \"x\""), "{e}");
    }

    #[test]
    fn failures_are_counted_and_explained() {
        let header = "timeStamp,elapsed,label,responseCode,success,failureMessage,bytes,grpThreads,allThreads,Latency\n";
        let r = parse_text(&format!(
            "{header}1000,5,front,200,true,,10000,1,1,4\n1100,7,front,500,false,,10,1,2,7\n\
             1200,3,front,Non HTTP response code: java.net.ConnectException,false,\"Connection refused, really\",0,1,2,0\n"
        ))
        .unwrap();
        assert_eq!((r.overall.requests, r.overall.failures), (3, 2));
        assert_eq!(r.intervals.len(), 1);
        // allThreads 1, 2 and 2 in that second
        assert_eq!(r.intervals[0].users, Some(5.0 / 3.0));
        assert_eq!(r.notes.len(), 2, "{:?}", r.notes);
        assert!(r.notes.iter().any(|n| n == "front: 1 failed with 500"));
    }
}
