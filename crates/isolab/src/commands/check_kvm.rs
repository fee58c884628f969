//! `isolab env --check-kvm`: whether this host's KVM runs isolab's VM platforms, checked
//! as a user with KVM would first try them, each step with what to fix.
//!
//! The steps, in order, each a row of the table:
//! 1. the CPU's virtualisation extensions as this machine sees them (`vmx`/`svm` in
//!    /proc/cpuinfo; a `hypervisor` flag means this machine is itself a VM: KVM here is
//!    nested virtualisation, which its host must offer);
//! 2. the kvm modules (`kvm` and `kvm_intel`/`kvm_amd` in /sys/module, with `nested`);
//! 3. `/dev/kvm`: opened read-write, its API version, a VM created;
//! 4. what a boot needs, all prepared beforehand (no download at run time, so the check
//!    runs on a machine without internet when these are carried there as files): QEMU,
//!    the guest kernel and initramfs in the VM cache, and the bench-docker image (the
//!    bench image plus Docker, which all three platforms boot);
//! 5. a probe boot of the guest kernel under KVM;
//! 6. one short experiment (a temporary store, removed afterwards): `vm(kvm)`,
//!    `vm(kvm)+isolab` and `vm(kvm)+docker`, each with a cpu quota and with pinned cpus,
//!    two runs of `sysbench-cpu` per cell; a row passes when its runs counted with their
//!    limits read back (QEMU's cgroup outside, the container's cgroup in the guest) and,
//!    pinned, each vCPU thread on its cpu.
//!
//! When KVM cannot boot, step 6 is not run (`--control tcg` runs it under TCG instead, to
//! show that everything but KVM works). The exit status is 0 when every step passed.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use isolab_lab::{ExperimentSpec, Source};
use isolab_vm::{Accel, KVM_DEVICE, QEMU};
use serde::Serialize;

use super::run::{execute, Settings, Start};
use super::Exit;
use crate::cli::EnvArgs;
use crate::host;

/// A step's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum Status {
    Pass,
    Fail,
    /// Not run, because an earlier step failed.
    Skip,
}

impl Status {
    fn word(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Fail => "FAIL",
            Status::Skip => "skip",
        }
    }
}

/// One row of the table.
#[derive(Debug, Clone, Serialize)]
struct Row {
    check: String,
    result: Status,
    detail: String,
    /// What to do about a failure.
    #[serde(skip_serializing_if = "String::is_empty")]
    fix: String,
}

impl Row {
    fn new(check: &str, result: Status, detail: impl Into<String>, fix: impl Into<String>) -> Row {
        Row {
            check: check.to_owned(),
            result,
            detail: detail.into(),
            fix: fix.into(),
        }
    }
}

/// The image the check boots: bench-docker, the bench image plus Docker, so that one
/// image serves all three platforms (as `vm+docker` experiments use it).
const BENCH_DOCKER: &str = "/var/lib/isolab/images/bench-docker";

/// The platform levels the check runs under `accel`.
fn platforms(accel: &str) -> [String; 3] {
    ["", "+isolab", "+docker"].map(|engine| format!("vm({accel}){engine}"))
}

