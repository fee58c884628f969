//! Environment capture: the facts about the host that a result depends on, stored
//! with every experiment (kernel, distribution, cpu model and topology, NUMA,
//! governor, SMT, cgroup layout, tool versions, isolab version).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use isolab_cgroups::{Hierarchy, IdSet};

use crate::platform::daemons::{Affinity, RealAffinity};

/// Asks a tool for its version (a host effect, so it sits behind a trait).
pub trait ToolProbe {
    /// The first line of `TOOL --version` (or the tool's equivalent), or why not.
    fn version(&self, tool: &str) -> Result<String, String>;
}

/// Runs the real tools.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemTools;

impl ToolProbe for SystemTools {
    /// The Debian package that owns the program, with its version, when dpkg knows
    /// it: no program is run, which matters for tools that ignore `--version` and
    /// start their benchmark (HPC Challenge's `hpcc` runs in full). Otherwise the
    /// first line of `TOOL --version` (e.g. youki, installed by cargo).
    fn version(&self, tool: &str) -> Result<String, String> {
        let path = isolab_tools::find_program(tool).ok_or("not found on PATH")?;
        let real = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
        // dpkg records the path it installed: the program's own, or the one a
        // symlink on PATH (an alternative) leads to.
        let owned = debian_package(&real)
            .or_else(|| (real != path).then(|| debian_package(&path)).flatten())
            .or_else(|| usr_merged(&real).and_then(|p| debian_package(&p)));
        if let Some(v) = owned {
            return Ok(v);
        }
        let output = isolab_tools::run_to_exit(&[tool.to_owned(), "--version".to_owned()])
            .map_err(|e| format!("not found ({e})"))?;
        let text = if output.stdout.is_empty() {
            output.stderr
        } else {
            output.stdout
        };
        let text = String::from_utf8_lossy(&text);
        let line = text
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("")
            .to_owned();
        if line.is_empty() {
            Err(format!("`{tool} --version` printed nothing"))
        } else {
            Ok(line)
        }
    }
}

/// The other name of `path` on a merged-/usr system: dpkg records `/bin/dash` while
/// `/bin/sh` resolves to `/usr/bin/dash`, so the owner of one is asked by the other.
fn usr_merged(path: &Path) -> Option<PathBuf> {
    let text = path.to_str()?;
    ["/usr/bin/", "/usr/sbin/"]
        .iter()
        .find_map(|usr| text.strip_prefix(usr).map(|rest| (&usr[4..], rest)))
        .map(|(root, rest)| PathBuf::from(format!("{root}{rest}")))
        .or_else(|| {
            ["/bin/", "/sbin/"]
                .iter()
                .find_map(|root| {
                    text.strip_prefix(root)
                        .map(|rest| format!("/usr{root}{rest}"))
                })
                .map(PathBuf::from)
        })
}

