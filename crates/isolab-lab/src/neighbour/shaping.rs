//! The `net` reservation on a neighbour VM's tap, as a cloud host shapes a guest's
//! interface: what the guest receives leaves the host through the tap (a token
//! bucket on the tap's egress); what it sends arrives on the tap's ingress, which
//! the kernel cannot queue, so a filter redirects it to an IFB device of its own
//! whose egress has the same bucket (there is no police action on this kernel, and
//! shaping queues where policing would drop). Both rates are read back from the
//! kernel.

use std::path::Path;
use std::sync::Arc;

use super::net::{tbf_args, tbf_rate_mbps, NetCommands, NetError};

/// Prefix of the IFB devices: `nbi<pid>x<index>` (at most 15 characters).
const IFB_PREFIX: &str = "nbi";

/// The IFB device of neighbour VM `index` of process `pid`.
pub fn ifb_name(pid: u32, index: usize) -> String {
    format!("{IFB_PREFIX}{pid}x{index}")
}

/// A tap shaped to a rate both ways, as a guard: dropping it deletes its IFB device
/// (the tap's own qdiscs go with the tap).
#[derive(Debug)]
pub struct ShapedTap {
    commands: Arc<dyn NetCommands>,
    tap: String,
    ifb: Option<String>,
    /// The lower of the two rates as read back, in Mbit/s.
    rate: f64,
}