pub fn check_kvm(args: &EnvArgs) -> Result<Exit> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        anyhow::bail!(
            "isolab env --check-kvm boots VMs in cgroups with taps on isolab's bridge: run it as root"
        );
    }
    let mut rows = vec![cpu_row(
        &std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default(),
    )];
    rows.push(module_row(Path::new("/sys/module")));
    let device = isolab_vm::kvm_device_check(Path::new(KVM_DEVICE));
    rows.push(match &device {
        Ok(()) => Row::new(
            "device",
            Status::Pass,
            format!("{KVM_DEVICE} opens read-write, API version 12, creates a VM"),
            "",
        ),
        Err(e) => Row::new("device", Status::Fail, e.clone(), device_fix(e)),
    });
    let (prepared, kernel) = prerequisites();
    let ready = prepared.iter().all(|r| r.result == Status::Pass);
    rows.extend(prepared);
    let boot = match (&device, &kernel) {
        (Ok(()), Some(kernel)) => {
            let qemu = isolab_tools::find_program(QEMU).unwrap_or_else(|| PathBuf::from(QEMU));
            Some(isolab_vm::probe_boot(
                kernel,
                &qemu,
                Accel::Kvm,
                args.boot_timeout
                    .unwrap_or(isolab_vm::DEFAULT_PROBE_TIMEOUT),
            ))
        }
        _ => None,
    };
    rows.push(match &boot {
        Some(Ok(took)) => Row::new(
            "boot",
            Status::Pass,
            format!(
                "the guest kernel booted under KVM to its init in {:.1} s",
                took.as_secs_f64()
            ),
            "",
        ),
        Some(Err(e)) => Row::new(
            "boot",
            Status::Fail,
            format!(
                "KVM cannot boot the guest kernel: {}",
                e.lines().map(str::trim).collect::<Vec<_>>().join(" | ")
            ),
            "this /dev/kvm creates VMs but cannot run a stock kernel: a nested KVM whose host \
             hides features the guest needs, or a paravirtual KVM device (PVM); use a host with \
             hardware virtualisation, or vm(tcg) (emulation, much slower) here",
        ),
        None => Row::new(
            "boot",
            Status::Skip,
            "not tried: the device or the guest kernel is not ready (above)",
            "",
        ),
    });
    let kvm_boots = matches!(boot, Some(Ok(_)));
    let accel = if kvm_boots {
        Some("kvm")
    } else {
        args.control.as_deref()
    };
    match accel {
        Some(accel) if ready => rows.extend(platform_rows(accel, !kvm_boots)?),
        _ => {
            let why = if ready {
                "KVM cannot boot here (above); `--control tcg` runs these under TCG to check the rest"
            } else {
                "what a boot needs is missing (above)"
            };
            for p in platforms("kvm") {
                rows.push(Row::new(&p, Status::Skip, format!("not run: {why}"), ""));
            }
        }
    }
    print_rows(&rows, args.json, kvm_boots)?;
    let all_pass = kvm_boots && rows.iter().all(|r| r.result == Status::Pass);
    Ok(if all_pass { Exit::Success } else { Exit::Error })
}

/// Step 1: the virtualisation extensions this machine's CPU shows.
fn cpu_row(cpuinfo: &str) -> Row {
    let flags: Vec<&str> = cpuinfo
        .lines()
        .find(|l| l.starts_with("flags"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, f)| f.split_whitespace().collect())
        .unwrap_or_default();
    let has = |f: &str| flags.contains(&f);
    let ext = if has("vmx") {
        Some("vmx (Intel VT-x)")
    } else if has("svm") {
        Some("svm (AMD-V)")
    } else {
        None
    };
    let nested = if has("hypervisor") {
        "; this machine is itself a VM (hypervisor flag): KVM here is nested virtualisation"
    } else {
        ""
    };
    match ext {
        Some(ext) => Row::new("cpu", Status::Pass, format!("{ext}{nested}"), ""),
        None => Row::new(
            "cpu",
            Status::Fail,
            format!("no vmx or svm flag in /proc/cpuinfo{nested}"),
            if nested.is_empty() {
                "enable VT-x or AMD-V in the firmware (BIOS/UEFI) settings"
            } else {
                "ask for nested virtualisation on this VM's host (kvm_intel nested=1 or \
                 kvm_amd nested=1 there, and the vmx/svm CPU feature passed to this VM)"
            },
        ),
    }
}

/// Step 2: the kvm modules, and whether they offer nested virtualisation to our guests.
fn module_row(sys_module: &Path) -> Row {
    let vendor = ["kvm_intel", "kvm_amd", "kvm_pvm"]
        .into_iter()
        .find(|m| sys_module.join(m).is_dir());
    match (sys_module.join("kvm").is_dir(), vendor) {
        (true, Some("kvm_pvm")) => Row::new(
            "modules",
            Status::Fail,
            "kvm and kvm_pvm loaded: a paravirtual KVM (PVM), which runs guests built for \
             PVM, not a stock kernel",
            "use a host with hardware virtualisation (kvm_intel or kvm_amd), or vm(tcg) here",
        ),
        (true, Some(m)) => {
            let nested = std::fs::read_to_string(sys_module.join(m).join("parameters/nested"))
                .map(|v| v.trim().to_owned())
                .unwrap_or_else(|_| "?".into());
            Row::new(
                "modules",
                Status::Pass,
                format!("kvm and {m} loaded (nested={nested})"),
                "",
            )
        }
        (kvm, _) => Row::new(
            "modules",
            Status::Fail,
            format!(
                "{} loaded, neither kvm_intel nor kvm_amd",
                if kvm { "kvm" } else { "no kvm module" }
            ),
            "modprobe kvm_intel (or kvm_amd); if that fails, the CPU offers no virtualisation \
             to this machine (the cpu row)",
        ),
    }
}

/// What to do when `/dev/kvm` fails.
fn device_fix(error: &str) -> String {
    if error.contains("No such file") {
        "load the kvm modules (modprobe kvm_intel or kvm_amd); /dev/kvm appears with them".into()
    } else if error.contains("Permission denied") {
        "run as root, or add the user to the kvm group (/dev/kvm's group)".into()
    } else {
        "check dmesg for kvm's messages (a disabled extension, a busy hypervisor)".into()
    }
}

