//! Neighbour VMs (seed 001's stress VMs): on a VM platform each neighbour instance
//! runs in a plain guest of its own, booted from the experiment's kernel, disk and
//! accelerator, with QEMU in the instance's cgroup. The reservation applies to the
//! VMs as to the subject's: the cgroup's cpu quota and cpuset hold QEMU (every vCPU
//! thread), its io throttles QEMU's block I/O that the kernel charges to it (on cgroup v1
//! not the buffered writes of QEMU's default writeback cache), a cpuset without a quota pins each
//! vCPU thread to one of its cpus, the memory becomes the guest's RAM, and the `net`
//! reservation shapes each network neighbour's tap both ways to its part of the rate
//! (a token bucket on the tap's egress, and on an IFB device its ingress is redirected
//! to: [`crate::neighbour::ShapedTap`]). A network neighbour's iperf3 client runs in its
//! guest, to a server in a namespace on isolab's bridge (seed 001's bombs streamed to
//! another node).
//!
//! A guest samples its own `/proc/stat` twice a second into the shared working
//! directory, so that the run records how busy the neighbour VMs' vCPUs were as
//! their kernels count it (`neighbour_guest_util_pct`), beside what the host
//! sampler saw (QEMU's emulation included).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use isolab_cgroups::{Bytes, Cgroup, Limits};

use super::super::{ExitKind, GuestCpu, Job, NeighbourGuest, NeighbourGuests, PlatformError};
use super::net::VmNet;
use super::{guest_limits, guest_plan, qemu_limits, vm_error, VmPlatform, DEFAULT_GUEST_MEMORY};
use crate::neighbour::{ifb_name, IpCommands, NeighbourKind, NeighbourLevel, ShapedTap};

/// How often a neighbour guest samples its `/proc/stat`.
const SAMPLE_EVERY: &str = "0.5";

/// The neighbour VMs of a run on a VM platform.
pub(super) struct VmNeighbours<'a> {
    pub(super) vm: &'a VmPlatform,
    pub(super) host_cpus: usize,
}

/// The guest's RAM of a neighbour VM with `limits`.
fn neighbour_memory(limits: &Limits) -> Bytes {
    limits.memory_max.unwrap_or(DEFAULT_GUEST_MEMORY)
}

/// Where neighbour `index` writes its `/proc/stat` line, in the shared working
/// directory.
fn stat_file(job: &Job, index: usize) -> PathBuf {
    job.workdir.join(format!(".isolab-neighbour{index}.stat"))
}

/// `argv` run in the guest by a shell that samples the guest's `/proc/stat` into
/// `stat` every half second. With bash (every Debian guest) the sampler forks nothing
/// per sample (its wait is a `read -t` on a fifo of its own, the line a `printf` in one
/// write): under TCG, forking `head`, `mv` and `sleep` twice a second had added about 16
/// points to what a 2-vCPU neighbour VM counted (planned 40%: 61–64% counted, 45–48%
/// without the forks, one experiment each way). Without bash, a POSIX loop of those
/// three, each line replaced whole.
fn sampled(argv: &[String], stat: &std::path::Path) -> Vec<String> {
    let bash = format!(
        "f=$0; read -r l < /proc/stat; printf \"%s\\n\" \"$l\" > \"$f\"; t=/tmp/isolab-tick.$$; if mkfifo \"$t\" 2>/dev/null && exec 3<>\"$t\"; then rm -f \"$t\"; tick() {{ read -r -t {SAMPLE_EVERY} -u 3 _; }}; else tick() {{ sleep {SAMPLE_EVERY}; }}; fi; while :; do tick; read -r l < /proc/stat; printf \"%s\\n\" \"$l\" > \"$f\"; done"
    );
    let script = format!(
        "f=\"$0\"; if command -v bash >/dev/null 2>&1; then bash -c '{bash}' \"$f\" & else (while :; do head -n1 /proc/stat > \"$f.tmp\" && mv \"$f.tmp\" \"$f\"; sleep {SAMPLE_EVERY}; done) & fi; exec \"$@\""
    );
    let mut v = vec!["sh".to_owned(), "-c".to_owned(), script];
    v.push(stat.display().to_string());
    v.extend(argv.iter().cloned());
    v
}

