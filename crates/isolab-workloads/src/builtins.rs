//! The built-in workloads.
//!
//! | name | what it measures | primary metric |
//! |---|---|---|
//! | `fio-randread`, `fio-randwrite`, `fio-randrw` | 4 KiB random I/O, psync, `{threads}` jobs on 256 MiB files in `{workdir}` | `iops` (IOPS, higher) |
//! | `fio-read`, `fio-write` | 128 KiB sequential I/O, same setup | `bandwidth` (KiB/s, higher) |
//! | `iperf3-tcp` | TCP throughput to an `iperf3 -s` server at `{server}:{port}` (loopback on the host; over the bridge from a container) | `receiver_throughput` (Gbit/s, higher) |
//! | `stress-ng-cache`, `-cpu`, `-matrix`, `-vm` | `{threads}` instances of one stress-ng stressor | `S_bogo_ops_per_second_real_time` (bogo-ops/s, higher) |
//! | `sysbench-cpu` | primes up to 20000, `{threads}` threads | `events_per_second` (events/s, higher) |
//! | `sysbench-fileio` | random read/write on 256 MiB in 128 files in `{workdir}` | `total_throughput` (MiB/s, higher) |
//! | `sysbench-memory` | sequential writes in 1 MiB blocks | `throughput` (MiB/s, higher) |
//! | `sysbench-mutex` | fixed work: 200000 lock/unlock per thread | `total_time` (s, lower) |
//! | `sysbench-threads` | scheduler: yields and locks, `{threads}` threads | `events_per_second` (events/s, higher) |
//! | `hpl`, `stream` | HPC Challenge under Open MPI, `{cpus}` ranks, sized from `{usable_memory_mib}` | `hpl_gflops` (GFLOPS, higher), `stream_triad` (GB/s, higher) |
//! | `tcp-rr`, `udp-rr` | sockperf ping-pong, server in the platform, client on the host, 14-byte messages | `rtt_p90` (µs, lower) |
//! | `tcp-stream-recv`, `udp-stream-send`, `udp-stream-recv` | iperf3 one-way streams with a server on the host | `receiver_throughput` (Gbit/s, higher) |
//! | `ioping` | `{work}` requests of 4 KiB (10 unless tuned), one per second, in `{workdir}` | `latency_avg` (µs, lower) |
//! | `fio-seed001-*` | seed 001's fio job: psync, 32 KiB, 20 jobs, direct, five modes | `iops` (IOPS, higher) |
//! | `terasort` | a stand-in for Hadoop TeraSort: `{work}` 100-byte records sorted by `{threads}` workers (map, reduce, validate) in `{workdir}` | `execution_time` (s, lower) |
//!
//! Time-bound workloads run for `{duration}`; `sysbench-mutex` does a fixed
//! amount of work and takes as long as it takes.
//!
//! **Direct I/O.** fio takes `--direct={direct}` (`1` or `0`, both valid).
//! sysbench's `--file-extra-flags` takes a list of flag names, for which
//! `{direct_flag}` renders `direct` or the empty string: `--file-extra-flags=`
//! with an empty list is valid sysbench 1.0.20 (it prints "Extra file open
//! flags: (none)"), so one template works on file systems with and without
//! `O_DIRECT`.
//!
//! **Working directory.** sysbench fileio has no directory option and creates
//! its files in the current directory, so its templates start with
//! `env --chdir={workdir}` (GNU coreutils ≥ 8.28), which keeps them independent
//! of the directory the lab starts commands in. fio removes its files itself
//! (`--unlink=1`), so the fio workloads need no cleanup.

pub use crate::definition::{RenderedWorkload, Work, WorkloadDef};
use crate::ParserKind;

/// Builds a built-in without prepare, cleanup or server. Its `tool` is also the Debian
/// package that provides it (true of sysbench, fio, stress-ng and iperf3).
fn def(
    name: &str,
    description: &str,
    command: String,
    parser: ParserKind,
    primary: &str,
    tool: &str,
) -> WorkloadDef {
    WorkloadDef {
        name: name.to_owned(),
        description: description.to_owned(),
        command,
        prepare: None,
        cleanup: None,
        server: None,
        files: Vec::new(),
        parser,
        primary: primary.to_owned(),
        uses_disk: false,
        tools: vec![tool.to_owned()],
        stack: None,
        packages: vec![tool.to_owned()],
        work: None,
        assets: Vec::new(),
    }
}

fn sysbench(name: &str, description: &str, args: &str, primary: &str) -> WorkloadDef {
    def(
        name,
        description,
        format!("sysbench {args} run"),
        ParserKind::Sysbench,
        primary,
        "sysbench",
    )
}

/// Options shared by sysbench fileio's prepare, run and cleanup: they must agree.
const FILEIO: &str = "env --chdir={workdir} sysbench fileio --file-num=128 --file-total-size=256M";

