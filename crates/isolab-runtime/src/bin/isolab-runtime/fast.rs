//! The command lines engines, the lab and benchmarks send most, parsed without clap:
//! `run --bundle`, `run` of a root with a command and the flags the lab's start
//! benchmark passes, `create`, `start`, `state`, `kill` and `delete` with the flags
//! engines pass. Building clap's command tree for every subcommand and touching its code for
//! the first time costs ~0.3 ms, a twentieth of a container's whole start. Anything
//! else (another subcommand or flag, short flags, `--help`, a repeated flag, a value
//! that starts with `-`) gives `None`, and clap parses it, errors and help included. A
//! test checks that both parsers give the same [`Cli`] for every form taken here.

use std::ffi::OsString;
use std::path::PathBuf;

use crate::args::{Cli, Command, ContainerArgs, NetworkMode, RootfsType, SeccompMode};
use crate::oci_cli::{CreateArgs, Global, LogFormat};

/// Flags of the subcommands taken here, and whether each takes a value.
const FLAGS: [(&str, bool); 15] = [
    ("root", true),
    ("log", true),
    ("log-format", true),
    ("systemd-cgroup", false),
    ("debug", false),
    ("id", true),
    ("trace", false),
    ("bundle", true),
    ("pid-file", true),
    ("force", false),
    ("all", false),
    ("rootfs-type", true),
    ("cgroup-parent", true),
    ("network", true),
    ("readonly", false),
];

/// Flags every subcommand takes, before or after its name (`Global`).
const GLOBAL: [&str; 5] = ["root", "log", "log-format", "systemd-cgroup", "debug"];

/// `args` as the process got them (program name first); `None` = leave it to clap.
pub fn parse(args: &[OsString]) -> Option<Cli> {
    let mut global = Global {
        root: None,
        log: None,
        log_format: LogFormat::Text,
        systemd_cgroup: false,
        debug: false,
    };
    let mut subcommand = None;
    let mut flags: Vec<(&str, &str)> = Vec::new();
    let mut positional = Vec::new();
    let mut command: Vec<String> = Vec::new();
    let mut rest = args.iter().skip(1);
    while let Some(arg) = rest.next() {
        let arg = arg.to_str()?;
        if arg == "--" {
            // `run ROOTFS -- CMD…`: the rest is the command, whatever it looks like.
            for word in rest.by_ref() {
                command.push(word.to_str()?.to_owned());
            }
            break;
        }
        let Some(flag) = arg.strip_prefix("--") else {
            if arg.starts_with('-') {
                return None;
            }
            match subcommand {
                None => subcommand = Some(arg),
                Some(_) => positional.push(arg),
            }
            continue;
        };
        let (name, inline) = match flag.split_once('=') {
            Some((name, value)) => (name, Some(value)),
            None => (flag, None),
        };
        let (_, takes_value) = FLAGS.iter().find(|(known, _)| *known == name)?;
        let value = match (takes_value, inline) {
            (true, Some(value)) => value,
            (true, None) => rest.next()?.to_str()?,
            (false, None) => "",
            (false, Some(_)) => return None,
        };
        let global_flag = GLOBAL.contains(&name);
        if (!global_flag && subcommand.is_none())
            || value.starts_with('-')
            || (*takes_value && value.is_empty())
            || flags.iter().any(|(seen, _)| *seen == name)
        {
            return None;
        }
        flags.push((name, value));
    }
    for (name, value) in &flags {
        match *name {
            "root" => global.root = Some(PathBuf::from(value)),
            "log" => global.log = Some(PathBuf::from(value)),
            "log-format" => {
                global.log_format = match *value {
                    "text" => LogFormat::Text,
                    "json" => LogFormat::Json,
                    _ => return None,
                }
            }
            "systemd-cgroup" => global.systemd_cgroup = true,
            "debug" => global.debug = true,
            _ => {}
        }
    }
    let own: Vec<(&str, &str)> = flags
        .into_iter()
        .filter(|(name, _)| !GLOBAL.contains(name))
        .collect();
    let only = |allowed: &[&str]| own.iter().all(|(name, _)| allowed.contains(name));
    let value = |wanted: &str| {
        own.iter()
            .find(|(name, _)| *name == wanted)
            .map(|(_, value)| *value)
    };
    let has = |wanted: &str| value(wanted).is_some();
    // The one positional argument of create, start, state and delete.
    let id = || match positional.as_slice() {
        [id] => Some(id.to_string()),
        _ => None,
    };
    let run_flags = [
        "id",
        "trace",
        "rootfs-type",
        "cgroup-parent",
        "network",
        "readonly",
    ];
    let subcommand = subcommand?;
    if !command.is_empty() && subcommand != "run" {
        return None;
    }
    let subcommand = match subcommand {
        "run"
            if only(&["id", "trace", "bundle"]) && positional.is_empty() && command.is_empty() =>
        {
            Command::Run {
                container: container_args(value("id"), has("trace")),
                bundle: Some(PathBuf::from(value("bundle")?)),
                report: None,
            }
        }
        "run" if only(&run_flags) && positional.len() == 1 && !command.is_empty() => {
            let mut container = container_args(value("id"), has("trace"));
            container.rootfs_type = match value("rootfs-type").unwrap_or("dir") {
                "dir" => RootfsType::Dir,
                "overlay" => RootfsType::Overlay,
                "ext4" => RootfsType::Ext4,
                _ => return None,
            };
            container.network = match value("network").unwrap_or("none") {
                "none" => NetworkMode::None,
                "host" => NetworkMode::Host,
                "bridge" => NetworkMode::Bridge,
                _ => return None,
            };
            container.readonly = has("readonly");
            container.cgroup_parent = value("cgroup-parent").map(PathBuf::from);
            container.rootfs = Some(PathBuf::from(positional[0]));
            container.command = command;
            Command::Run {
                container,
                bundle: None,
                report: None,
            }
        }
        "create" if only(&["bundle", "pid-file"]) => Command::Create(CreateArgs {
            bundle: PathBuf::from(value("bundle").unwrap_or(".")),
            console_socket: None,
            pid_file: value("pid-file").map(PathBuf::from),
            no_pivot: false,
            no_new_keyring: false,
            preserve_fds: 0,
            id: id()?,
        }),
        "start" if own.is_empty() => Command::Start { id: id()? },
        "state" if own.is_empty() => Command::State { id: id()? },
        "delete" if only(&["force"]) => Command::Delete {
            force: has("force"),
            id: id()?,
        },
        "kill" if only(&["all"]) && (1..=2).contains(&positional.len()) => Command::Kill {
            all: has("all"),
            id: positional[0].to_owned(),
            signal: positional.get(1).map(|s| s.to_string()),
        },
        _ => return None,
    };
    Some(Cli {
        global,
        command: subcommand,
    })
}

