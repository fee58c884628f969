//! Slurm: the batch script of a fleet, and `sbatch`, `scontrol` and `scancel` through a
//! [`ToolRunner`].

use std::path::{Path, PathBuf};

use isolab_tools::{shell_quote, ToolCommand, ToolError, ToolRunner};

/// The Debian package with Slurm's client programs.
const CLIENT_PACKAGE: &str = "slurm-client";

/// Which nodes a fleet asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Nodes {
    /// Any N nodes of the partition.
    Count(u32),
    /// These nodes.
    List(Vec<String>),
}

/// What a fleet asks of Slurm.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlurmRequest {
    /// The job's name (`isolab-` and the experiment's name).
    pub job_name: String,
    /// The partition; Slurm's default when `None`.
    pub partition: Option<String>,
    /// The nodes.
    pub nodes: Nodes,
    /// The time limit in Slurm's syntax (`2:00:00`, `1-0`); the partition's when `None`.
    pub time_limit: Option<String>,
    /// Where each job writes its output file (`isolab-fleet-FLEET-JOBID.out`); must be
    /// writable on the nodes.
    pub output_dir: PathBuf,
}

impl SlurmRequest {
    /// The request as `sbatch` options, for the store's record and for messages.
    pub fn describe(&self) -> String {
        let mut words = Vec::new();
        if let Some(p) = &self.partition {
            words.push(format!("--partition {p}"));
        }
        match &self.nodes {
            Nodes::Count(n) => words.push(format!("--nodes {n}")),
            Nodes::List(list) => words.push(format!("--nodelist {}", list.join(","))),
        }
        if let Some(t) = &self.time_limit {
            words.push(format!("--time {t}"));
        }
        words.join(" ")
    }

    /// How many nodes the job takes.
    pub fn node_count(&self) -> usize {
        match &self.nodes {
            Nodes::Count(n) => *n as usize,
            Nodes::List(list) => list.len(),
        }
    }
}

/// The batch script of fleet `fleet`: one job of the requested nodes, each exclusive (no
/// foreign job becomes an undeclared neighbour), one `srun` task per node running
/// `ISOLAB fleet task FLEET TASK_ARGS…`. The store's URL is not in the script: `sbatch` exports the
/// submitting environment, where `ISOLAB_DB` holds it.
///
/// One job with a task per node rather than a job array: Slurm may run two tasks of an
/// array on one node one after the other, which would leave the design a host short and
/// another host doubled.
pub fn batch_script(
    request: &SlurmRequest,
    isolab: &Path,
    fleet: i64,
    task_args: &[String],
) -> String {
    let mut lines = vec![
        "#!/bin/sh".to_owned(),
        format!(
            "# isolab fleet {fleet}: every node runs every cell of the experiment in its own \
             shuffled rounds."
        ),
        format!("#SBATCH --job-name={}", request.job_name),
        format!("#SBATCH --nodes={}", request.node_count()),
    ];
    if let Nodes::List(list) = &request.nodes {
        lines.push(format!("#SBATCH --nodelist={}", list.join(",")));
    }
    lines.push("#SBATCH --ntasks-per-node=1".to_owned());
    lines.push("#SBATCH --exclusive".to_owned());
    if let Some(p) = &request.partition {
        lines.push(format!("#SBATCH --partition={p}"));
    }
    if let Some(t) = &request.time_limit {
        lines.push(format!("#SBATCH --time={t}"));
    }
    lines.push(format!(
        "#SBATCH --output={}/isolab-fleet-{fleet}-%j.out",
        request.output_dir.display()
    ));
    let mut task = format!(
        "exec srun --ntasks-per-node=1 --kill-on-bad-exit=0 {} fleet task {fleet}",
        shell_quote(&isolab.display().to_string())
    );
    for arg in task_args {
        task.push(' ');
        task.push_str(&shell_quote(arg));
    }
    lines.push(task);
    let mut script = lines.join("\n");
    script.push('\n');
    script
}

/// What went wrong talking to Slurm.
#[derive(Debug, thiserror::Error)]
pub enum SlurmError {
    /// A Slurm program failed or is missing.
    #[error(transparent)]
    Tool(#[from] ToolError),
    /// A Slurm program's output is not what its machine-readable mode prints.
    #[error("cannot read the output of `{command}`: {reason} (output: `{output}`)")]
    Parse {
        /// The command.
        command: String,
        /// What was wrong.
        reason: String,
        /// The output, shortened.
        output: String,
    },
}

/// A job as `scontrol show job --oneliner` describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobInfo {
    /// The job id.
    pub id: String,
    /// Its state (`PENDING`, `RUNNING`, `COMPLETED`, `FAILED`, `CANCELLED`, …).
    pub state: String,
    /// Why it waits or ended (`None`, `Resources`, …).
    pub reason: String,
    /// Its nodes in Slurm's host-list syntax (`node[1-4]`), `(null)` while pending.
    pub nodes: String,
    /// How long it has run (`0:05:03`).
    pub run_time: String,
    /// Its exit code (`0:0` = status 0, no signal).
    pub exit_code: String,
}