fn sysbench_fileio() -> WorkloadDef {
    WorkloadDef {
        prepare: Some(format!("{FILEIO} prepare")),
        cleanup: Some(format!("{FILEIO} cleanup")),
        uses_disk: true,
        ..def(
            "sysbench-fileio",
            "sysbench fileio: random reads and writes (1.5:1) in 16 KiB blocks on 256 MiB in 128 files, direct I/O where supported",
            format!(
                "{FILEIO} --file-test-mode=rndrw --file-extra-flags={{direct_flag}} --threads={{threads}} --time={{duration}} run"
            ),
            ParserKind::Sysbench,
            "total_throughput",
            "sysbench",
        )
    }
}

fn fio(rw: &str, bs: &str, description: &str, primary: &str) -> WorkloadDef {
    WorkloadDef {
        uses_disk: true,
        ..def(
            &format!("fio-{rw}"),
            description,
            format!(
                "fio --name={rw} --directory={{workdir}} --rw={rw} --size=256M --bs={bs} --ioengine=psync \
                 --direct={{direct}} --time_based --runtime={{duration}} --numjobs={{threads}} \
                 --group_reporting --unlink=1 --output-format=json"
            ),
            ParserKind::Fio,
            primary,
            "fio",
        )
    }
}

fn stress_ng(stressor: &str, options: &str, description: &str) -> WorkloadDef {
    def(
        &format!("stress-ng-{stressor}"),
        description,
        format!(
            "stress-ng --{stressor} {{threads}}{options} --metrics --yaml {{workdir}}/{report} --timeout {{duration}}s",
            report = crate::STRESS_NG_REPORT
        ),
        ParserKind::StressNg,
        &format!("{stressor}_bogo_ops_per_second_real_time"),
        "stress-ng",
    )
}

fn iperf3_tcp() -> WorkloadDef {
    WorkloadDef {
        server: Some("iperf3 -s -1 -p {port}".to_owned()),
        ..def(
            "iperf3-tcp",
            "iperf3: one TCP stream to a one-shot iperf3 server (loopback, or the bridge from a container)",
            "iperf3 -c {server} -p {port} -t {duration} -J".to_owned(),
            ParserKind::Iperf3,
            "receiver_throughput",
            "iperf3",
        )
    }
}

/// HPC Challenge under Open MPI, one rank per cpu of the shape. HPCC sizes HPL's
/// matrix itself from `hpccmemf.txt` (80% of `Total`, three quarters of the shape's
/// memory: 60% of it in all) when it finds no `hpccinf.txt`, and STREAM's vectors
/// from that. Ranks are not bound to
/// cores (`--bind-to none`): placing them is the platform's and the placement's
/// job. CMA single-copy is off, as containers forbid the ptrace it needs.
fn hpcc(name: &str, description: &str, primary: &str) -> WorkloadDef {
    WorkloadDef {
        files: vec![crate::FileTemplate {
            path: "hpccmemf.txt".into(),
            contents: "Total=@usable_memory_mib@\n".into(),
        }],
        tools: vec!["mpirun".into(), "hpcc".into()],
        // OpenBLAS (serial: one rank per cpu) replaces the reference BLAS hpcc is
        // linked against, through Debian's libblas.so.3 alternative.
        packages: vec![
            "hpcc".into(),
            "openmpi-bin".into(),
            "libopenblas0-serial".into(),
        ],
        ..def(
            name,
            description,
            "mpirun --allow-run-as-root --bind-to none --mca btl_vader_single_copy_mechanism none \
             -np {cpus} --wdir {workdir} hpcc"
                .to_owned(),
            ParserKind::Hpcc,
            primary,
            "hpcc",
        )
    }
}

/// Seed 001's fio job (its Table A.2): psync, 32 KiB blocks, 20 jobs, direct I/O,
/// 2 GiB each there; here each job's file is 64 MiB (1.25 GiB in all, on this
/// machine's disk) and the run is time-bound.
fn fio_seed001(rw: &str, description: &str, primary: &str) -> WorkloadDef {
    WorkloadDef {
        uses_disk: true,
        ..def(
            &format!("fio-seed001-{rw}"),
            description,
            format!(
                "fio --name={rw} --directory={{workdir}} --rw={rw} --size=64M --bs=32k --ioengine=psync \
                 --direct={{direct}} --time_based --runtime={{duration}} --numjobs=20 \
                 --group_reporting --unlink=1 --output-format=json"
            ),
            ParserKind::Fio,
            primary,
            "fio",
        )
    }
}

/// The sockperf server's address file: TCP and UDP on the component's one port.
const SOCKPERF_ADDRESSES: &str = "sockperf-server.txt";

