//! Slurm for real: a one-node cluster of Debian's munged, slurmctld and slurmd started by
//! the test ([`isolab_fleet::testing::SlurmCluster`]), a batch script submitted, read
//! back and cancelled through [`Slurm`], and nothing of the cluster left afterwards.
//! Needs root (slurmd starts jobs as their users); skipped with a reason otherwise.

use std::path::Path;
use std::time::{Duration, Instant};

use isolab_fleet::testing::SlurmCluster;
use isolab_fleet::Slurm;
use isolab_tools::{SystemTools, ToolCommand, ToolError, ToolOutput, ToolRunner};

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

/// The system's tools with the cluster's environment (`SLURM_CONF`) on every command.
struct ClusterTools(Vec<(String, String)>);

impl ToolRunner for ClusterTools {
    fn run(&self, cmd: &ToolCommand) -> Result<ToolOutput, ToolError> {
        let mut cmd = cmd.clone();
        for (k, v) in &self.0 {
            cmd = cmd.env(k, v);
        }
        SystemTools.run(&cmd)
    }
}

fn wait_for_state(
    slurm: &Slurm<'_>,
    job: &str,
    done: impl Fn(&str) -> bool,
    cluster: &SlurmCluster,
) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let state = slurm
            .job(job)
            .unwrap()
            .map(|j| j.state)
            .unwrap_or_else(|| "FORGOTTEN".into());
        if done(&state) {
            return state;
        }
        assert!(
            Instant::now() < deadline,
            "job {job} stuck in {state}\n{}",
            cluster.logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn daemons_running(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(&dir.display().to_string()) {
            found.push(cmdline);
        }
    }
    found
}

#[test]
fn a_job_runs_on_the_one_node_cluster_is_read_back_and_cancelled_and_the_cluster_goes() {
    if !is_root() {
        isolab_skip::skip("a Slurm cluster's slurmd needs root");
        return;
    }
    let cluster = match SlurmCluster::start() {
        Ok(c) => c,
        Err(e) if e.contains("apt-get install") => {
            isolab_skip::skip(e);
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let tools = ClusterTools(cluster.env());
    let slurm = Slurm::new(&tools);
    let dir = tempfile::tempdir().unwrap();

    // A job that succeeds: its output file says where it ran and with which environment.
    let script = dir.path().join("ok.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\n#SBATCH --job-name=isolab-test\n#SBATCH --nodes=1\n#SBATCH --exclusive\n\
             #SBATCH --partition={}\n#SBATCH --output={}/ok-%j.out\n\
             exec srun --ntasks-per-node=1 sh -c 'echo \"$SLURM_NODEID/$SLURM_NNODES $(hostname) $ISOLAB_PROBE\"'\n",
            cluster.partition(),
            dir.path().display()
        ),
    )
    .unwrap();
    let job = slurm
        .submit(&script, &[("ISOLAB_PROBE", "exported")])
        .unwrap();
    let state = wait_for_state(
        &slurm,
        &job,
        |s| s == "COMPLETED" || s == "FAILED",
        &cluster,
    );
    assert_eq!(state, "COMPLETED", "{}", cluster.logs());
    let info = slurm.job(&job).unwrap().unwrap();
    assert_eq!(info.id, job);
    assert_eq!(info.nodes, cluster.node());
    assert_eq!(info.exit_code, "0:0");
    let out = std::fs::read_to_string(dir.path().join(format!("ok-{job}.out"))).unwrap();
    assert_eq!(out.trim(), format!("0/1 {} exported", cluster.node()));

    // A job cancelled while it runs.
    let script = dir.path().join("long.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\n#SBATCH --nodes=1\n#SBATCH --output={}/long-%j.out\nexec srun sleep 600\n",
            dir.path().display()
        ),
    )
    .unwrap();
    let job = slurm.submit(&script, &[]).unwrap();
    wait_for_state(&slurm, &job, |s| s == "RUNNING", &cluster);
    slurm.cancel(&job).unwrap();
    let state = wait_for_state(&slurm, &job, |s| s == "CANCELLED", &cluster);
    assert_eq!(state, "CANCELLED");
    // The node is free again: a command runs on it through srun (as `fleet cancel` runs
    // `isolab gc`).
    let out = slurm
        .run_on_nodes(
            cluster.node(),
            Some(cluster.partition()),
            &["echo", "from srun"],
        )
        .unwrap();
    assert_eq!(out.trim(), "from srun");

    let conf_dir = Path::new(&cluster.env()[0].1).parent().unwrap().to_owned();
    drop(cluster);
    assert!(!conf_dir.exists(), "the cluster's directory is removed");
    assert!(
        daemons_running(&conf_dir).is_empty(),
        "daemons left: {:?}",
        daemons_running(&conf_dir)
    );
}
