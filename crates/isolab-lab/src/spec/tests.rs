use super::*;
use crate::platform::{Network, PlatformKind};
use crate::reservation::Reservation;
use isolab_workloads::ParserKind;
use std::path::Path;

fn host(cpus: &str) -> HostFacts {
    HostFacts {
        cpus: cpus.parse().unwrap(),
    }
}

pub(super) fn parse(text: &str) -> Result<ExperimentSpec, SpecErrors> {
    ExperimentSpec::parse(Source::new("exp.toml", text), &host("0-1"))
}

pub(super) fn errors(text: &str) -> Vec<String> {
    parse(text)
        .unwrap_err()
        .0
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn quick_start_expands_to_eight_cells() {
    let spec = ExperimentSpec::parse(
        Source::new("built-in quick-start", QUICK_START),
        &host("0-1"),
    )
    .unwrap();
    assert_eq!(spec.name, "quick-start");
    assert_eq!(spec.cells.len(), 8);
    assert_eq!(
        spec.baseline,
        vec![
            ("placement".to_string(), "pinned".to_string()),
            ("platform".to_string(), "host".to_string())
        ]
    );
    assert_eq!(
        spec.cells[0].key(),
        "platform=host shape=medium placement=pinned workload=cpu-throughput"
    );
    assert_eq!(spec.cells[2].placement, Placement::Quota);
    assert_eq!(
        spec.cells[4].platform,
        PlatformDef::new(PlatformKind::ISOLAB)
    );
    assert_eq!(spec.cells[1].workload.primary, "latency_max");
    // No `[experiment] image`: the bench recipe's image in the cache.
    assert_eq!(spec.recipe, Some(isolab_image::Recipe::bench()));
    assert_eq!(
        spec.image,
        isolab_image::Recipe::bench().dir_in(Path::new(isolab_image::DEFAULT_CACHE_ROOT))
    );
    assert_eq!(
        spec.repetitions,
        Repetitions {
            warmup: 1,
            min: 6,
            max: 12,
            target_cv: 0.05
        }
    );
    assert_eq!(spec.run_bounds(), (48, 96));
    assert!(spec.dropped.is_empty());
}

#[test]
fn platform_tables_define_levels_with_engine_and_network() {
    let spec = parse("[experiment]\nname = \"x\"\nimage = \"images/bench\"\n[platform.iso-host-net]\nengine = \"isolab\"\nnetwork = \"host\"\n[matrix]\nplatform = [\"host\", \"isolab-bridge\", \"iso-host-net\"]\nworkload = [\"iperf3-tcp\"]\n").unwrap();
    let platforms: Vec<_> = spec.cells.iter().map(|c| c.platform.clone()).collect();
    assert_eq!(platforms[0].network, Network::Host);
    assert_eq!(platforms[1].kind, PlatformKind::ISOLAB);
    assert_eq!(platforms[1].network, Network::Bridge);
    assert_eq!(platforms[2].name, "iso-host-net");
    assert_eq!(platforms[2].network, Network::Host);
    // Relative to the spec's directory (here the current one).
    assert_eq!(spec.image, PathBuf::from("images/bench"));
    let nested = ExperimentSpec::parse(
        Source::new("specs/exp.toml", "[experiment]\nname = \"x\"\nimage = \"img\"\n[matrix]\nworkload = [\"sysbench-cpu\"]\n"),
        &host("0-1"),
    )
    .unwrap();
    assert_eq!(nested.image, PathBuf::from("specs/img"));
}

#[test]
fn bad_platform_tables_point_at_the_value() {
    let errs = errors("[experiment]\nname = \"x\"\n[platform.a]\nengine = \"dockr\"\n[platform.b]\nengine = \"host\"\nnetwork = \"bridge\"\n[platform.c]\nengine = \"isolab\"\nnetwork = \"wifi\"\n[matrix]\nworkload = [\"sysbench-cpu\"]\n");
    assert_eq!(errs.len(), 3, "{errs:?}");
    assert!(
        errs[0].starts_with("exp.toml:4:10: platform.a.engine: unknown engine `dockr`"),
        "{errs:?}"
    );
    assert!(
        errs[1].starts_with(
            "exp.toml:7:11: platform.b: engine `host` offers network host only, not `bridge`"
        ),
        "{errs:?}"
    );
    assert!(
        errs[2].starts_with("exp.toml:10:11: unknown network `wifi`"),
        "{errs:?}"
    );
}

#[test]
fn a_server_workload_cannot_run_without_a_network() {
    let text = "[experiment]\nname = \"x\"\n[matrix]\nplatform = [\"host\", \"isolab\"]\nworkload = [\"iperf3-tcp\", \"sysbench-cpu\"]\n";
    let errs = errors(text);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].starts_with("exp.toml:4:21: workload `iperf3-tcp` needs a server: platform `isolab` has network `none`"),
        "{errs:?}"
    );
    let skipped =
        parse(&text.replace("name = \"x\"", "name = \"x\"\nimpossible = \"skip\"")).unwrap();
    assert_eq!(skipped.cells.len(), 3);
    assert_eq!(
        skipped.dropped[0].key,
        "platform=isolab workload=iperf3-tcp"
    );
}

