//! The commands that realise a plan, and the calibration commands with the parsers
//! of their JSON output.

use std::path::{Path, PathBuf};

use super::kind::NeighbourKind;
use super::net::NetNames;
use super::plan::{NeighbourPlan, Rate};

/// Size of each disk neighbour's file (and of the calibration file), in bytes.
pub const DISK_FILE_SIZE: u64 = 64 << 20;

/// Share of its memory limit a memory neighbour allocates and touches: close to the
/// limit, leaving room for stress-ng's own processes.
pub const MEMORY_FILL: f64 = 0.9;

/// What a memory neighbour allocates without a memory limit (stress-ng's default).
pub const DEFAULT_MEMORY_BYTES: u64 = 256 << 20;

/// Children a fork neighbour creates per round (`--fork-max`): far more than any
/// pids limit isolab sets, so that the limit, not stress-ng, holds it.
const FORK_MAX: &str = "1024";

/// How long a neighbour runs unless stopped: a day.
const FOREVER_S: u32 = 86_400;

/// Seconds of a calibration run.
const CALIBRATION_S: u32 = 3;

/// Where and how a neighbour instance runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandContext {
    /// The run's working directory (disk neighbours put their files here).
    pub workdir: PathBuf,
    /// Whether the working directory's file system supports `O_DIRECT`.
    pub direct: bool,
    /// The neighbour's memory limit in bytes, if it has one.
    pub memory_limit: Option<u64>,
    /// The index of the (first) instance: names its files and its server port.
    pub index: u32,
    /// Which way network neighbours' traffic flows.
    pub direction: super::NetDirection,
}

/// One argv per instance of `plan`, for the instances numbered `ctx.index`,
/// `ctx.index + 1`, … (each gets its own disk file and server port).
pub fn commands(plan: &NeighbourPlan, ctx: &CommandContext) -> Vec<Vec<String>> {
    (0..plan.instances)
        .map(|i| {
            command(
                &NeighbourPlan {
                    instances: 1,
                    per_instance: plan.rate_of(i),
                    last: None,
                    ..*plan
                },
                &CommandContext {
                    index: ctx.index + i,
                    ..ctx.clone()
                },
            )
        })
        .collect()
}

/// The argv of instance `ctx.index` of `plan`.
///
/// Network neighbours reach the servers of this process's [`super::NeighbourNet`]
/// (its names come from the process id, see [`NetNames::of`]).
pub fn command(plan: &NeighbourPlan, ctx: &CommandContext) -> Vec<String> {
    let stress = |args: &[&str]| -> Vec<String> {
        let mut v = vec!["stress-ng".to_owned()];
        v.extend(args.iter().map(|s| s.to_string()));
        v.extend(["--timeout".into(), "0".into()]);
        v.extend(["--temp-path".into(), ctx.workdir.display().to_string()]);
        v
    };
    match plan.kind {
        NeighbourKind::Cpu => {
            let load = match plan.per_instance {
                Rate::CpuLoadPct(p) => p.clamp(1, 100),
                _ => 100,
            };
            stress(&[
                "--cpu",
                "1",
                "--cpu-method",
                "all",
                "--cpu-load",
                &load.to_string(),
            ])
        }
        NeighbourKind::Memory => {
            let bytes = memory_bytes(ctx.memory_limit);
            stress(&["--vm", "1", "--vm-bytes", &bytes.to_string(), "--vm-keep"])
        }
        // Up to this many children per round: a bomb that runs into its pids limit.
        NeighbourKind::Fork => stress(&["--fork", "1", "--fork-max", FORK_MAX]),
        NeighbourKind::Cache => {
            if ctx.index & 1 == 0 {
                stress(&["--cache", "1"])
            } else {
                stress(&["--stream", "1"])
            }
        }
        NeighbourKind::Disk => {
            let mut v = fio_common(
                "bomb",
                &ctx.workdir.join(format!("bomb-{}", ctx.index)),
                ctx.direct,
            );
            if plan.target.is_some() {
                // Sized against a capacity measured with libaio: the same engine.
                v.extend([
                    "--ioengine=libaio".into(),
                    format!("--iodepth={}", super::plan::NEIGHBOUR_IODEPTH),
                ]);
            } else {
                v.push("--ioengine=psync".into());
            }
            v.push(format!("--runtime={FOREVER_S}"));
            if let Rate::Iops(total) = plan.per_instance {
                // fio caps reads and writes separately with one value: half each.
                v.push(format!("--rate_iops={}", total.div_ceil(2).max(1)));
            }
            v
        }
        NeighbourKind::Network => {
            let names = NetNames::of(std::process::id());
            let mut v = names.client(ctx.index, FOREVER_S);
            v.extend(["-i".into(), "0".into()]);
            if ctx.direction == super::NetDirection::Receive {
                // The server sends, the instance in its cgroup receives.
                v.push("-R".into());
            }
            if let Rate::Mbps(m) = plan.per_instance {
                v.extend(["-b".into(), format!("{m}M")]);
            }
            v
        }
    }
}