fn argv(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

impl ShapedTap {
    /// Shapes `tap` to `mbps` Mbit/s each way through IFB device `ifb`, and reads both
    /// buckets back. What was made is removed again on error.
    pub fn shape(
        commands: Arc<dyn NetCommands>,
        tap: &str,
        ifb: &str,
        mbps: u64,
    ) -> Result<ShapedTap, NetError> {
        let mut shaped = ShapedTap {
            commands,
            tap: tap.to_owned(),
            ifb: None,
            rate: f64::INFINITY,
        };
        let run = |v: &[String]| shaped.commands.run(v);
        run(&argv(&["ip", "link", "add", ifb, "type", "ifb"]))?;
        shaped.ifb = Some(ifb.to_owned());
        let run = |v: &[String]| shaped.commands.run(v);
        run(&argv(&["ip", "link", "set", ifb, "up"]))?;
        // What the guest receives.
        run(&tbf_args(tap, mbps))?;
        // What the guest sends: from the tap's ingress to the IFB's egress bucket.
        run(&argv(&[
            "tc", "qdisc", "add", "dev", tap, "handle", "ffff:", "ingress",
        ]))?;
        run(&argv(&[
            "tc", "filter", "add", "dev", tap, "parent", "ffff:", "protocol", "all", "u32",
            "match", "u32", "0", "0", "action", "mirred", "egress", "redirect", "dev", ifb,
        ]))?;
        run(&tbf_args(ifb, mbps))?;
        let mut lowest = f64::INFINITY;
        for dev in [tap, ifb] {
            let show = argv(&["tc", "-j", "qdisc", "show", "dev", dev]);
            let json = run(&show)?;
            let rate = tbf_rate_mbps(&json).ok_or_else(|| NetError::Failed {
                command: show.join(" "),
                status: "no tbf rate in its output".into(),
                stderr: json.chars().take(300).collect(),
            })?;
            lowest = lowest.min(rate);
        }
        let show = argv(&["tc", "-j", "filter", "show", "dev", tap, "ingress"]);
        let json = run(&show)?;
        if redirect_target(&json).as_deref() != Some(ifb) {
            return Err(NetError::Failed {
                command: show.join(" "),
                status: format!("no redirect of the tap's ingress to {ifb} in its output"),
                stderr: json.chars().take(300).collect(),
            });
        }
        shaped.rate = lowest;
        Ok(shaped)
    }

    /// The rate in force each way, in Mbit/s (the lower of the two read back).
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// The IFB device that shapes what the guest sends.
    pub fn ifb(&self) -> Option<&str> {
        self.ifb.as_deref()
    }

    /// A note for the run: what shapes the tap.
    pub fn describe(&self) -> String {
        format!(
            "tap {} shaped to {:.0} Mbit/s each way (tbf on its egress; its ingress redirected to {} with the same tbf)",
            self.tap,
            self.rate,
            self.ifb.as_deref().unwrap_or("-")
        )
    }

    /// Deletes the IFB device, reporting a failure (dropping does the same silently).
    pub fn remove(mut self) -> Result<(), NetError> {
        self.teardown()
    }

    fn teardown(&mut self) -> Result<(), NetError> {
        match self.ifb.take() {
            Some(ifb) => self
                .commands
                .run(&argv(&["ip", "link", "del", &ifb]))
                .map(drop),
            None => Ok(()),
        }
    }
}

impl Drop for ShapedTap {
    fn drop(&mut self) {
        let _ = self.teardown();
    }
}

/// The device a tap's ingress filter redirects to, in `tc -j filter show … ingress`.
fn redirect_target(json: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    v.as_array()?.iter().find_map(|f| {
        f["options"]["actions"].as_array()?.iter().find_map(|a| {
            (a["kind"] == "mirred")
                .then(|| a["to_dev"].as_str().map(str::to_owned))
                .flatten()
        })
    })
}

/// IFB devices (`nbi<pid>x<i>`) in `sys_class_net` (`/sys/class/net`) whose isolab
/// process is gone by `alive`: left by a killed run, to delete with `ip link del`.
pub fn stale_ifbs(sys_class_net: &Path, alive: impl Fn(u32) -> bool) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(sys_class_net) else {
        return Vec::new();
    };
    let mut stale: Vec<String> = entries
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|name| {
            name.strip_prefix(IFB_PREFIX)
                .and_then(|r| r.split_once('x'))
                .filter(|(_, i)| i.parse::<usize>().is_ok())
                .and_then(|(pid, _)| pid.parse::<u32>().ok())
                .is_some_and(|pid| !alive(pid))
        })
        .collect();
    stale.sort();
    stale
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Records commands, answers `tc -j` as the kernel does; fails one containing
    /// `fail_on`.
    #[derive(Debug, Default)]
    struct Fake {
        log: Mutex<Vec<String>>,
        fail_on: Option<&'static str>,
        redirect_to: Option<&'static str>,
    }

    impl NetCommands for Fake {
        fn run(&self, argv: &[String]) -> Result<String, NetError> {
            let line = argv.join(" ");
            self.log.lock().unwrap().push(line.clone());
            if self.fail_on.is_some_and(|f| line.contains(f)) {
                return Err(NetError::Failed {
                    command: line,
                    status: "exit status: 2".into(),
                    stderr: "Error: Unknown device type.".into(),
                });
            }
            Ok(if line.starts_with("tc -j qdisc show") {
                // 200 Mbit/s as tc stores it, in bytes per second.
                r#"[{"kind":"tbf","handle":"8001:","root":true,"options":{"rate":25000000,"burst":250000,"lat":50000}}]"#.into()
            } else if line.starts_with("tc -j filter show") {
                format!(
                    r#"[{{"parent":"ffff:","kind":"u32"}},{{"parent":"ffff:","kind":"u32","options":{{"fh":"800::800","actions":[{{"order":1,"kind":"mirred","mirred_action":"redirect","direction":"egress","to_dev":"{}"}}]}}}}]"#,
                    self.redirect_to.unwrap_or("nbi42x0")
                )
            } else {
                String::new()
            })
        }
    }

    #[test]
    fn a_tap_is_shaped_both_ways_read_back_and_its_ifb_removed() {
        let fake = Arc::new(Fake::default());
        let shaped = ShapedTap::shape(fake.clone(), "isolabvm7", &ifb_name(42, 0), 200).unwrap();
        assert_eq!(shaped.rate(), 200.0);
        assert_eq!(
            shaped.describe(),
            "tap isolabvm7 shaped to 200 Mbit/s each way (tbf on its egress; its ingress redirected to nbi42x0 with the same tbf)"
        );
        drop(shaped);
        let log = fake.log.lock().unwrap().clone();
        assert_eq!(
            log[..6],
            [
                "ip link add nbi42x0 type ifb",
                "ip link set nbi42x0 up",
                "tc qdisc replace dev isolabvm7 root tbf rate 200mbit burst 250000 latency 50ms",
                "tc qdisc add dev isolabvm7 handle ffff: ingress",
                "tc filter add dev isolabvm7 parent ffff: protocol all u32 match u32 0 0 action mirred egress redirect dev nbi42x0",
                "tc qdisc replace dev nbi42x0 root tbf rate 200mbit burst 250000 latency 50ms",
            ]
        );
        assert_eq!(log.last().unwrap(), "ip link del nbi42x0");
    }

    #[test]
    fn a_failed_or_unverified_shaping_removes_its_ifb() {
        let fake = Arc::new(Fake {
            fail_on: Some("ingress"),
            ..Fake::default()
        });
        let e = ShapedTap::shape(fake.clone(), "isolabvm7", "nbi42x0", 200).unwrap_err();
        assert!(e.to_string().contains("Unknown device type"), "{e}");
        assert_eq!(
            fake.log.lock().unwrap().last().unwrap(),
            "ip link del nbi42x0"
        );
        // The kernel lists another redirect than the one asked for.
        let fake = Arc::new(Fake {
            redirect_to: Some("eth9"),
            ..Fake::default()
        });
        let e = ShapedTap::shape(fake.clone(), "isolabvm7", "nbi42x0", 200).unwrap_err();
        assert!(e.to_string().contains("no redirect"), "{e}");
        assert_eq!(
            fake.log.lock().unwrap().last().unwrap(),
            "ip link del nbi42x0"
        );
        // An IFB that could not be made is not deleted (it may be another's).
        let fake = Arc::new(Fake {
            fail_on: Some("type ifb"),
            ..Fake::default()
        });
        assert!(ShapedTap::shape(fake.clone(), "isolabvm7", "nbi42x0", 200).is_err());
        assert!(!fake
            .log
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.starts_with("ip link del")));
    }

    #[test]
    fn ifb_names_fit_the_kernel_and_gc_finds_those_of_dead_processes() {
        assert!(ifb_name(4_194_304, 127).len() <= 15);
        let dir = tempfile::tempdir().unwrap();
        for n in ["nbi10x0", "nbi10x1", "nbi11x0", "nbi12", "eth0", "nbixx0"] {
            std::fs::write(dir.path().join(n), "").unwrap();
        }
        assert_eq!(
            stale_ifbs(dir.path(), |pid| pid == 11),
            ["nbi10x0", "nbi10x1"]
        );
        assert!(stale_ifbs(&dir.path().join("missing"), |_| false).is_empty());
    }
}