/// `PACKAGE VERSION (Debian)` of the Debian package that installed `path`, from
/// dpkg's database; `None` when dpkg does not know the file (or is missing).
fn debian_package(path: &Path) -> Option<String> {
    let query = |args: &[&str]| -> Option<String> {
        let argv: Vec<String> = std::iter::once("dpkg-query")
            .chain(args.iter().copied())
            .map(str::to_owned)
            .collect();
        let out = isolab_tools::run_to_exit(&argv).ok()?;
        (out.status == 0).then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let owner = query(&["-S", &path.to_string_lossy()])?;
    let package = parse_dpkg_owner(&owner)?;
    let version = query(&["-W", "-f=${Version}", &package])?;
    let version = version.trim();
    (!version.is_empty()).then(|| format!("{package} {version} (Debian)"))
}

/// The first package named by `dpkg-query -S`'s answer (`pkg[:arch][, pkg2]: /path`),
/// skipping diversion lines.
fn parse_dpkg_owner(text: &str) -> Option<String> {
    text.lines()
        .filter(|l| !l.starts_with("diversion"))
        .find_map(|l| l.split_once(": "))
        .and_then(|(packages, _)| packages.split(", ").next())
        .map(|p| p.split(':').next().unwrap_or(p).trim().to_owned())
        .filter(|p| !p.is_empty())
}

/// Where the host's facts are read from (parameters so tests can use a fake tree).
#[derive(Debug, Clone)]
pub struct EnvRoots {
    /// `/proc`.
    pub proc: PathBuf,
    /// `/sys`.
    pub sys: PathBuf,
    /// `/etc` (for os-release).
    pub etc: PathBuf,
}

impl Default for EnvRoots {
    fn default() -> Self {
        EnvRoots {
            proc: "/proc".into(),
            sys: "/sys".into(),
            etc: "/etc".into(),
        }
    }
}

fn read_trim(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

/// Captures the environment as ordered `(key, value)` pairs.
pub fn capture(
    roots: &EnvRoots,
    hierarchy: Option<&Hierarchy>,
    tools: &[String],
    probe: &dyn ToolProbe,
) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = Vec::new();
    let mut put = |k: &str, v: String| env.push((k.to_owned(), v));
    let unknown = || "unknown".to_owned();

    put("isolab_version", env!("CARGO_PKG_VERSION").to_owned());
    put(
        "hostname",
        read_trim(&roots.proc.join("sys/kernel/hostname")).unwrap_or_else(unknown),
    );
    put(
        "kernel",
        read_trim(&roots.proc.join("sys/kernel/osrelease")).unwrap_or_else(unknown),
    );
    put(
        "kernel_build",
        read_trim(&roots.proc.join("sys/kernel/version")).unwrap_or_else(unknown),
    );
    put("os", os_release(&roots.etc).unwrap_or_else(unknown));

    let cpuinfo = std::fs::read_to_string(roots.proc.join("cpuinfo")).unwrap_or_default();
    let topo = parse_cpuinfo(&cpuinfo);
    put("cpu_model", topo.model.unwrap_or_else(unknown));
    put("cpu_threads", topo.threads.to_string());
    put("cpu_cores", topo.cores.to_string());
    put("cpu_sockets", topo.sockets.to_string());
    put(
        "cpus_online",
        read_trim(&roots.sys.join("devices/system/cpu/online")).unwrap_or_else(unknown),
    );
    put(
        "numa_nodes",
        read_trim(&roots.sys.join("devices/system/node/online"))
            .unwrap_or_else(|| "0 (no NUMA information)".into()),
    );
    put(
        "cpu_governor",
        read_trim(
            &roots
                .sys
                .join("devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        )
        .unwrap_or_else(|| "unavailable (no cpufreq: virtual machine or fixed frequency)".into()),
    );
    put(
        "smt",
        match read_trim(&roots.sys.join("devices/system/cpu/smt/active")).as_deref() {
            Some("1") => "active".into(),
            Some("0") => "inactive".into(),
            _ => "unknown".into(),
        },
    );
    put(
        "cpu_boost",
        cpu_boost(&roots.sys).unwrap_or_else(|| "unavailable (no cpufreq boost control)".into()),
    );
    put("cpu_microcode", topo.microcode.unwrap_or_else(unknown));
    put(
        "kernel_cmdline",
        read_trim(&roots.proc.join("cmdline")).unwrap_or_else(unknown),
    );
    let vulnerabilities = roots.sys.join("devices/system/cpu/vulnerabilities");
    let mut names: Vec<String> = std::fs::read_dir(&vulnerabilities)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    for name in names {
        if let Some(v) = read_trim(&vulnerabilities.join(&name)) {
            put(&format!("mitigation.{name}"), v);
        }
    }
    let thp = roots.sys.join("kernel/mm/transparent_hugepage");
    put(
        "thp",
        read_trim(&thp.join("enabled")).map_or_else(unknown, |v| selected(&v)),
    );
    put(
        "thp_defrag",
        read_trim(&thp.join("defrag")).map_or_else(unknown, |v| selected(&v)),
    );
    put(
        "numa_balancing",
        read_trim(&roots.proc.join("sys/kernel/numa_balancing"))
            .unwrap_or_else(|| "unavailable".into()),
    );
    put(
        "clocksource",
        read_trim(
            &roots
                .sys
                .join("devices/system/clocksource/clocksource0/current_clocksource"),
        )
        .unwrap_or_else(unknown),
    );
    put(
        "swappiness",
        read_trim(&roots.proc.join("sys/vm/swappiness")).unwrap_or_else(unknown),
    );
    let irqbalance = !RealAffinity {
        proc: roots.proc.clone(),
    }
    .processes(&["irqbalance"])
    .is_empty();
    put(
        "irqbalance",
        if irqbalance {
            "running".into()
        } else {
            "not running".into()
        },
    );
    put(
        "memory_total",
        meminfo_total(&roots.proc).unwrap_or_else(unknown),
    );
    put(
        "cgroup",
        hierarchy.map_or_else(|| "not detected".into(), Hierarchy::describe),
    );
    put(
        "virtualization",
        read_trim(&roots.sys.join("class/dmi/id/sys_vendor"))
            .map(|v| {
                format!(
                    "{v} {}",
                    read_trim(&roots.sys.join("class/dmi/id/product_name")).unwrap_or_default()
                )
                .trim()
                .to_owned()
            })
            .unwrap_or_else(unknown),
    );
    let unique: BTreeSet<&String> = tools.iter().collect();
    for tool in unique {
        let v = probe
            .version(tool)
            .unwrap_or_else(|e| format!("unavailable: {e}"));
        put(&format!("tool.{tool}"), v);
    }
    env
}

/// The word in brackets of a sysfs choice (`always [madvise] never` → `madvise`), or
/// the whole text when none is bracketed.
fn selected(choices: &str) -> String {
    choices
        .split_whitespace()
        .find_map(|w| w.strip_prefix('[').and_then(|w| w.strip_suffix(']')))
        .unwrap_or(choices)
        .to_owned()
}

/// Whether the cpus may boost above their base clock: cpufreq's `boost` (AMD, acpi-cpufreq)
/// or intel_pstate's `no_turbo` (inverted); `None` when neither is there.
fn cpu_boost(sys: &Path) -> Option<String> {
    let cpu = sys.join("devices/system/cpu");
    if let Some(v) = read_trim(&cpu.join("cpufreq/boost")) {
        return Some(if v == "1" { "on" } else { "off" }.into());
    }
    read_trim(&cpu.join("intel_pstate/no_turbo"))
        .map(|v| if v == "1" { "off" } else { "on" }.into())
}

fn os_release(etc: &Path) -> Option<String> {
    let text = std::fs::read_to_string(etc.join("os-release")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map(|v| v.trim_matches('"').to_owned())
}

fn meminfo_total(proc_root: &Path) -> Option<String> {
    let bytes = memory_total(proc_root)?;
    Some(format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64))
}

/// The host's memory in bytes (`MemTotal` of `<proc_root>/meminfo`).
pub fn memory_total(proc_root: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(proc_root.join("meminfo")).ok()?;
    let kib: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kib * 1024)
}

/// CPU model and topology counts from `/proc/cpuinfo`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CpuTopology {
    /// `model name` of the first cpu.
    pub model: Option<String>,
    /// `microcode` of the first cpu (its revision), where the kernel says.
    pub microcode: Option<String>,
    /// Logical cpus (processor entries).
    pub threads: usize,
    /// Distinct (physical id, core id) pairs; threads when absent.
    pub cores: usize,
    /// Distinct physical ids; 1 when absent.
    pub sockets: usize,
}

/// Parses `/proc/cpuinfo`.
pub fn parse_cpuinfo(text: &str) -> CpuTopology {
    let mut model = None;
    let mut microcode = None;
    let mut threads = 0;
    let mut cores = BTreeSet::new();
    let mut sockets = BTreeSet::new();
    let (mut phys, mut core) = (None::<String>, None::<String>);
    let mut flush = |phys: &mut Option<String>, core: &mut Option<String>| {
        if let (Some(p), Some(c)) = (phys.take(), core.take()) {
            sockets.insert(p.clone());
            cores.insert((p, c));
        }
    };
    for line in text.lines() {
        let Some((k, v)) = line.split_once(':') else {
            flush(&mut phys, &mut core);
            continue;
        };
        let (k, v) = (k.trim(), v.trim().to_owned());
        match k {
            "processor" => threads += 1,
            "model name" if model.is_none() => model = Some(v),
            "microcode" if microcode.is_none() => microcode = Some(v),
            "physical id" => phys = Some(v),
            "core id" => core = Some(v),
            _ => {}
        }
    }
    flush(&mut phys, &mut core);
    CpuTopology {
        model,
        microcode,
        threads,
        cores: if cores.is_empty() {
            threads
        } else {
            cores.len()
        },
        sockets: sockets.len().max(1),
    }
}

/// The cpus this process may run on (its affinity mask).
pub fn allowed_cpus() -> std::io::Result<IdSet> {
    // SAFETY: cpu_set_t is plain data; zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: asking for our own affinity into a correctly sized cpu_set_t.
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } != 0
    {
        return Err(std::io::Error::last_os_error());
    }
    Ok((0..libc::CPU_SETSIZE as usize)
        // SAFETY: CPU_ISSET reads a bit of a valid set within CPU_SETSIZE.
        .filter(|&i| unsafe { libc::CPU_ISSET(i, &set) })
        .map(|i| i as u32)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    struct FakeTools;
    impl ToolProbe for FakeTools {
        fn version(&self, tool: &str) -> Result<String, String> {
            if tool == "sysbench" {
                Ok("sysbench 1.0.20".into())
            } else {
                Err("not found".into())
            }
        }
    }

    #[test]
    fn dpkg_s_answer_names_the_first_package() {
        assert_eq!(
            parse_dpkg_owner("hpcc: /usr/bin/hpcc\n").as_deref(),
            Some("hpcc")
        );
        assert_eq!(
            parse_dpkg_owner("libc-bin:amd64, foo: /usr/bin/x\n").as_deref(),
            Some("libc-bin")
        );
        assert_eq!(
            parse_dpkg_owner("diversion by x from: /usr/bin/y\ndiversion by x to: /usr/bin/y.real\nbar: /usr/bin/y\n").as_deref(),
            Some("bar")
        );
        assert_eq!(parse_dpkg_owner(""), None);
    }

    #[test]
    fn parses_cpuinfo_topology() {
        let text = "processor\t: 0\nmodel name\t: Test CPU\nphysical id\t: 0\ncore id\t: 0\n\nprocessor\t: 1\nmodel name\t: Test CPU\nphysical id\t: 0\ncore id\t: 0\n\nprocessor\t: 2\nphysical id\t: 0\ncore id\t: 1\n\n";
        let t = parse_cpuinfo(text);
        assert_eq!(
            t,
            CpuTopology {
                model: Some("Test CPU".into()),
                microcode: None,
                threads: 3,
                cores: 2,
                sockets: 1
            }
        );
    }

    #[test]
    fn captures_from_a_fake_tree() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let w = |p: &str, t: &str| {
            let path = root.join(p);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, t).unwrap();
        };
        w("proc/sys/kernel/osrelease", "6.1.0-test\n");
        w(
            "proc/cpuinfo",
            "processor\t: 0\nmodel name\t: Fake\nmicrocode\t: 0xa201016\n\n",
        );
        w("proc/cmdline", "root=/dev/vda mitigations=off\n");
        w("proc/sys/vm/swappiness", "60\n");
        w("proc/sys/kernel/numa_balancing", "1\n");
        w("proc/412/comm", "irqbalance\n");
        w(
            "sys/kernel/mm/transparent_hugepage/enabled",
            "always [madvise] never\n",
        );
        w(
            "sys/devices/system/cpu/vulnerabilities/spectre_v2",
            "Vulnerable\n",
        );
        w(
            "sys/devices/system/cpu/vulnerabilities/meltdown",
            "Not affected\n",
        );
        w("sys/devices/system/cpu/intel_pstate/no_turbo", "1\n");
        w(
            "sys/devices/system/clocksource/clocksource0/current_clocksource",
            "tsc\n",
        );
        w("proc/meminfo", "MemTotal:       2097152 kB\n");
        w("sys/devices/system/cpu/online", "0\n");
        w("sys/devices/system/cpu/smt/active", "0\n");
        w(
            "etc/os-release",
            "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n",
        );
        let roots = EnvRoots {
            proc: root.join("proc"),
            sys: root.join("sys"),
            etc: root.join("etc"),
        };
        let env = capture(
            &roots,
            None,
            &["sysbench".into(), "fio".into(), "sysbench".into()],
            &FakeTools,
        );
        let get = |k: &str| {
            env.iter()
                .find(|(kk, _)| kk == k)
                .map(|(_, v)| v.as_str())
                .unwrap()
        };
        assert_eq!(get("kernel"), "6.1.0-test");
        assert_eq!(get("os"), "Debian GNU/Linux 12 (bookworm)");
        assert_eq!(get("cpu_model"), "Fake");
        assert_eq!(get("memory_total"), "2.0 GiB");
        assert_eq!(get("smt"), "inactive");
        assert_eq!(get("tool.sysbench"), "sysbench 1.0.20");
        assert!(get("tool.fio").starts_with("unavailable"));
        assert!(get("cpu_governor").starts_with("unavailable"));
        assert_eq!(env.iter().filter(|(k, _)| k == "tool.sysbench").count(), 1);
        // What changes results and is set outside the workload.
        assert_eq!(get("cpu_microcode"), "0xa201016");
        assert_eq!(get("kernel_cmdline"), "root=/dev/vda mitigations=off");
        assert_eq!(get("thp"), "madvise");
        assert_eq!(get("thp_defrag"), "unknown");
        assert_eq!(get("swappiness"), "60");
        assert_eq!(get("numa_balancing"), "1");
        assert_eq!(get("clocksource"), "tsc");
        assert_eq!(get("irqbalance"), "running");
        assert_eq!(get("cpu_boost"), "off");
        assert_eq!(get("mitigation.meltdown"), "Not affected");
        assert_eq!(get("mitigation.spectre_v2"), "Vulnerable");
    }

    #[test]
    fn a_merged_usr_path_is_asked_by_its_other_name() {
        assert_eq!(
            usr_merged(Path::new("/usr/bin/dash")),
            Some(PathBuf::from("/bin/dash"))
        );
        assert_eq!(
            usr_merged(Path::new("/sbin/tc")),
            Some(PathBuf::from("/usr/sbin/tc"))
        );
        assert_eq!(usr_merged(Path::new("/opt/x/bin/y")), None);
    }
}