/// Step 4: QEMU, the guest kernel (from the VM cache: its Debian package was downloaded
/// when the cache was made, by `scripts/setup.sh vm`), and the images. Returns the rows
/// and the kernel when it is ready.
fn prerequisites() -> (Vec<Row>, Option<isolab_vm::KernelFiles>) {
    let mut rows = Vec::new();
    rows.push(match isolab_tools::find_program(QEMU) {
        Some(path) => Row::new(
            "qemu",
            Status::Pass,
            format!(
                "{} ({})",
                path.display(),
                isolab_vm::qemu_version(&path).unwrap_or_else(|_| "version unknown".into())
            ),
            "",
        ),
        None => Row::new(
            "qemu",
            Status::Fail,
            format!("{QEMU} is not installed"),
            "apt-get install qemu-system-x86 (or scripts/setup.sh vm)",
        ),
    });
    let cache = isolab_lab::platform::vm_cache();
    let kernel = isolab_vm::prepare_kernel(&cache);
    rows.push(match &kernel {
        Ok(k) => Row::new(
            "kernel",
            Status::Pass,
            format!("{} ({}) in {}", k.release, k.version, cache.display()),
            "",
        ),
        Err(e) => Row::new(
            "kernel",
            Status::Fail,
            e.to_string(),
            format!(
                "prepare it where apt works (scripts/setup.sh vm) and carry {} here",
                cache.display()
            ),
        ),
    });
    let present = Path::new(BENCH_DOCKER).join("bin/sh").exists();
    rows.push(if present {
        Row::new(
            "image",
            Status::Pass,
            format!("{BENCH_DOCKER} (the bench image plus Docker: all three platforms boot it)"),
            "",
        )
    } else {
        Row::new(
            "image",
            Status::Fail,
            format!("{BENCH_DOCKER} is missing"),
            format!(
                "isolab image build bench-docker {BENCH_DOCKER} where apt works, and carry the \
                 directory here"
            ),
        )
    });
    (rows, kernel.ok())
}

/// The experiment of step 6 under `accel`.
fn spec_text(accel: &str) -> String {
    let levels = platforms(accel);
    format!(
        "[experiment]\n\
         name = \"check-kvm\"\n\
         description = \"isolab env --check-kvm: the VM platforms under {accel}, with a cpu quota and pinned cpus\"\n\
         image = \"{BENCH_DOCKER}\"\n\
         repetitions = {{ warmup = 0, min = 2, max = 2, target_cv = 0.5 }}\n\
         duration = \"1s\"\n\
         \n\
         [matrix]\n\
         platform = {levels:?}\n\
         shape = [\"medium\"]\n\
         placement = [\"quota\", \"pinned\"]\n\
         workload = [\"sysbench-cpu\"]\n"
    )
}

/// Step 6: runs the experiment into a temporary store and makes a row of each platform
/// from its runs.
fn platform_rows(accel: &str, control: bool) -> Result<Vec<Row>> {
    let dir = tempfile::Builder::new()
        .prefix("isolab-check-kvm-")
        .tempdir()
        .context("cannot create a temporary directory for the check's store")?;
    let facts = host::facts()?;
    let spec = ExperimentSpec::parse(
        Source::new("isolab env --check-kvm", spec_text(accel)),
        &facts,
    )?;
    let store = host::open_store(&dir.path().join("check.db"))?;
    eprintln!(
        "running {} VM runs under {accel}{} (vm, vm+isolab, vm+docker; quota and pinned)…",
        spec.cells.len() * 2,
        if control { " as the control" } else { "" }
    );
    let settings = Settings {
        workdir: dir.path().join("work"),
        keep_workdirs: false,
        quiet: true,
        json: false,
    };
    let (store, outcome) = execute(store, &spec, Start::New, &settings)?;
    let cells = store.cells(outcome.experiment)?;
    let runs = store.runs(outcome.experiment)?;
    let mut rows = Vec::new();
    for platform in platforms(accel) {
        let mut details = Vec::new();
        let mut failed = Vec::new();
        for cell in cells.iter().filter(|c| {
            c.levels
                .iter()
                .any(|(f, l)| f == "platform" && *l == platform)
        }) {
            let placement = cell
                .levels
                .iter()
                .find(|(f, _)| f == "placement")
                .map_or("?", |(_, l)| l.as_str());
            let mine: Vec<_> = runs
                .iter()
                .filter(|r| r.cell == cell.id && !r.warmup)
                .collect();
            let counted = mine.iter().filter(|r| r.is_counted()).count();
            if counted < mine.len() || mine.is_empty() {
                let why = mine
                    .iter()
                    .find_map(|r| r.error.clone())
                    .unwrap_or_else(|| "no run".into());
                failed.push(format!("{placement}: {why}"));
                continue;
            }
            let run = mine[0];
            let summary = run.limits["summary"].as_str().unwrap_or("-").to_owned();
            let boot = run
                .telemetry
                .iter()
                .find(|(n, _)| n == "vm_boot_s")
                .map_or(String::new(), |(_, v)| format!(", boot {v:.1} s"));
            let pinned = run
                .notes
                .iter()
                .find(|n| n.contains("vCPU 0 → cpu"))
                .map(|n| format!(", {n}"))
                .unwrap_or_default();
            if placement == "pinned" && pinned.is_empty() {
                failed.push(format!("pinned: no vCPU thread pinned ({:?})", run.notes));
                continue;
            }
            details.push(format!(
                "{placement}: {counted} runs, {summary}{pinned}{boot}"
            ));
        }
        let label = if control {
            format!("{platform} (control)")
        } else {
            platform.clone()
        };
        rows.push(if failed.is_empty() {
            Row::new(&label, Status::Pass, details.join("; "), "")
        } else {
            Row::new(
                &label,
                Status::Fail,
                failed.join("; "),
                "`isolab run` a spec with this platform level for the whole error; `isolab gc` if a run was cut short",
            )
        });
    }
    Ok(rows)
}