impl NeighbourGuests for VmNeighbours<'_> {
    fn outer_limits(&self, limits: &Limits) -> Limits {
        qemu_limits(limits)
    }

    fn recorded_limits(&self, applied: Limits, limits: &Limits) -> Limits {
        let mut recorded = guest_limits(applied, limits, neighbour_memory(limits));
        // A plain guest's processes are not the host's: no pids limit holds them.
        recorded.pids_max = None;
        recorded
    }

    fn start(
        &self,
        job: &Job,
        index: usize,
        argv: &[String],
        cgroup: &Cgroup,
    ) -> Result<Box<dyn NeighbourGuest>, PlatformError> {
        let set = job
            .neighbours
            .as_ref()
            .ok_or_else(|| vm_error("a neighbour VM was asked for a job without neighbours"))?;
        let limits = set.limits.clone();
        let kind = set.level.parse::<NeighbourLevel>().ok().map(|l| l.kind);
        // A disk neighbour needs a disk: its guest gets a scratch disk as the working
        // directory, which is copied in and out rather than shared, so it samples nothing.
        let uses_disk = kind == Some(NeighbourKind::Disk);
        let stat = (!uses_disk).then(|| stat_file(job, index));
        let nb = Job {
            platform: job.platform.clone(),
            image: job.image.clone(),
            name: format!("{}-nb{index}", job.name),
            argv: match &stat {
                Some(stat) => sampled(argv, stat),
                None => argv.to_vec(),
            },
            prepare: None,
            cleanup: None,
            server: None,
            workdir: job.workdir.clone(),
            limits,
            timeout: job.timeout,
            neighbours: None,
            uses_disk,
            stack: None,
        };
        let mut plan = guest_plan(self.vm, None, self.host_cpus, &nb)?;
        let net = VmNet::attach(&nb)?;
        // The `net` reservation: each network neighbour's tap shaped to its part.
        let shaped = match set.net_rate_mbps {
            Some(total) if kind == Some(NeighbourKind::Network) => {
                let each = total.div_ceil(set.instances.len().max(1) as u64).max(1);
                match shape(&net, index, each) {
                    Ok(s) => Some(s),
                    Err(e) => {
                        drop(plan);
                        let _ = net.release();
                        return Err(e);
                    }
                }
            }
            _ => None,
        };
        plan.config.network = net.guest();
        let vcpus = plan.config.vcpus;
        let attacher = cgroup.attacher()?;
        let running = match isolab_vm::start(&plan.config, &plan.command, Some(attacher)) {
            Ok(r) => r,
            Err(e) => {
                drop(plan);
                drop(shaped);
                let _ = net.release();
                return Err(e.into());
            }
        };
        drop(plan);
        Ok(Box::new(VmNeighbour {
            index,
            running: Mutex::new(running),
            net,
            shaped,
            stat,
            vcpus,
        }))
    }
}

/// Shapes the tap of neighbour VM `index` to `mbps` Mbit/s each way, checking the
/// rate read back.
fn shape(net: &VmNet, index: usize, mbps: u64) -> Result<ShapedTap, PlatformError> {
    let ifb = ifb_name(std::process::id(), index);
    let shaped = ShapedTap::shape(Arc::new(IpCommands), net.tap(), &ifb, mbps).map_err(|e| {
        PlatformError::Helper {
            phase: "net reservation",
            command: format!("tc … dev {} (neighbour VM {index})", net.tap()),
            exit: ExitKind::Code(-1),
            stderr: e.to_string(),
        }
    })?;
    let read = shaped.rate();
    if crate::neighbour::rate_differs(mbps, read) {
        return Err(PlatformError::LimitMismatch {
            cgroup: format!("tap {} of neighbour VM {index}", net.tap()),
            detail: format!("rate asked {mbps} Mbit/s read {read:.1} Mbit/s"),
        });
    }
    Ok(shaped)
}

/// A neighbour VM while it runs.
struct VmNeighbour {
    index: usize,
    running: Mutex<isolab_vm::RunningVm>,
    net: VmNet,
    /// Its tap's shaping (`net` reservation): removed after QEMU.
    shaped: Option<ShapedTap>,
    /// Where the guest writes its `/proc/stat` line.
    stat: Option<PathBuf>,
    vcpus: u32,
}

impl NeighbourGuest for VmNeighbour {
    fn is_running(&mut self) -> bool {
        self.running
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .is_running()
    }

    fn why_ended(&self) -> String {
        let running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        running.stderr_tail().unwrap_or_else(|| {
            format!(
                "(the neighbour VM ended; the end of its console:)\n{}",
                running.console_tail()
            )
        })
    }