/// Request-response latency with sockperf ping-pong, as seed 001's netperf `_RR`
/// tests: the server is a service in the platform (TCP and UDP on one port), the
/// client runs on the host outside the platform's limits ([`crate::Measure::Client`]),
/// so the round trip crosses the platform's network path and the client's own
/// timing carries none of its overhead. 14-byte messages, sockperf's smallest
/// (netperf's `-r 1,1` is not in Debian main).
fn sockperf_rr(proto: &str, flag: &str) -> WorkloadDef {
    use crate::{ComponentDef, FileTemplate, Measure, Ready, ShapeScope, StackDef};
    let server = ComponentDef {
        name: "sockperf".into(),
        command: format!("sockperf server -f {{workdir}}/{SOCKPERF_ADDRESSES}"),
        prepare: None,
        files: vec![FileTemplate {
            path: SOCKPERF_ADDRESSES.into(),
            contents: "T:0.0.0.0:@port@\nU:0.0.0.0:@port@\n".into(),
        }],
        ready: Ready::Tcp,
        ready_timeout: std::time::Duration::from_secs(60),
    };
    WorkloadDef {
        stack: Some(StackDef {
            components: vec![server],
            shape: ShapeScope::Component,
            data_load: None,
            data_paths: Vec::new(),
            keep_data: false,
            measure: Measure::Client,
        }),
        ..def(
            &format!("{proto}-rr"),
            &format!("sockperf ping-pong over {}: 14-byte request and response, one at a time, server in the platform, client on the host; round-trip time and transactions/s (seed 001's netperf {}_RR)", proto.to_uppercase(), proto.to_uppercase()),
            format!(
                "sockperf ping-pong -i {{sockperf.host}} -p {{sockperf.port}}{flag} -m 14 -t {{duration}} --full-log {{workdir}}/{}",
                crate::parsers::SOCKPERF_LOG
            ),
            ParserKind::Sockperf,
            "rtt_p90",
            "sockperf",
        )
    }
}

/// A one-way stream with iperf3 between the platform and a server on the host:
/// `send` from the platform, `recv` into it (`-R`).
fn iperf3_stream(proto: &str, direction: &str) -> WorkloadDef {
    let (udp, reverse) = (proto == "udp", direction == "recv");
    let mut command = "iperf3 -c {server} -p {port} -t {duration} -J".to_owned();
    if udp {
        // Unlimited rate (iperf3's UDP default is 1 Mbit/s), 1400-byte datagrams.
        command.push_str(" -u -b 0 -l 1400");
    }
    if reverse {
        command.push_str(" -R");
    }
    WorkloadDef {
        server: Some("iperf3 -s -1 -p {port}".to_owned()),
        ..def(
            &format!("{proto}-stream-{direction}"),
            &format!(
                "iperf3: one {} stream {} the platform and a server on the host (seed 001's {} {} throughput)",
                proto.to_uppercase(),
                if reverse { "into" } else { "out of" },
                proto.to_uppercase(),
                if reverse { "receive" } else { "send" },
            ),
            command,
            ParserKind::Iperf3,
            "receiver_throughput",
            "iperf3",
        )
    }
}

fn ioping() -> WorkloadDef {
    WorkloadDef {
        uses_disk: true,
        work: Some(Work {
            amount: 10,
            unit: "requests, one a second (the first a warm-up ioping does not count)".into(),
        }),
        ..def(
            "ioping",
            "ioping: disk latency of {work} requests of 4 KiB, one per second, in {workdir} (seed 003's `ioping -c 10 .`)",
            "ioping -J -c {work} {workdir}".to_owned(),
            ParserKind::Ioping,
            "latency_avg",
            "ioping",
        )
    }
}

/// The video the FFmpeg workloads transcode: a stand-in for seed 002's 30 MB Big Buck
/// Bunny segment, `{work}` frames (30 to a second) of ffmpeg's `testsrc2` pattern at
/// 1920x1080 with temporal noise (so that it does not compress like a still test
/// card), encoded once with libx264 (8 Mbit/s, a key frame every second, one thread
/// and bit-exact flags: the same bytes on every machine with this ffmpeg), and the
/// same stream cut without re-encoding into `segments/NNNN.mp4` of one second each.
fn video() -> crate::AssetDef {
    crate::AssetDef {
        name: "video".into(),
        description: "H.264 1920x1080 30 fps, {work} frames at 8 Mbit/s, and its 1-second segments".into(),
        script: "ffmpeg -hide_banner -nostdin -loglevel error \\\n\
                 \x20 -f lavfi -i 'testsrc2=size=1920x1080:rate=30,noise=alls=12:allf=t+u' -frames:v @work@ \\\n\
                 \x20 -c:v libx264 -preset medium -b:v 8M -g 30 -keyint_min 30 -sc_threshold 0 \\\n\
                 \x20 -pix_fmt yuv420p -threads 1 -an -fflags +bitexact -flags +bitexact input.mp4\n\
                 mkdir segments\n\
                 ffmpeg -hide_banner -nostdin -loglevel error -i input.mp4 -c copy \\\n\
                 \x20 -f segment -segment_time 1 -reset_timestamps 1 segments/%04d.mp4\n"
            .into(),
        sources: Vec::new(),
        tools: vec![("ffmpeg".into(), "ffmpeg".into())],
        stand_in: Some(
            "generated stand-in for seed 002's Big Buck Bunny segment: ffmpeg testsrc2 with temporal noise, 1920x1080, 30 fps, H.264 at 8 Mbit/s".into(),
        ),
    }
}

/// libx265 at its default preset (medium), as seed 002 changed H.264 to H.265; the
/// encoder's thread pool and ffmpeg's threads are `{threads}`; the encoded stream is
/// discarded (`-f null`), so the job is CPU-bound as in the seed.
const X265: &str = "-map 0:v -c:v libx265 -x265-params log-level=error:pools={threads} -threads {threads} -f null -";