fn print_rows(rows: &[Row], json: bool, kvm_boots: bool) -> Result<()> {
    if json {
        let doc = serde_json::json!({ "kvm": kvm_boots, "checks": rows });
        println!("{}", super::json::document("check-kvm", &doc)?);
        return Ok(());
    }
    let width = rows
        .iter()
        .map(|r| r.check.chars().count())
        .max()
        .unwrap_or(0);
    for r in rows {
        println!("{:width$}  {:4}  {}", r.check, r.result.word(), r.detail);
        if !r.fix.is_empty() {
            println!("{:width$}        fix: {}", "", r.fix);
        }
    }
    println!(
        "\n{}",
        if kvm_boots {
            "KVM boots isolab's guest kernel here: vm(kvm) rows measure hardware virtualisation."
        } else {
            "KVM cannot run isolab's guests here: use vm(tcg) (QEMU's emulation), whose rows measure emulation, not virtualisation."
        }
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_row_names_the_extension_or_what_to_enable() {
        let intel = cpu_row("processor : 0\nflags : fpu vmx sse hypervisor\n");
        assert_eq!(intel.result, Status::Pass);
        assert!(intel.detail.contains("VT-x") && intel.detail.contains("nested"));
        let bare = cpu_row("flags : fpu sse\n");
        assert_eq!(bare.result, Status::Fail);
        assert!(bare.fix.contains("firmware"), "{}", bare.fix);
        let guest = cpu_row("flags : fpu sse hypervisor\n");
        assert!(
            guest
                .fix
                .contains("nested virtualisation on this VM's host"),
            "{}",
            guest.fix
        );
        assert_eq!(cpu_row("flags : svm\n").detail, "svm (AMD-V)");
    }

    #[test]
    fn the_module_row_reads_sys_module() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(module_row(dir.path()).result, Status::Fail);
        std::fs::create_dir_all(dir.path().join("kvm")).unwrap();
        std::fs::create_dir_all(dir.path().join("kvm_amd/parameters")).unwrap();
        std::fs::write(dir.path().join("kvm_amd/parameters/nested"), "1\n").unwrap();
        let row = module_row(dir.path());
        assert_eq!(row.result, Status::Pass);
        assert_eq!(row.detail, "kvm and kvm_amd loaded (nested=1)");
        std::fs::remove_dir_all(dir.path().join("kvm_amd")).unwrap();
        std::fs::create_dir_all(dir.path().join("kvm_pvm")).unwrap();
        let row = module_row(dir.path());
        assert_eq!(row.result, Status::Fail);
        assert!(
            row.detail.contains("paravirtual KVM (PVM)"),
            "{}",
            row.detail
        );
    }

    #[test]
    fn the_checks_spec_is_valid_for_both_accelerators() {
        let facts = crate::host::facts().unwrap();
        for accel in ["kvm", "tcg"] {
            let spec =
                ExperimentSpec::parse(Source::new("check", spec_text(accel)), &facts).unwrap();
            assert_eq!(spec.cells.len(), 6, "{accel}");
        }
    }
}