    fn facts(&mut self) -> Vec<String> {
        let i = self.index;
        let running = self.running.get_mut().unwrap_or_else(|e| e.into_inner());
        let boot = running.boot().as_secs_f64();
        let pid = running.pid();
        let affinity = match running.vcpu_affinity() {
            Ok(threads) => threads
                .iter()
                .map(|t| {
                    let cpus: Vec<String> = t.cpus.iter().map(u32::to_string).collect();
                    format!(
                        "vCPU {} (thread {}) on cpus {}",
                        t.vcpu,
                        t.thread_id,
                        cpus.join(",")
                    )
                })
                .collect::<Vec<_>>()
                .join(", "),
            Err(e) => format!("vCPU affinity unavailable: {e}"),
        };
        let mut facts = vec![format!(
            "neighbour VM {i} (QEMU pid {pid}, booted in {boot:.1} s): {affinity}"
        )];
        if let Some(s) = &self.shaped {
            facts.push(format!("neighbour VM {i}: {}", s.describe()));
        }
        facts
    }

    fn guest_cpu(&self) -> Option<GuestCpu> {
        let stat = self.stat.as_ref()?;
        // The bash sampler rewrites its line in place: a read between the truncation
        // and the write finds the file empty.
        for _ in 0..5 {
            let text = std::fs::read_to_string(stat).unwrap_or_default();
            if let Some(cpu) = text.lines().next().and_then(GuestCpu::parse) {
                return Some(cpu);
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        None
    }

    fn samples(&self) -> bool {
        self.stat.is_some()
    }

    fn vcpus(&self) -> u32 {
        self.vcpus
    }

    fn net_rate(&self) -> Option<f64> {
        self.shaped.as_ref().map(ShapedTap::rate)
    }

    fn host_interfaces(&self) -> Vec<String> {
        let mut v = vec![self.net.tap().to_owned()];
        v.extend(
            self.shaped
                .as_ref()
                .and_then(|s| s.ifb())
                .map(str::to_owned),
        );
        v
    }

    fn remove(self: Box<Self>) -> Result<(), PlatformError> {
        let VmNeighbour {
            running,
            net,
            shaped,
            stat,
            ..
        } = *self;
        // Dropping it kills QEMU (if the cgroup's kill has not) and removes its run
        // directory; the tap goes with its last descriptor.
        drop(running);
        if let Some(stat) = stat {
            let _ = std::fs::remove_file(&stat);
            let _ = std::fs::remove_file(stat.with_extension("stat.tmp"));
        }
        let unshaped = shaped.map_or(Ok(()), |s| {
            s.remove().map_err(|e| PlatformError::Helper {
                phase: "net reservation",
                command: "ip link del (a neighbour VM's IFB device)".into(),
                exit: ExitKind::Code(-1),
                stderr: e.to_string(),
            })
        });
        net.release()?;
        unshaped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_neighbour_guest_samples_its_proc_stat_and_then_execs_the_stressor() {
        let argv: Vec<String> = ["stress-ng", "--cpu", "1"].map(String::from).to_vec();
        let v = sampled(&argv, std::path::Path::new("/w/.isolab-neighbour0.stat"));
        assert_eq!(&v[..2], ["sh", "-c"]);
        assert!(v[2].contains("head -n1 /proc/stat") && v[2].ends_with("exec \"$@\""));
        // With bash, a sample forks nothing: it waits on a fifo of its own.
        assert!(v[2].contains("read -r -t 0.5 -u 3"), "{}", v[2]);
        assert_eq!(v[3], "/w/.isolab-neighbour0.stat");
        assert_eq!(&v[4..], argv.as_slice());
    }

    #[test]
    fn guest_cpu_is_read_from_proc_stat_and_compared_over_time() {
        let a = GuestCpu::parse("cpu  100 0 50 800 10 5 5 30 0 0").unwrap();
        assert_eq!(
            a,
            GuestCpu {
                busy: 160,
                total: 1000
            }
        );
        let b = GuestCpu::parse("cpu  190 0 60 840 10 5 5 30 0 0").unwrap();
        assert_eq!(a.util_pct(b), Some(100.0 * 100.0 / 140.0));
        assert_eq!(b.util_pct(a), None);
        assert_eq!(GuestCpu::parse("cpu0 1 2 3 4 5 6 7 8"), None);
        assert_eq!(GuestCpu::parse("cpu 1 2"), None);
    }
}