/// Seed 002's FFmpeg job: the whole video in one process.
fn ffmpeg_transcode() -> WorkloadDef {
    WorkloadDef {
        work: Some(Work {
            amount: 900,
            unit: "frames of video (30 a second)".into(),
        }),
        assets: vec![video()],
        ..def(
            "ffmpeg-transcode",
            "FFmpeg: H.264 to H.265 (libx265, preset medium) of {work} frames of 1920x1080 video, {threads} threads; execution time (seed 002's FFmpeg job, stand-in input)",
            format!(
                "ffmpeg -hide_banner -nostdin -nostats -benchmark -progress {{workdir}}/{} \
                 -threads {{threads}} -i {{workdir}}/video/input.mp4 {X265}",
                crate::parsers::FFMPEG_PROGRESS
            ),
            ParserKind::Ffmpeg,
            "execution_time",
            "ffmpeg",
        )
    }
}

/// Seed 002's multitasking job (its Fig. 8): the same video as one-second segments,
/// one ffmpeg process each, all started together; the batch's execution time.
fn ffmpeg_transcode_split() -> WorkloadDef {
    WorkloadDef {
        files: vec![crate::FileTemplate {
            path: "transcode-segments.sh".into(),
            contents: format!(
                "# isolab's ffmpeg-transcode-split: every segment at once, one ffmpeg each;\n\
                 # prints the batch's execution time as isolab's JSON metrics.\n\
                 start=$(date +%s%N)\n\
                 n=0\n\
                 pids=\n\
                 for f in @workdir@/video/segments/*.mp4; do\n\
                 \x20 ffmpeg -hide_banner -nostdin -nostats -loglevel error -threads @threads@ -i \"$f\" {} 2>\"@workdir@/segment-$n.log\" &\n\
                 \x20 pids=\"$pids $!\"\n\
                 \x20 n=$((n + 1))\n\
                 done\n\
                 failed=0\n\
                 for p in $pids; do wait \"$p\" || failed=$((failed + 1)); done\n\
                 end=$(date +%s%N)\n\
                 if [ \"$n\" -eq 0 ] || [ \"$failed\" -ne 0 ]; then\n\
                 \x20 echo \"ffmpeg-transcode-split: $failed of $n ffmpeg processes failed; their logs end:\" >&2\n\
                 \x20 tail -n 3 @workdir@/segment-*.log >&2\n\
                 \x20 exit 1\n\
                 fi\n\
                 seconds=$(echo \"$start $end\" | awk '{{printf \"%.6f\", ($2 - $1) / 1e9}}')\n\
                 printf '{{\"metrics\": [{{\"name\": \"execution_time\", \"unit\": \"s\", \"direction\": \"lower\", \"value\": %s}}, {{\"name\": \"processes\", \"unit\": \"count\", \"direction\": \"higher\", \"value\": %d}}]}}\\n' \"$seconds\" \"$n\"\n",
                X265.replace(['{', '}'], "@")
            ),
        }],
        work: Some(Work {
            amount: 900,
            unit: "frames of video (30 a second)".into(),
        }),
        assets: vec![video()],
        tools: vec!["sh".into(), "ffmpeg".into()],
        ..def(
            "ffmpeg-transcode-split",
            "FFmpeg, multitasking: the {work} frames of video as one-second segments (30 frames), one ffmpeg each, all at once, H.264 to H.265; execution time of the batch (seed 002's Fig. 8)",
            "sh {workdir}/transcode-segments.sh".to_owned(),
            ParserKind::Json,
            "execution_time",
            "ffmpeg",
        )
    }
}

/// An MPI program of fixed work from `programs/`, compiled once on the host with
/// `mpicc -O2` and run with one rank per cpu of the shape, not bound to cores (as
/// `hpl`): it prints its execution time and a check value as isolab's JSON metrics.
/// It is written for isolab in the role of seed 002's program `role` (named as the
/// seed cites it), not that program: its asset says so (`stand_in`).
fn mpi_program(
    name: &str,
    source: &str,
    amount: u64,
    unit: &str,
    description: &str,
    role: &str,
) -> WorkloadDef {
    let file = format!("{}.c", name.replace('-', "_"));
    WorkloadDef {
        work: Some(Work {
            amount,
            unit: unit.into(),
        }),
        assets: vec![crate::AssetDef {
            name: name.into(),
            description: format!("{file} compiled with mpicc -O2"),
            script: format!("mpicc -O2 -Wall -o {name} {file}\nrm {file}\n"),
            sources: vec![crate::FileTemplate {
                path: file,
                contents: source.into(),
            }],
            tools: vec![("mpicc".into(), "libopenmpi-dev".into())],
            stand_in: Some(format!(
                "a small MPI program written for isolab in the role of seed 002's {role}, \
                 not the study's program"
            )),
        }],
        tools: vec!["mpirun".into()],
        packages: vec!["openmpi-bin".into()],
        ..def(
            name,
            description,
            format!(
                "mpirun --allow-run-as-root --bind-to none --mca btl_vader_single_copy_mechanism none \
                 -np {{cpus}} {{workdir}}/{name}/{name} {{work}}"
            ),
            ParserKind::Json,
            "execution_time",
            "openmpi-bin",
        )
    }
}