/// Bytes a memory neighbour allocates under `limit`: [`MEMORY_FILL`] of it, in
/// whole pages, at least 4 MiB.
fn memory_bytes(limit: Option<u64>) -> u64 {
    match limit {
        None => DEFAULT_MEMORY_BYTES,
        Some(l) => (((l as f64 * MEMORY_FILL) as u64) / 4096 * 4096).max(4 << 20),
    }
}

fn fio_common(name: &str, file: &Path, direct: bool) -> Vec<String> {
    vec![
        "fio".into(),
        format!("--name={name}"),
        "--rw=randrw".into(),
        "--rwmixread=50".into(),
        "--bs=32k".into(),
        format!("--direct={}", u8::from(direct)),
        format!("--size={DISK_FILE_SIZE}"),
        "--time_based".into(),
        "--unlink=1".into(),
        format!("--filename={}", file.display()),
    ]
}

/// The disk calibration: fio random 50/50 read/write of 32 KiB blocks with 16
/// outstanding I/Os (libaio) for a few seconds on a file in `workdir`, JSON on
/// stdout for [`parse_fio_iops`]. `direct` as for the neighbours.
pub fn disk_capacity_command(workdir: &Path, direct: bool) -> Vec<String> {
    let mut v = fio_common("calibrate", &workdir.join("isolab-disk-capacity"), direct);
    v.extend([
        "--ioengine=libaio".into(),
        format!("--iodepth={}", super::plan::CALIBRATION_IODEPTH),
        format!("--runtime={CALIBRATION_S}"),
        "--output-format=json".into(),
    ]);
    v
}

/// The network calibration: one unlimited TCP stream from namespace a to server 0
/// in namespace b of `names` for a few seconds, JSON on stdout for
/// [`parse_iperf3_gbps`].
pub fn net_capacity_command(names: &NetNames) -> Vec<String> {
    let mut v = names.client(0, CALIBRATION_S);
    v.push("--json".into());
    v
}