/// A `KEY=` that a `scontrol show job --oneliner` line lacks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no {0}=")]
pub struct MissingField(pub &'static str);

/// Parses the `KEY=VALUE` words of one `scontrol show job --oneliner` line.
pub fn parse_job(line: &str) -> Result<JobInfo, MissingField> {
    let field = |key: &'static str| -> Result<String, MissingField> {
        line.split_whitespace()
            .find_map(|word| word.strip_prefix(key)?.strip_prefix('='))
            .map(str::to_owned)
            .ok_or(MissingField(key))
    };
    Ok(JobInfo {
        id: field("JobId")?,
        state: field("JobState")?,
        reason: field("Reason")?,
        nodes: field("NodeList")?,
        run_time: field("RunTime")?,
        exit_code: field("ExitCode")?,
    })
}

/// Slurm's client programs, run through a [`ToolRunner`].
pub struct Slurm<'t> {
    tools: &'t dyn ToolRunner,
}

impl<'t> Slurm<'t> {
    /// Slurm through `tools` ([`isolab_tools::SystemTools`] for the real programs).
    pub fn new(tools: &'t dyn ToolRunner) -> Self {
        Slurm { tools }
    }

    /// Submits `script` with the extra environment `env` (exported to the job); returns
    /// the job id.
    pub fn submit(&self, script: &Path, env: &[(&str, &str)]) -> Result<String, SlurmError> {
        let mut cmd = ToolCommand::new("sbatch", CLIENT_PACKAGE)
            .arg("--parsable")
            .arg(script);
        for (k, v) in env {
            cmd = cmd.env(k, v);
        }
        let out = self.tools.run(&cmd)?;
        let text = String::from_utf8_lossy(&out.stdout);
        // `--parsable`: "JOBID" or "JOBID;CLUSTER".
        let id = text
            .lines()
            .next()
            .and_then(|l| l.split(';').next())
            .map(str::trim)
            .unwrap_or("");
        if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
            return Err(SlurmError::Parse {
                command: cmd.display(),
                reason: "expected a job id".to_owned(),
                output: text.chars().take(200).collect(),
            });
        }
        Ok(id.to_owned())
    }

    /// The job, while Slurm still knows it (`None` once it has forgotten it: Slurm
    /// keeps ended jobs for `MinJobAge`, 300 s by default).
    pub fn job(&self, job: &str) -> Result<Option<JobInfo>, SlurmError> {
        let cmd = ToolCommand::new("scontrol", CLIENT_PACKAGE)
            .arg("--oneliner")
            .arg("show")
            .arg("job")
            .arg(job);
        let out = match self.tools.run(&cmd) {
            Ok(out) => out,
            Err(ToolError::Failed { stderr, .. }) if stderr.contains("Invalid job id") => {
                return Ok(None)
            }
            Err(e) => return Err(e.into()),
        };
        let text = String::from_utf8_lossy(&out.stdout);
        // One line per job; a heterogeneous or array job would print several.
        let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        parse_job(line)
            .map(Some)
            .map_err(|missing| SlurmError::Parse {
                command: cmd.display(),
                reason: missing.to_string(),
                output: text.chars().take(200).collect(),
            })
    }

    /// Cancels the job.
    pub fn cancel(&self, job: &str) -> Result<(), SlurmError> {
        self.tools
            .run(&ToolCommand::new("scancel", CLIENT_PACKAGE).arg(job))?;
        Ok(())
    }

    /// Runs `command` once on each of `nodes` (host-list syntax) through `srun`, e.g.
    /// `isolab gc` after a cancel.
    pub fn run_on_nodes(
        &self,
        nodes: &str,
        partition: Option<&str>,
        command: &[&str],
    ) -> Result<String, SlurmError> {
        let mut cmd = ToolCommand::new("srun", CLIENT_PACKAGE)
            .arg(format!("--nodelist={nodes}"))
            .arg("--ntasks-per-node=1");
        if let Some(p) = partition {
            cmd = cmd.arg(format!("--partition={p}"));
        }
        for word in command {
            cmd = cmd.arg(word);
        }
        let out = self.tools.run(&cmd)?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use isolab_tools::ToolOutput;
    use std::cell::RefCell;

    /// Answers each command with canned output and records the command lines.
    struct Fake {
        answers: Vec<Result<&'static str, &'static str>>,
        seen: RefCell<Vec<String>>,
    }

    impl ToolRunner for Fake {
        fn run(&self, cmd: &ToolCommand) -> Result<ToolOutput, ToolError> {
            let i = {
                let mut seen = self.seen.borrow_mut();
                seen.push(cmd.display());
                seen.len() - 1
            };
            match self.answers[i] {
                Ok(out) => Ok(ToolOutput {
                    stdout: out.as_bytes().to_vec(),
                    stderr: vec![],
                }),
                Err(err) => Err(ToolError::Failed {
                    command: cmd.display(),
                    status: "exit status: 1".into(),
                    stderr: err.into(),
                }),
            }
        }
    }

    fn request(nodes: Nodes) -> SlurmRequest {
        SlurmRequest {
            job_name: "isolab-pinning".into(),
            partition: Some("bench".into()),
            nodes,
            time_limit: Some("2:00:00".into()),
            output_dir: PathBuf::from("/shared/isolab"),
        }
    }

    #[test]
    fn the_script_takes_whole_nodes_and_runs_one_task_each() {
        let script = batch_script(
            &request(Nodes::Count(4)),
            Path::new("/usr/local/bin/isolab"),
            7,
            &["--workdir".into(), "/var/tmp/isolab".into()],
        );
        for line in [
            "#SBATCH --job-name=isolab-pinning",
            "#SBATCH --nodes=4",
            "#SBATCH --ntasks-per-node=1",
            "#SBATCH --exclusive",
            "#SBATCH --partition=bench",
            "#SBATCH --time=2:00:00",
            "#SBATCH --output=/shared/isolab/isolab-fleet-7-%j.out",
            "exec srun --ntasks-per-node=1 --kill-on-bad-exit=0 '/usr/local/bin/isolab' fleet task 7 '--workdir' '/var/tmp/isolab'",
        ] {
            assert!(script.lines().any(|l| l == line), "{line} missing:\n{script}");
        }
        assert!(script.starts_with("#!/bin/sh\n"));
        assert!(!script.contains("nodelist"));
        assert!(
            !script.contains("postgres"),
            "the store URL stays out of the script"
        );

        let listed = request(Nodes::List(vec!["n1".into(), "n3".into()]));
        let script = batch_script(&listed, Path::new("/opt/it's/isolab"), 8, &[]);
        assert!(script.contains("#SBATCH --nodes=2\n#SBATCH --nodelist=n1,n3\n"));
        assert!(
            script.contains("'/opt/it'\\''s/isolab' fleet task 8\n"),
            "{script}"
        );
        assert_eq!(
            listed.describe(),
            "--partition bench --nodelist n1,n3 --time 2:00:00"
        );
    }

    #[test]
    fn submit_reads_the_parsable_job_id_and_passes_the_environment() {
        let fake = Fake {
            answers: vec![Ok("1234;cluster\n"), Ok("Submitted batch job 5\n")],
            seen: RefCell::new(vec![]),
        };
        let slurm = Slurm::new(&fake);
        let id = slurm
            .submit(Path::new("/tmp/f.sh"), &[("ISOLAB_DB", "postgres://x@h/d")])
            .unwrap();
        assert_eq!(id, "1234");
        assert_eq!(fake.seen.borrow()[0], "sbatch --parsable /tmp/f.sh");
        let err = slurm.submit(Path::new("/tmp/f.sh"), &[]).unwrap_err();
        assert!(err.to_string().contains("expected a job id"), "{err}");
    }

    #[test]
    fn a_job_is_read_from_scontrol_s_one_line_form_and_a_forgotten_one_is_none() {
        let line = "JobId=12 JobName=isolab-pinning UserId=root(0) GroupId=root(0) \
                    Priority=4294901759 JobState=RUNNING Reason=None Dependency=(null) \
                    RunTime=00:00:07 TimeLimit=UNLIMITED NodeList=node1 ExitCode=0:0";
        let fake = Fake {
            answers: vec![
                Ok(Box::leak(format!("{line}\n").into_boxed_str())),
                Err("slurm_load_jobs error: Invalid job id specified"),
                Err("slurm_load_jobs error: Unable to contact slurm controller"),
            ],
            seen: RefCell::new(vec![]),
        };
        let slurm = Slurm::new(&fake);
        let job = slurm.job("12").unwrap().unwrap();
        assert_eq!(
            job,
            JobInfo {
                id: "12".into(),
                state: "RUNNING".into(),
                reason: "None".into(),
                nodes: "node1".into(),
                run_time: "00:00:07".into(),
                exit_code: "0:0".into(),
            }
        );
        assert_eq!(fake.seen.borrow()[0], "scontrol --oneliner show job 12");
        assert_eq!(slurm.job("12").unwrap(), None);
        assert!(slurm.job("12").is_err());
        assert_eq!(
            parse_job("JobId=1 JobState=PENDING"),
            Err(MissingField("Reason"))
        );
    }
}