/// Apache httpd 2.4 from Debian's source package, configured once on the host: the
/// tree seed 001's scalability chapter compiled (its Table C.1: `./configure
/// --prefix=PREFIX; make`). Its script keeps the units a full build compiles
/// (`units.list`) and the files that name the directory it was configured in
/// (`relocate.list`, rewritten by each run).
fn httpd() -> crate::AssetDef {
    crate::AssetDef {
        name: "httpd".into(),
        description: "Apache httpd 2.4 from Debian's source package apache2, configured with Debian's APR, APR-util and PCRE2".into(),
        script: include_str!("../programs/httpd.sh").into(),
        sources: Vec::new(),
        tools: vec![
            ("apt-get".into(), "apt".into()),
            ("cc".into(), "gcc".into()),
            ("make".into(), "make".into()),
            ("apr-1-config".into(), "libapr1-dev".into()),
            ("apu-1-config".into(), "libaprutil1-dev".into()),
            ("pcre2-config".into(), "libpcre2-dev".into()),
        ],
        stand_in: None,
    }
}

/// Translation units (`.lo` and `.slo`) a full build of httpd 2.4.68 compiles with
/// the configuration of [`httpd`]: the default amount of [`compile`]'s work, which
/// then builds everything, links included.
const HTTPD_UNITS: u64 = 317;

/// Seed 001's scalability benchmark: the httpd tree built with `make -j{threads}`.
fn compile() -> WorkloadDef {
    WorkloadDef {
        files: vec![crate::FileTemplate {
            path: "compile.sh".into(),
            contents: include_str!("../programs/compile.sh").into(),
        }],
        work: Some(Work {
            amount: HTTPD_UNITS,
            unit: "translation units (the default is all of them, links included)".into(),
        }),
        assets: vec![httpd()],
        tools: vec!["sh".into(), "make".into(), "cc".into()],
        packages: [
            "make",
            "gcc",
            "libc6-dev",
            "libapr1-dev",
            "libaprutil1-dev",
            "libpcre2-dev",
        ]
        .map(String::from)
        .to_vec(),
        ..def(
            "compile",
            "Apache httpd 2.4 built with make -j{threads} from its configured tree ({work} translation units: all of them by default, links included); execution time (seed 001's scalability benchmark)",
            "sh {workdir}/compile.sh".to_owned(),
            ParserKind::Json,
            "execution_time",
            "make",
        )
    }
}

/// Records of 100 bytes [`terasort`] sorts by default: 200 MB (seed 001 sorted 30 GB
/// over 20 workers of one cpu each).
const TERASORT_RECORDS: u64 = 2_000_000;

/// Seed 001's data-parallel application subject, Hadoop TeraSort, as a stand-in
/// written for isolab (`programs/terasort.c`, compiled once on the host with `cc -O2
/// -pthread`): TeraGen's 100-byte records made by the prepare step (unmeasured), then
/// TeraSort's job with `{threads}` workers — keys sampled into ranges, a map phase
/// writing one intermediate file per range, a reduce phase sorting each range and
/// writing its part (fsync'd) — and TeraValidate. Its time is the sort's; the map and
/// reduce phases and the validation are metrics of their own.
fn terasort() -> WorkloadDef {
    WorkloadDef {
        prepare: Some("sh {workdir}/terasort.sh gen".to_owned()),
        files: vec![crate::FileTemplate {
            path: "terasort.sh".into(),
            contents: "# isolab's terasort (programs/terasort.c): TeraGen with `gen`, else TeraSort\n\
                       # with TeraValidate, printing isolab's JSON metrics.\n\
                       if [ \"$1\" = gen ]; then\n\
                       \x20 exec @workdir@/terasort/terasort gen @workdir@ @work@\n\
                       fi\n\
                       exec @workdir@/terasort/terasort sort @workdir@ @threads@\n"
                .into(),
        }],
        uses_disk: true,
        work: Some(Work {
            amount: TERASORT_RECORDS,
            unit: "records of 100 bytes (TeraGen's layout)".into(),
        }),
        assets: vec![crate::AssetDef {
            name: "terasort".into(),
            description: "terasort.c compiled with cc -O2 -pthread".into(),
            script: "cc -O2 -Wall -pthread -o terasort terasort.c\nrm terasort.c\n".into(),
            sources: vec![crate::FileTemplate {
                path: "terasort.c".into(),
                contents: include_str!("../programs/terasort.c").into(),
            }],
            tools: vec![("cc".into(), "gcc".into())],
            stand_in: Some(
                "a data-parallel sort written for isolab in the role of seed 001's Hadoop TeraSort (TeraGen's records, sampled key ranges, map and reduce phases over worker threads, TeraValidate), not Hadoop".into(),
            ),
        }],
        // The program is compiled on the host against glibc: the image needs its libc.
        packages: vec!["libc6".into()],
        ..def(
            "terasort",
            "TeraSort stand-in: {work} records of 100 bytes (TeraGen's layout) sorted by {threads} workers in a map and a reduce phase through intermediate files on disk, then validated; execution time of the sort (seed 001's Hadoop TeraSort, a stand-in)",
            "sh {workdir}/terasort.sh".to_owned(),
            ParserKind::Json,
            "execution_time",
            "sh",
        )
    }
}