#[test]
fn every_vm_platform_needs_its_accelerator_in_the_name() {
    for (level, kvm, tcg) in [
        ("vm", "vm(kvm)", "vm(tcg)"),
        ("vm+isolab", "vm(kvm)+isolab", "vm(tcg)+isolab"),
        ("vm+docker", "vm(kvm)+docker", "vm(tcg)+docker"),
    ] {
        let errs = errors(&format!("[experiment]\nname = \"x\"\n[matrix]\nplatform = [\"{level}\"]\nworkload = [\"sysbench-cpu\"]\n"));
        assert!(
            errs[0].contains(&format!(
                "platform `{level}` needs its accelerator in the name: `{kvm}` (KVM) or `{tcg}`"
            )),
            "{errs:?}"
        );
        let spec = parse(&format!("[experiment]\nname = \"x\"\n[matrix]\nplatform = [\"{tcg}\"]\nworkload = [\"sysbench-cpu\"]\n")).unwrap();
        assert_eq!(spec.cells[0].platform.kind.as_str(), level);
    }
}

#[test]
fn the_checker_explains_cells_from_the_platforms_capabilities() {
    // isolab offers a bridge: the error names the built-in level that has one.
    let errs = errors("[experiment]\nname = \"x\"\n[matrix]\nplatform = [\"isolab\"]\nworkload = [\"iperf3-tcp\"]\n");
    assert!(
        errs[0].contains("use `isolab-bridge` or a [platform.NAME] with engine = \"isolab\" and network = \"bridge\" or \"host\""),
        "{errs:?}"
    );
    // A VM is on isolab's bridge: its command reaches the server at the gateway.
    parse("[experiment]\nname = \"x\"\n[matrix]\nplatform = [\"vm(tcg)\"]\nworkload = [\"iperf3-tcp\"]\n").unwrap();
    // A plain VM does not apply a pids limit: a warning, the runs carry a note.
    let spec = parse("[experiment]\nname = \"x\"\n[shape.small]\ncpus = 1\npids = 64\n[matrix]\nplatform = [\"vm(tcg)\", \"vm(tcg)+isolab\"]\nshape = [\"small\"]\nworkload = [\"sysbench-cpu\"]\n").unwrap();
    assert_eq!(spec.warnings.len(), 1, "{:?}", spec.warnings);
    assert!(
        spec.warnings[0].contains("platform `vm(tcg)` does not apply pids limits (it applies cpu-quota, cpuset, memory, io)"),
        "{:?}",
        spec.warnings
    );
}

#[test]
fn misspelt_key_names_line_column_and_expected_keys() {
    let errs = errors("[experiment]\nname = \"x\"\nrepetitons = { min = 3 }\n\n[matrix]\nworkload = [\"sysbench-cpu\"]\n");
    assert_eq!(errs.len(), 1);
    assert!(
        errs[0].starts_with("exp.toml:3:1: unknown field `repetitons`, expected one of"),
        "{}",
        errs[0]
    );
    assert!(errs[0].contains("`repetitions`"), "{}", errs[0]);
}