/// Output of fio or iperf3 that is not what isolab expects.
#[derive(Debug, thiserror::Error)]
pub enum JsonError {
    /// Not JSON of the expected shape.
    #[error("cannot read {tool}'s JSON output: {source}; run the calibration command by hand to see what it prints")]
    Parse {
        /// fio or iperf3.
        tool: &'static str,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// The tool reported an error.
    #[error("{tool} reported an error: {message}")]
    Tool {
        /// fio or iperf3.
        tool: &'static str,
        /// What it said.
        message: String,
    },
}

#[derive(serde::Deserialize)]
struct FioOutput {
    jobs: Vec<FioJob>,
}

#[derive(serde::Deserialize)]
struct FioJob {
    jobname: String,
    #[serde(default)]
    error: i64,
    read: FioDirection,
    write: FioDirection,
}

#[derive(serde::Deserialize)]
struct FioDirection {
    iops: f64,
}

/// Total IOPS (reads + writes of every job) of fio's `--output-format=json` output.
/// Text fio prints before the JSON object (warnings) is skipped.
pub fn parse_fio_iops(output: &str) -> Result<f64, JsonError> {
    let json = output.find('{').map_or(output, |i| &output[i..]);
    let parsed: FioOutput = serde_json::from_str(json).map_err(|source| JsonError::Parse {
        tool: "fio",
        source,
    })?;
    if parsed.jobs.is_empty() {
        return Err(JsonError::Tool {
            tool: "fio",
            message: "no jobs in its output".into(),
        });
    }
    let mut total = 0.0;
    for job in &parsed.jobs {
        if job.error != 0 {
            return Err(JsonError::Tool {
                tool: "fio",
                message: format!("job `{}` ended with error {}", job.jobname, job.error),
            });
        }
        total += job.read.iops + job.write.iops;
    }
    Ok(total)
}

#[derive(serde::Deserialize)]
struct IperfOutput {
    #[serde(default)]
    error: Option<String>,
    end: Option<IperfEnd>,
}

#[derive(serde::Deserialize)]
struct IperfEnd {
    sum_received: Option<IperfSum>,
}

#[derive(serde::Deserialize)]
struct IperfSum {
    bits_per_second: f64,
}

/// Received throughput in Gbit/s of `iperf3 --json` client output (a TCP test).
pub fn parse_iperf3_gbps(output: &str) -> Result<f64, JsonError> {
    let parsed: IperfOutput = serde_json::from_str(output).map_err(|source| JsonError::Parse {
        tool: "iperf3",
        source,
    })?;
    match (parsed.error, parsed.end) {
        (Some(message), _) => Err(JsonError::Tool {
            tool: "iperf3",
            message,
        }),
        (
            None,
            Some(IperfEnd {
                sum_received: Some(sum),
            }),
        ) => Ok(sum.bits_per_second / 1e9),
        (None, _) => Err(JsonError::Tool {
            tool: "iperf3",
            message: "its output has no `end` summary".into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(index: u32) -> CommandContext {
        CommandContext {
            workdir: "/w".into(),
            direct: true,
            memory_limit: Some(256 << 20),
            index,
            direction: crate::neighbour::NetDirection::Transmit,
        }
    }

    fn plan(kind: NeighbourKind, instances: u32, rate: Rate) -> NeighbourPlan {
        NeighbourPlan {
            kind,
            instances,
            per_instance: rate,
            last: None,
            target: None,
            reachable: None,
        }
    }

    fn line(v: &[String]) -> String {
        v.join(" ")
    }

    #[test]
    fn cpu_workers_carry_their_load() {
        let all = commands(&plan(NeighbourKind::Cpu, 2, Rate::CpuLoadPct(80)), &ctx(0));
        assert_eq!(all.len(), 2);
        assert_eq!(
            line(&all[0]),
            "stress-ng --cpu 1 --cpu-method all --cpu-load 80 --timeout 0 --temp-path /w"
        );
    }

    #[test]
    fn memory_fills_most_of_its_limit_and_keeps_it() {
        let c = command(&plan(NeighbourKind::Memory, 1, Rate::Unlimited), &ctx(0));
        let text = line(&c);
        assert!(
            text.starts_with("stress-ng --vm 1 --vm-bytes 241590272 --vm-keep"),
            "{text}"
        );
        assert_eq!(241_594_368 % 4096, 0);
        let unlimited = CommandContext {
            memory_limit: None,
            ..ctx(0)
        };
        let c = command(&plan(NeighbourKind::Memory, 1, Rate::Unlimited), &unlimited);
        assert!(line(&c).contains(&format!("--vm-bytes {DEFAULT_MEMORY_BYTES}")));
    }

    #[test]
    fn fork_and_cache() {
        let c = command(&plan(NeighbourKind::Fork, 1, Rate::Unlimited), &ctx(0));
        assert!(line(&c).starts_with("stress-ng --fork 1 --fork-max 1024 --timeout 0"));
        let all = commands(&plan(NeighbourKind::Cache, 2, Rate::Unlimited), &ctx(0));
        assert!(line(&all[0]).starts_with("stress-ng --cache 1"));
        assert!(line(&all[1]).starts_with("stress-ng --stream 1"));
    }

    #[test]
    fn disk_neighbours_have_their_own_files_and_rates() {
        let all = commands(&plan(NeighbourKind::Disk, 2, Rate::Iops(1231)), &ctx(3));
        assert_eq!(
            line(&all[0]),
            "fio --name=bomb --rw=randrw --rwmixread=50 --bs=32k --direct=1 --size=67108864 --time_based --unlink=1 --filename=/w/bomb-3 --ioengine=psync --runtime=86400 --rate_iops=616"
        );
        assert!(line(&all[1]).contains("--filename=/w/bomb-4"));
        let buffered = CommandContext {
            direct: false,
            ..ctx(0)
        };
        let c = command(&plan(NeighbourKind::Disk, 1, Rate::Unlimited), &buffered);
        assert!(line(&c).contains("--direct=0"));
        assert!(!line(&c).contains("rate_iops"));
    }

    #[test]
    fn targeted_disk_neighbours_use_libaio_like_the_calibration() {
        let targeted = NeighbourPlan {
            target: Some(90.0),
            ..plan(NeighbourKind::Disk, 4, Rate::Iops(4000))
        };
        let all = commands(&targeted, &ctx(0));
        assert_eq!(all.len(), 4);
        let l = line(&all[3]);
        assert!(
            l.ends_with("--filename=/w/bomb-3 --ioengine=libaio --iodepth=4 --runtime=86400 --rate_iops=2000"),
            "{l}"
        );
        // Full usage: not limited.
        let full = NeighbourPlan {
            target: Some(100.0),
            ..plan(NeighbourKind::Disk, 4, Rate::Unlimited)
        };
        let l = line(&command(&full, &ctx(0)));
        assert!(
            l.contains("--ioengine=libaio") && !l.contains("rate_iops"),
            "{l}"
        );
    }

    #[test]
    fn the_last_cpu_worker_carries_the_part_of_a_cpu() {
        let p = NeighbourPlan {
            last: Some(Rate::CpuLoadPct(40)),
            target: Some(90.0),
            ..plan(NeighbourKind::Cpu, 2, Rate::CpuLoadPct(100))
        };
        let all = commands(&p, &ctx(0));
        assert!(
            line(&all[0]).contains("--cpu-load 100"),
            "{}",
            line(&all[0])
        );
        assert!(line(&all[1]).contains("--cpu-load 40"), "{}", line(&all[1]));
    }

    #[test]
    fn network_clients_run_in_namespace_a_against_their_own_port() {
        let names = NetNames::of(std::process::id());
        let all = commands(&plan(NeighbourKind::Network, 2, Rate::Mbps(750)), &ctx(0));
        let first = line(&all[0]);
        assert!(
            first.starts_with(&format!(
                "ip netns exec {} iperf3 -c {}",
                names.ns_a, names.addr_b
            )),
            "{first}"
        );
        assert!(first.contains("-p 5201 "), "{first}");
        assert!(first.ends_with("-t 86400 -i 0 -b 750M"), "{first}");
        assert!(line(&all[1]).contains("-p 5202 "));
        let free = command(&plan(NeighbourKind::Network, 1, Rate::Unlimited), &ctx(0));
        assert!(!free.contains(&"-b".to_owned()));
    }

    #[test]
    fn calibration_commands() {
        let c = disk_capacity_command(Path::new("/w"), true);
        let text = line(&c);
        for part in [
            "--rw=randrw",
            "--rwmixread=50",
            "--bs=32k",
            "--direct=1",
            "--ioengine=libaio",
            "--iodepth=16",
            "--time_based",
            "--runtime=3",
            "--output-format=json",
            "--filename=/w/isolab-disk-capacity",
        ] {
            assert!(text.contains(part), "{part} in {text}");
        }
        let names = NetNames::of(4242);
        let c = line(&net_capacity_command(&names));
        assert_eq!(
            c,
            "ip netns exec isolab-nb4242-a iperf3 -c 10.214.146.2 -p 5201 -t 3 --json"
        );
    }

    /// Captured from `fio-3.33` on this project's test machine with the calibration
    /// options (`--ioengine=libaio --iodepth=16 --runtime=2`).
    const FIO_JSON: &str = include_str!("testdata/fio-randrw-libaio.json");
    /// Captured from `iperf 3.12`, one TCP stream over loopback for 1 s.
    const IPERF_JSON: &str = include_str!("testdata/iperf3-tcp.json");

    #[test]
    fn reads_iops_from_real_fio_json() {
        let iops = parse_fio_iops(FIO_JSON).unwrap();
        assert!(
            (iops - (11450.274863 + 11363.818091)).abs() < 1e-6,
            "{iops}"
        );
        // Warnings before the JSON are skipped.
        let noisy = format!("fio: note: something\n{FIO_JSON}");
        assert!((parse_fio_iops(&noisy).unwrap() - iops).abs() < 1e-9);
        assert!(matches!(
            parse_fio_iops("fio: engine libaio not loadable"),
            Err(JsonError::Parse { .. })
        ));
        let failed = FIO_JSON.replacen("\"error\" : 0", "\"error\" : 5", 1);
        assert!(matches!(
            parse_fio_iops(&failed),
            Err(JsonError::Tool { .. })
        ));
        assert!(matches!(
            parse_fio_iops("{\"jobs\": []}"),
            Err(JsonError::Tool { .. })
        ));
    }

    #[test]
    fn reads_throughput_from_real_iperf3_json() {
        let gbps = parse_iperf3_gbps(IPERF_JSON).unwrap();
        assert!((gbps - 31.40186802253786).abs() < 1e-9, "{gbps}");
        let e = parse_iperf3_gbps(r#"{"start": {}, "intervals": [], "end": {}, "error": "unable to connect to server: Connection refused"}"#)
            .unwrap_err();
        assert!(e.to_string().contains("Connection refused"), "{e}");
        assert!(parse_iperf3_gbps("iperf3: error").is_err());
    }
}