/// Every built-in workload, sorted by name.
pub fn catalog() -> Vec<WorkloadDef> {
    let mut all = vec![
        sysbench(
            "sysbench-cpu",
            "sysbench cpu: primality tests up to 20000, {threads} threads",
            "cpu --cpu-max-prime=20000 --threads={threads} --time={duration}",
            "events_per_second",
        ),
        sysbench(
            "sysbench-memory",
            "sysbench memory: sequential writes in 1 MiB blocks, time-bound",
            "memory --memory-block-size=1M --memory-total-size=100T --memory-oper=write \
             --memory-access-mode=seq --threads={threads} --time={duration}",
            "throughput",
        ),
        sysbench(
            "sysbench-threads",
            "sysbench threads: scheduler stress with 1000 yields and 8 mutexes per event, time-bound",
            "threads --thread-yields=1000 --thread-locks=8 --threads={threads} --time={duration}",
            "events_per_second",
        ),
        sysbench(
            "sysbench-mutex",
            "sysbench mutex: fixed work of 200000 mutex lock/unlock per thread; time to finish",
            "mutex --mutex-num=4096 --mutex-locks=200000 --mutex-loops=10000 --threads={threads} --time=0",
            "total_time",
        ),
        sysbench_fileio(),
        fio("randread", "4k", "fio: 4 KiB random reads, psync, {threads} jobs", "iops"),
        fio("randwrite", "4k", "fio: 4 KiB random writes, psync, {threads} jobs", "iops"),
        fio("randrw", "4k", "fio: 4 KiB random reads and writes (50:50), psync, {threads} jobs", "iops"),
        fio("read", "128k", "fio: 128 KiB sequential reads, psync, {threads} jobs", "bandwidth"),
        fio("write", "128k", "fio: 128 KiB sequential writes, psync, {threads} jobs", "bandwidth"),
        stress_ng("cpu", "", "stress-ng cpu: all CPU stress methods in turn, {threads} instances"),
        stress_ng(
            "vm",
            " --vm-bytes 256M",
            "stress-ng vm: 256 MiB of memory written and checked per instance, {threads} instances",
        ),
        stress_ng("matrix", "", "stress-ng matrix: floating-point matrix operations, {threads} instances"),
        stress_ng("cache", "", "stress-ng cache: CPU cache thrashing, {threads} instances"),
        iperf3_tcp(),
        hpcc(
            "hpl",
            "HPL (LINPACK) from HPC Challenge: dense linear solve with its matrix in 60% of the shape's memory, one MPI rank per cpu, OpenBLAS (seed 001's LINPACK)",
            "hpl_gflops",
        ),
        hpcc(
            "stream",
            "STREAM copy/scale/add/triad from HPC Challenge: memory bandwidth of one process, vectors sized from the shape's memory (seed 001's STREAM)",
            "stream_triad",
        ),
        fio_seed001("randread", "fio as seed 001: 32 KiB random reads, psync, 20 jobs, direct", "iops"),
        fio_seed001("randwrite", "fio as seed 001: 32 KiB random writes, psync, 20 jobs, direct", "iops"),
        fio_seed001("randrw", "fio as seed 001: 32 KiB random reads and writes (50:50), psync, 20 jobs, direct", "iops"),
        fio_seed001("read", "fio as seed 001: 32 KiB sequential reads, psync, 20 jobs, direct", "iops"),
        fio_seed001("write", "fio as seed 001: 32 KiB sequential writes, psync, 20 jobs, direct", "iops"),
        sockperf_rr("tcp", " --tcp"),
        sockperf_rr("udp", ""),
        iperf3_stream("tcp", "recv"),
        iperf3_stream("udp", "send"),
        iperf3_stream("udp", "recv"),
        ioping(),
        compile(),
        terasort(),
        ffmpeg_transcode(),
        ffmpeg_transcode_split(),
        mpi_program(
            "mpi-prime",
            include_str!("../programs/mpi_prime.c"),
            20_000_000,
            "numbers tested",
            "MPI: counts the primes up to {work} by trial division over {cpus} ranks, a global sum every 2000 numbers; execution time (seed 002's Prime_MPI)",
            "Prime_MPI (Burkardt's PRIME_MPI, its reference [39])",
        ),
        mpi_program(
            "mpi-search",
            include_str!("../programs/mpi_search.c"),
            1_500_000_000,
            "integers searched",
            "MPI: searches {work} integers for the one whose hash matches, {cpus} ranks agreeing after every round of 4096 each; execution time (seed 002's MPI_Search)",
            "MPI_Search (Burkardt's SEARCH_MPI, its reference [38])",
        ),
    ];
    all.extend(crate::oltp::workloads());
    all.extend(crate::olap::workloads());
    all.extend(crate::nosql::workloads());
    all.sort_by(|a, b| a.name.cmp(&b.name));
    all
}