#[test]
fn unknown_levels_point_at_the_level() {
    let errs = errors("[experiment]\nname = \"x\"\n[matrix]\nworkload = [\"sysbench-cpu\", \"sysbench-cpux\"]\nplacement = [\"pined\"]\n");
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert!(
        errs[0].starts_with("exp.toml:4:29: unknown workload `sysbench-cpux`: expected one of"),
        "{}",
        errs[0]
    );
    assert!(
        errs[1].starts_with("exp.toml:5:14: unknown placement `pined`"),
        "{}",
        errs[1]
    );
    // The unknown placement is reported in file order, after the workload on line 4.
}

#[test]
fn impossible_pinning_is_an_error_or_skipped() {
    let text = "[experiment]\nname = \"x\"\n[matrix]\nshape = [\"large\", \"xlarge\"]\nplacement = [\"quota\", \"pinned\"]\nworkload = [\"sysbench-cpu\"]\n";
    let errs = errors(text);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].starts_with(
            "exp.toml:4:19: pinned shape `xlarge` needs 4 cpus but this host offers 2"
        ),
        "{}",
        errs[0]
    );

    let skip = text.replace("name = \"x\"", "name = \"x\"\nimpossible = \"skip\"");
    let spec = parse(&skip).unwrap();
    assert_eq!(spec.cells.len(), 3);
    assert_eq!(spec.dropped.len(), 1);
    assert_eq!(
        spec.dropped[0].key,
        "shape=xlarge placement=pinned workload=sysbench-cpu"
    );
    assert_eq!(
        spec.warnings.len(),
        1,
        "quota of 4 cpus on 2 is worth a warning"
    );
}

#[test]
fn exclude_drops_matching_cells_and_checks_names() {
    let spec = parse("[experiment]\nname = \"x\"\n[matrix]\nplacement = [\"shared\", \"quota\"]\nworkload = [\"sysbench-cpu\", \"fio-randread\"]\nexclude = [{ placement = \"quota\", workload = \"fio-randread\" }]\n").unwrap();
    assert_eq!(spec.cells.len(), 3);
    assert_eq!(
        spec.dropped[0].reason,
        "excluded by the exclude entry at line 6"
    );

    let errs = errors("[experiment]\nname = \"x\"\n[matrix]\nworkload = [\"sysbench-cpu\"]\nexclude = [{ platform = \"docker\" }]\n");
    assert!(
        errs[0].contains("exclude names factor `platform`, which the matrix does not vary"),
        "{errs:?}"
    );
}

#[test]
fn user_workloads_are_checked() {
    let ok = parse("[experiment]\nname = \"x\"\n[matrix]\nworkload = [\"nothing\"]\n[workload.nothing]\ncommand = \"true\"\nparser = \"time\"\n").unwrap();
    assert_eq!(ok.cells[0].workload.primary, "wall_time");
    assert_eq!(ok.cells[0].workload.tools, vec!["true".to_string()]);

    let errs = errors("[experiment]\nname = \"x\"\n[matrix]\nworkload = [\"w\"]\n[workload.w]\ncommand = \"sleep {secs}\"\nparser = \"jsonx\"\n");
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert!(
        errs.iter()
            .any(|e| e.starts_with("exp.toml:7:10: unknown parser `jsonx`")),
        "{errs:?}"
    );
    assert!(
        errs.iter()
            .any(|e| e.starts_with("exp.toml:6:11:") && e.contains("secs")),
        "{errs:?}"
    );
}

#[test]
fn unknown_platforms_list_the_levels_and_networks_must_be_offered() {
    let errs = errors("[experiment]\nname = \"x\"\n[matrix]\nplatform = [\"host\", \"xen\"]\nworkload = [\"sysbench-cpu\"]\n");
    assert!(
        errs[0].starts_with("exp.toml:4:21: unknown platform `xen`: expected one of"),
        "{errs:?}"
    );
    assert!(errs[0].contains("docker-bridge"), "{errs:?}");
    let errs = errors("[experiment]\nname = \"x\"\n[platform.r]\nengine = \"runc\"\nnetwork = \"bridge\"\n[matrix]\nplatform = [\"r\"]\nworkload = [\"sysbench-cpu\"]\n");
    assert!(
        errs[0].contains("engine `runc` offers network none, host only, not `bridge`"),
        "{errs:?}"
    );
}