/// `run`'s container flags at their defaults, with an id and `--trace`.
fn container_args(id: Option<&str>, trace: bool) -> ContainerArgs {
    ContainerArgs {
        id: id.map(str::to_owned),
        hostname: None,
        rootfs_type: RootfsType::Dir,
        readonly: false,
        upper: None,
        cpus: None,
        cpu_period: None,
        cpuset: None,
        cpuset_mems: None,
        memory: None,
        memory_swap: None,
        pids: None,
        io_read_bps: Vec::new(),
        io_write_bps: Vec::new(),
        network: NetworkMode::None,
        publish: Vec::new(),
        userns: false,
        cap_add: Vec::new(),
        cap_drop: Vec::new(),
        privileged: false,
        seccomp: SeccompMode::Default,
        allow_new_privs: false,
        env: Vec::new(),
        cwd: PathBuf::from("/"),
        bind: Vec::new(),
        cgroup_parent: None,
        trace,
        state_dir: isolab_runtime::config::default_state_dir(),
        rootfs: None,
        command: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn argv(line: &str) -> Vec<OsString> {
        std::iter::once("isolab-runtime")
            .chain(line.split_whitespace())
            .map(OsString::from)
            .collect()
    }

    #[test]
    fn the_forms_taken_parse_as_clap_parses_them() {
        for line in [
            "run --bundle /b",
            "run --trace --id bench-1 --bundle /b",
            "run --bundle=/b --id=x1 --trace",
            "--root /r run --bundle /b --id x1",
            "run --bundle /b --root /r --log /l --log-format json --debug",
            "create --bundle /b --pid-file /p c1",
            "--root /r --log /l --log-format json create --bundle /b c1",
            "create c1",
            "create --pid-file=/p --bundle=/b c1",
            "--systemd-cgroup start c1",
            "start c1",
            "state c1",
            "delete c1",
            "delete --force c1",
            "kill c1",
            "kill c1 KILL",
            "kill --all c1 9",
            "--root /r --log /l --log-format text delete --force c1",
            "run /root -- true",
            "run --id b-1 --rootfs-type overlay --cgroup-parent isolab/b --network none /img -- true",
            "run --trace --readonly --network=host --rootfs-type=ext4 /img.ext4 -- sh -c -x --y",
            "run --network bridge /root -- true",
            "run /root -- --",
        ] {
            let fast = parse(&argv(line)).unwrap_or_else(|| panic!("{line}: not taken"));
            let clap = Cli::try_parse_from(argv(line)).unwrap();
            assert_eq!(format!("{fast:?}"), format!("{clap:?}"), "{line}");
        }
    }

    #[test]
    fn everything_else_is_left_to_clap() {
        for line in [
            "",
            "--help",
            "run --help",
            "--version",
            "run --bundle /b extra",
            "run /root",
            "run /root /other -- true",
            "run --bundle /b -- true",
            "run --rootfs-type zip /root -- true",
            "run --cpus 1 /root -- true",
            "start c1 -- x",
            "run --bundle /b --report /r",
            "run --bundle /b --cpus 1",
            "run -b /b",
            "run --bundle",
            "run --bundle --id x",
            "run --bundle /b --bundle /c",
            "run --trace=yes --bundle /b",
            "--bundle /b run",
            "--log-format yaml start c1",
            "create --bundle /b --console-socket /s c1",
            "create --bundle /b",
            "start",
            "start c1 c2",
            "state --force c1",
            "kill",
            "kill c1 TERM extra",
            "spec /root -- true",
            "list",
            "exec c1 true",
            "gc",
        ] {
            assert!(parse(&argv(line)).is_none(), "{line:?} was taken");
        }
    }
}