/// The built-in workload called `name`.
pub fn builtin(name: &str) -> Option<WorkloadDef> {
    catalog().into_iter().find(|w| w.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::template::validate;
    use crate::template::Params;
    use std::path::PathBuf;
    use std::time::Duration;

    fn params() -> Params {
        Params {
            cpus: 2,
            threads: 4,
            duration: Duration::from_secs(30),
            workdir: PathBuf::from("/var/tmp/isolab run"),
            port: 5201,
            server: std::net::Ipv4Addr::LOCALHOST,
            direct: true,
            memory: 4 << 30,
            work: 0,
            components: Vec::new(),
            image_command: Vec::new(),
        }
    }

    #[test]
    fn names_are_the_documented_ones_unique_and_sorted() {
        let names: Vec<String> = catalog().into_iter().map(|w| w.name).collect();
        assert_eq!(
            names,
            [
                "cassandra-latte",
                "compile",
                "ffmpeg-transcode",
                "ffmpeg-transcode-split",
                "fio-randread",
                "fio-randrw",
                "fio-randwrite",
                "fio-read",
                "fio-seed001-randread",
                "fio-seed001-randrw",
                "fio-seed001-randwrite",
                "fio-seed001-read",
                "fio-seed001-write",
                "fio-write",
                "hpl",
                "ioping",
                "iperf3-tcp",
                "mpi-prime",
                "mpi-search",
                "pgbench-oltp",
                "redis-benchmark",
                "stream",
                "stress-ng-cache",
                "stress-ng-cpu",
                "stress-ng-matrix",
                "stress-ng-vm",
                "sysbench-cpu",
                "sysbench-fileio",
                "sysbench-memory",
                "sysbench-mutex",
                "sysbench-mysql-delete",
                "sysbench-mysql-insert",
                "sysbench-mysql-point-select",
                "sysbench-mysql-read-only",
                "sysbench-mysql-read-write",
                "sysbench-mysql-update-index",
                "sysbench-mysql-update-non-index",
                "sysbench-pgsql-delete",
                "sysbench-pgsql-insert",
                "sysbench-pgsql-point-select",
                "sysbench-pgsql-read-only",
                "sysbench-pgsql-read-write",
                "sysbench-pgsql-update-index",
                "sysbench-pgsql-update-non-index",
                "sysbench-threads",
                "tcp-rr",
                "tcp-stream-recv",
                "terasort",
                "tpcds-pgsql",
                "tpch-pgsql",
                "udp-rr",
                "udp-stream-recv",
                "udp-stream-send",
            ]
        );
        let mut sorted = names.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(names, sorted);
    }

    #[test]
    fn every_builtin_renders_and_is_consistent() {
        for w in catalog() {
            // A stack's client names its components' endpoints.
            let components = w.stack.iter().flat_map(|s| s.components.iter());
            let p = Params {
                components: components
                    .map(|c| crate::Endpoint {
                        name: c.name.clone(),
                        host: "10.0.0.2".into(),
                        port: 7000,
                        cpu_usage: String::new(),
                    })
                    .collect(),
                ..params()
            };
            if let Some(stack) = &w.stack {
                stack
                    .validate()
                    .unwrap_or_else(|e| panic!("{}: {e}", w.name));
            }
            let r = w.render(&p).unwrap_or_else(|e| panic!("{}: {e}", w.name));
            // The first word of the command is the tool, or `env` in front of it.
            let tool = if r.command[0] == "env" {
                &r.command[2]
            } else {
                &r.command[0]
            };
            assert_eq!(&w.tools[0], tool, "{}", w.name);
            // Every tool comes from a package the workload brings into the image.
            assert!(!w.packages.is_empty(), "{}", w.name);
            for f in &w.files {
                assert!(f.stays_inside(), "{}: {}", w.name, f.path);
                crate::render_text(&f.contents, &params()).unwrap();
            }
            assert!(
                !w.primary.is_empty() && !w.description.is_empty(),
                "{}",
                w.name
            );
            for t in [&w.prepare, &w.cleanup, &w.server].into_iter().flatten() {
                validate(t).unwrap();
            }
            let used = validate(&w.command).unwrap();
            // `{work}` is a fixed-work workload's, in its templates, files or assets.
            let files_use_work = w.files.iter().any(|f| f.contents.contains("@work@"))
                || w.assets.iter().any(|a| a.script.contains("@work@"));
            assert_eq!(
                w.work.is_some(),
                used.contains(&"work") || files_use_work,
                "{}",
                w.name
            );
            for a in &w.assets {
                a.rendered(&p).unwrap_or_else(|e| panic!("{}: {e}", a.name));
                assert!(!a.tools.is_empty(), "{}: {}", w.name, a.name);
            }
            let direct = used.contains(&"direct") || used.contains(&"direct_flag");
            // ioping measures the disk's latency as seed 003 did, without O_DIRECT;
            // the databases keep their data directory in the working directory, and
            // terasort its input, intermediate files and output (fsync'd).
            let database = matches!(w.parser, ParserKind::Pgbench | ParserKind::SysbenchOltp)
                || w.name == "cassandra-latte"
                || crate::olap::BENCHMARKS
                    .iter()
                    .any(|b| w.name == format!("{b}-pgsql"));
            assert_eq!(
                w.uses_disk,
                direct || w.name == "ioping" || w.name == "terasort" || database,
                "{}",
                w.name
            );
            assert_eq!(builtin(&w.name), Some(w.clone()));
        }
        assert_eq!(builtin("nope"), None);
    }

    #[test]
    fn sysbench_cpu_renders_as_documented() {
        let w = builtin("sysbench-cpu").unwrap();
        assert_eq!(
            w.render(&params()).unwrap().command,
            [
                "sysbench",
                "cpu",
                "--cpu-max-prime=20000",
                "--threads=4",
                "--time=30",
                "run"
            ]
        );
    }

    #[test]
    fn the_seed_programs_render_as_documented() {
        let hpl = builtin("hpl").unwrap();
        assert_eq!(
            hpl.render(&params()).unwrap().command.join(" "),
            "mpirun --allow-run-as-root --bind-to none --mca btl_vader_single_copy_mechanism none -np 2 --wdir /var/tmp/isolab run hpcc"
        );
        assert_eq!(
            crate::render_text(&hpl.files[0].contents, &params()).unwrap(),
            // Three quarters of the shape's 4 GiB.
            "Total=3072\n"
        );
        // The server is a component in the platform, the client runs on the host.
        let udp = builtin("udp-rr").unwrap();
        let stack = udp.stack.as_ref().unwrap();
        assert_eq!(stack.measure, crate::Measure::Client);
        let server = &stack.components[0];
        let p = Params {
            port: 7001,
            components: vec![crate::Endpoint {
                name: "sockperf".into(),
                host: "10.213.0.7".into(),
                port: 7001,
                cpu_usage: String::new(),
            }],
            ..params()
        };
        assert_eq!(
            crate::render(&server.command, &p).unwrap().join(" "),
            "sockperf server -f /var/tmp/isolab run/sockperf-server.txt"
        );
        assert_eq!(
            crate::render_text(&server.files[0].contents, &p).unwrap(),
            "T:0.0.0.0:7001\nU:0.0.0.0:7001\n"
        );
        assert_eq!(
            udp.render(&p).unwrap().command.join(" "),
            "sockperf ping-pong -i 10.213.0.7 -p 7001 -m 14 -t 30 --full-log /var/tmp/isolab run/sockperf.csv"
        );
        let tcp = builtin("tcp-rr").unwrap().render(&p).unwrap();
        assert!(tcp.command.contains(&"--tcp".to_owned()));
        let recv = builtin("udp-stream-recv")
            .unwrap()
            .render(&params())
            .unwrap();
        assert_eq!(
            recv.command.join(" "),
            "iperf3 -c 127.0.0.1 -p 5201 -t 30 -J -u -b 0 -l 1400 -R"
        );
        let fio = builtin("fio-seed001-randrw")
            .unwrap()
            .render(&params())
            .unwrap()
            .command;
        for arg in [
            "--bs=32k",
            "--numjobs=20",
            "--ioengine=psync",
            "--direct=1",
            "--rw=randrw",
        ] {
            assert!(fio.contains(&arg.to_owned()), "{arg}: {fio:?}");
        }
    }

    #[test]
    fn fileio_direct_flag_is_valid_either_way() {
        let w = builtin("sysbench-fileio").unwrap();
        let with = w.render(&params()).unwrap();
        assert!(with
            .command
            .contains(&"--file-extra-flags=direct".to_owned()));
        assert_eq!(&with.command[..2], ["env", "--chdir=/var/tmp/isolab run"]);
        assert_eq!(
            with.prepare.unwrap(),
            [
                "env",
                "--chdir=/var/tmp/isolab run",
                "sysbench",
                "fileio",
                "--file-num=128",
                "--file-total-size=256M",
                "prepare"
            ]
        );
        assert_eq!(with.cleanup.unwrap().last().unwrap(), "cleanup");
        let without = w
            .render(&Params {
                direct: false,
                ..params()
            })
            .unwrap();
        assert!(without.command.contains(&"--file-extra-flags=".to_owned()));
    }

    #[test]
    fn fio_and_iperf3_and_stress_ng_render_as_documented() {
        let fio = builtin("fio-read").unwrap().render(&params()).unwrap();
        assert!(fio
            .command
            .contains(&"--directory=/var/tmp/isolab run".to_owned()));
        assert!(fio.command.contains(&"--bs=128k".to_owned()));
        assert!(fio.command.contains(&"--direct=1".to_owned()));
        assert!(fio.command.contains(&"--numjobs=4".to_owned()));
        assert!(fio.command.contains(&"--output-format=json".to_owned()));
        let iperf = builtin("iperf3-tcp").unwrap().render(&params()).unwrap();
        assert_eq!(iperf.server.unwrap(), ["iperf3", "-s", "-1", "-p", "5201"]);
        assert_eq!(
            iperf.command,
            ["iperf3", "-c", "127.0.0.1", "-p", "5201", "-t", "30", "-J"]
        );
        let vm = builtin("stress-ng-vm").unwrap().render(&params()).unwrap();
        assert_eq!(
            vm.command,
            [
                "stress-ng",
                "--vm",
                "4",
                "--vm-bytes",
                "256M",
                "--metrics",
                "--yaml",
                "/var/tmp/isolab run/stress-ng.yaml",
                "--timeout",
                "30s"
            ]
        );
    }
}