#[test]
fn repetitions_and_durations_are_validated() {
    let errs = errors("[experiment]\nname = \"x\"\nrepetitions = { min = 1, target_cv = 5 }\nduration = \"fast\"\n[matrix]\nworkload = [\"sysbench-cpu\"]\n");
    assert_eq!(errs.len(), 3, "{errs:?}");
    assert!(errs[0].contains("repetitions.min must be a whole number ≥ 2"));
    assert!(errs[1].contains("target_cv must be a fraction"));
    assert!(errs[2].contains("invalid duration `fast`"));
}

#[test]
fn syntax_errors_have_locations() {
    let errs = errors("[experiment\nname = 1\n");
    assert!(errs[0].starts_with("exp.toml:1:"), "{errs:?}");
}

#[test]
fn missing_workload_is_explained() {
    let errs = errors("[experiment]\nname = \"x\"\n[matrix]\nplacement = [\"quota\"]\n");
    assert!(
        errs[0].contains("missing `workload` in [matrix]"),
        "{errs:?}"
    );
}

#[test]
fn replicas_duplicate_every_configuration() {
    let spec = parse("[experiment]\nname = \"x\"\n[matrix]\nplacement = [\"shared\", \"quota\"]\nworkload = [\"sysbench-cpu\"]\nreplica = [\"a\", \"b\"]\n").unwrap();
    assert_eq!(spec.cells.len(), 4);
    assert_eq!(
        spec.cells[1].key(),
        "placement=shared workload=sysbench-cpu replica=b"
    );
    assert_eq!(spec.cells[2].placement, Placement::Quota);
}

#[test]
fn aa_design_adds_replicas_and_a_baseline() {
    let source = Source::new("q.toml", QUICK_START);
    let aa = aa_design(&source).unwrap();
    assert_eq!(aa.name, "A/A calibration of q.toml");
    let spec = ExperimentSpec::parse(aa, &host("0-1")).unwrap();
    assert_eq!(spec.name, "quick-start-calibration");
    assert_eq!(spec.cells.len(), 16);
    assert_eq!(
        spec.baseline,
        vec![("replica".to_string(), "a".to_string())]
    );
    assert!(aa_design(&Source::new(
        "x",
        "[experiment]\nname=\"x\"\n[matrix]\nreplica=[\"a\"]\n"
    ))
    .is_err());
}

#[test]
fn neighbour_and_reservation_factors_expand_and_default_the_baseline() {
    let spec = parse("[experiment]\nname = \"x\"\n[matrix]\nshape = [\"medium\"]\nworkload = [\"sysbench-cpu\"]\nneighbour = [\"none\", \"cpu@90%\", \"fork*2\"]\nreservation = [\"none\", \"cpuset\"]\n").unwrap();
    assert_eq!(spec.cells.len(), 6);
    assert_eq!(
        spec.baseline,
        vec![("neighbour".to_string(), "none".to_string())]
    );
    let c = &spec.cells[3];
    assert_eq!(
        c.key(),
        "shape=medium workload=sysbench-cpu neighbour=cpu@90% reservation=cpuset"
    );
    assert_eq!(
        c.neighbour.as_ref().map(ToString::to_string).as_deref(),
        Some("cpu@90%")
    );
    assert_eq!(c.reservation, Reservation::Cpuset);
    assert!(spec.cells[0].neighbour.is_none());
}

#[test]
fn bad_neighbours_and_reservations_point_at_the_level() {
    let errs = errors("[experiment]\nname = \"x\"\n[matrix]\nworkload = [\"sysbench-cpu\"]\nneighbour = [\"none\", \"gpu@50%\"]\nreservation = [\"blkio\"]\n");
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert!(errs[0].starts_with("exp.toml:5:22:"), "{errs:?}");
    assert!(
        errs[1].starts_with("exp.toml:6:16: unknown reservation `blkio`"),
        "{errs:?}"
    );
}

#[test]
fn a_reservation_needs_cpus_left_for_the_neighbours() {
    let text = "[experiment]\nname = \"x\"\n[matrix]\nshape = [\"large\"]\nworkload = [\"sysbench-cpu\"]\nneighbour = [\"none\", \"cpu\"]\nreservation = [\"none\", \"cpuset\"]\n";
    let errs = errors(text);
    assert!(
        errs.iter()
            .any(|e| e.contains("reservation `cpuset` with shape `large` (2 cpus) leaves none")),
        "{errs:?}"
    );
    let skipped =
        parse(&text.replace("name = \"x\"", "name = \"x\"\nimpossible = \"skip\"")).unwrap();
    assert_eq!(skipped.cells.len(), 2);
}

#[test]
fn threads_and_instances_are_counts() {
    let spec = parse("[experiment]\nname = \"x\"\n[matrix]\nworkload = [\"sysbench-cpu\"]\nthreads = [1, 4]\ninstances = [1, 128]\n").unwrap();
    assert_eq!(spec.cells.len(), 4);
    assert_eq!(spec.cells[3].thread_count(), 4);
    assert_eq!(spec.cells[3].instances, 128);
    assert_eq!(
        spec.cells[3].key(),
        "workload=sysbench-cpu threads=4 instances=128"
    );
    let errs = errors("[experiment]\nname = \"x\"\n[matrix]\nworkload = [\"sysbench-cpu\"]\nthreads = [0]\ninstances = [\"many\", 1000]\n");
    assert_eq!(errs.len(), 3, "{errs:?}");
    assert!(
        errs[0].contains("threads must be a whole number from 1 to 4096, got `0`"),
        "{errs:?}"
    );
    assert!(
        errs[2].contains("instances must be a whole number from 1 to 512, got `1000`"),
        "{errs:?}"
    );
}

#[test]
fn vm_levels_name_their_accelerator() {
    let spec = parse("[experiment]\nname = \"x\"\n[platform.guest]\nengine = \"vm\"\naccel = \"tcg\"\n[matrix]\nplatform = [\"host\", \"vm(tcg)\", \"vm(kvm)+isolab\", \"guest\"]\nworkload = [\"sysbench-cpu\"]\n").unwrap();
    let platforms: Vec<_> = spec.cells.iter().map(|c| c.platform.clone()).collect();
    assert_eq!(platforms[1].kind, PlatformKind::VM);
    assert_eq!(platforms[1].accel, Some(crate::platform::Accel::Tcg));
    assert_eq!(platforms[2].kind, PlatformKind::VM_ISOLAB);
    assert_eq!(platforms[2].accel, Some(crate::platform::Accel::Kvm));
    assert_eq!(platforms[3].accel, Some(crate::platform::Accel::Tcg));
    let errs = errors("[experiment]\nname = \"x\"\n[matrix]\nplatform = [\"vm\"]\nworkload = [\"sysbench-cpu\"]\n");
    assert!(
        errs[0].contains("`vm(kvm)` (KVM) or `vm(tcg)` (QEMU's software emulation)"),
        "{errs:?}"
    );
    let errs = errors("[experiment]\nname = \"x\"\n[platform.g]\nengine = \"vm\"\n[platform.d]\nengine = \"docker\"\naccel = \"kvm\"\n[matrix]\nworkload = [\"sysbench-cpu\"]\n");
    assert!(
        errs[0].contains("needs `accel = \"kvm\"` or `accel = \"tcg\"`"),
        "{errs:?}"
    );
    assert!(
        errs[1].contains("applies to the vm engines only"),
        "{errs:?}"
    );
}

#[test]
fn the_probe_threshold_is_a_duration_or_off() {
    let spec = parse("[experiment]\nname = \"x\"\nprobe_threshold = \"2s\"\n[matrix]\nworkload = [\"sysbench-cpu\"]\n").unwrap();
    let probe = spec.probe.unwrap();
    assert_eq!(probe.threshold, std::time::Duration::from_secs(2));
    assert_eq!(
        probe.sustained_limit(),
        std::time::Duration::from_millis(400)
    );
    let off = parse("[experiment]\nname = \"x\"\nprobe_threshold = \"off\"\n[matrix]\nworkload = [\"sysbench-cpu\"]\n").unwrap();
    assert!(off.probe.is_none());
    let errs = errors("[experiment]\nname = \"x\"\nprobe_threshold = \"1ms\"\n[matrix]\nworkload = [\"sysbench-cpu\"]\n");
    assert!(
        errs[0].starts_with("exp.toml:3:19: invalid probe_threshold `1ms`"),
        "{errs:?}"
    );
}

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
        spec.dropped[0]
            .reason
            .starts_with("workload `web` is a service stack: platform `docker` has network `none`"),
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
fn a_workload_s_files_are_kept_and_checked() {
    let spec = parse("[experiment]\nname = \"x\"\n[matrix]\nworkload = [\"w\"]\n[workload.w]\ncommand = \"cat {workdir}/in.txt\"\nparser = \"time\"\nfiles = { \"in.txt\" = \"Total=@usable_memory_mib@\" }\n").unwrap();
    let w = &spec.cells[0].workload;
    assert_eq!(w.files.len(), 1);
    assert_eq!(
        (w.files[0].path.as_str(), w.files[0].contents.as_str()),
        ("in.txt", "Total=@usable_memory_mib@")
    );
    let errs = errors("[experiment]\nname = \"x\"\n[matrix]\nworkload = [\"w\"]\n[workload.w]\ncommand = \"true\"\nparser = \"time\"\nfiles = { \"../out\" = \"x\", \"ok\" = \"@nope@\" }\n");
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert!(
        errs[0].starts_with("exp.toml:8:") && errs[0].contains("`../out` must be a relative path"),
        "{errs:?}"
    );
    assert!(errs[1].contains("unknown placeholder `{nope}`"), "{errs:?}");
}

#[test]
fn a_run_s_timeout_defaults_from_the_duration_and_can_be_raised() {
    let base = "[experiment]\nname = \"x\"\nduration = \"10s\"\n[matrix]\nworkload = [\"hpl\"]\n";
    assert_eq!(parse(base).unwrap().timeout, Duration::from_secs(160));
    let raised = base.replace(
        "duration = \"10s\"",
        "duration = \"10s\"\ntimeout = \"30m\"",
    );
    assert_eq!(parse(&raised).unwrap().timeout, Duration::from_secs(1800));
    let short = base.replace("duration = \"10s\"", "duration = \"10s\"\ntimeout = \"5s\"");
    assert_eq!(
        errors(&short),
        ["exp.toml:4:11: timeout must be at least the duration (10s)"]
    );
}

#[test]
fn a_built_in_s_work_is_tuned_under_its_own_name_or_another() {
    let spec = parse("[experiment]\nname = \"x\"\n[matrix]\nworkload = [\"mpi-prime\", \"short-video\"]\n[workload.mpi-prime]\nwork = 1000\n[workload.short-video]\nfrom = \"ffmpeg-transcode\"\nwork = 2\n").unwrap();
    let work = |name: &str| {
        let c = spec.cells.iter().find(|c| c.workload.name == name).unwrap();
        c.workload.work.clone().unwrap()
    };
    assert_eq!(work("mpi-prime").amount, 1000);
    assert_eq!(work("short-video").amount, 2);
    assert_eq!(work("short-video").unit, "frames of video (30 a second)");
    let video = &spec
        .cells
        .iter()
        .find(|c| c.workload.name == "short-video")
        .unwrap()
        .workload;
    assert_eq!(video.assets[0].name, "video");
    assert_eq!(video.parser, ParserKind::Ffmpeg);
}

#[test]
fn tuning_a_built_in_wrongly_is_an_error_at_the_key() {
    let errs = errors("[experiment]\nname = \"x\"\n[matrix]\nworkload = [\"a\", \"sysbench-cpu\", \"c\", \"d\"]\n[workload.a]\nfrom = \"nope\"\nwork = 1\n[workload.sysbench-cpu]\nwork = 5\n[workload.c]\nfrom = \"mpi-search\"\nwork = 0\n[workload.d]\nfrom = \"mpi-search\"\nwork = 3\nparser = \"json\"\n");
    let all = errs.join("\n");
    assert!(
        all.contains("unknown built-in workload `nope` in workload.a.from"),
        "{all}"
    );
    assert!(
        all.contains("the built-in `sysbench-cpu` has no amount of work to set"),
        "{all}"
    );
    assert!(
        all.contains("workload.c.work must be a positive whole number, not 0"),
        "{all}"
    );
    assert!(all.contains("workload.d tunes the built-in `mpi-search`, which takes only `from`, `work` and `description`: remove `parser`"), "{all}");
    assert!(errs.iter().all(|e| e.starts_with("exp.toml:")), "{all}");
}
