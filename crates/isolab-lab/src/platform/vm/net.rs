//! A VM's place on isolab's bridge: the tap and leased address of a run or a
//! service ([`VmNet`]), and gc's choice of the taps of dead experiments.

use std::net::Ipv4Addr;
use std::sync::Arc;

use isolab_runtime::network::{BridgeConfig, Networking};

use super::super::{Job, PlatformError};

/// The id of `job`'s VM on the bridge network (its lease's owner): the container
/// id the engines would give it, so that gc finds it by the dead experiment's
/// prefix.
pub(super) fn vm_id(job: &Job) -> Result<isolab_runtime::ContainerId, PlatformError> {
    Ok(super::super::container_id(
        isolab_engines::ID_PREFIX,
        &job.name,
    )?)
}

/// A VM's place on isolab's bridge (the runtime's `bridge` network): a tap and a
/// leased address. [`VmNet::release`] (or dropping it) closes its descriptor of
/// the tap and releases the lease; the tap goes with the last descriptor, QEMU's,
/// so the caller drops its copies of [`VmNet::guest`] first.
pub(super) struct VmNet {
    id: isolab_runtime::ContainerId,
    bridge: BridgeConfig,
    guest: Option<isolab_vm::GuestNetwork>,
    tap: String,
    released: bool,
}

impl VmNet {
    /// Attaches the VM of `job` to the bridge.
    pub(super) fn attach(job: &Job) -> Result<VmNet, PlatformError> {
        let id = vm_id(job)?;
        let bridge = BridgeConfig::default();
        let att = Networking::system().attach_tap(&id, &bridge)?;
        Ok(VmNet {
            guest: Some(isolab_vm::GuestNetwork {
                tap: Arc::new(att.fd),
                ip: att.ip,
                prefix: att.prefix,
                gateway: att.gateway,
                mac: att.mac,
            }),
            tap: att.tap,
            id,
            bridge,
            released: false,
        })
    }

    /// The guest's network, for its [`VmConfig`].
    pub(super) fn guest(&self) -> Option<isolab_vm::GuestNetwork> {
        self.guest.clone()
    }

    /// The tap's name, in the host's namespace.
    pub(super) fn tap(&self) -> &str {
        &self.tap
    }

    /// The guest's address.
    pub(super) fn ip(&self) -> Option<Ipv4Addr> {
        self.guest.as_ref().map(|g| g.ip)
    }

    /// A note for the run: the guest's address and tap.
    pub(super) fn note(&self) -> String {
        match &self.guest {
            Some(g) => format!(
                "network: the guest's eth0 is {}/{} (virtio-net on tap {} of bridge {}); it reaches the host at {}",
                g.ip, g.prefix, self.tap, self.bridge.bridge, g.gateway
            ),
            None => "network: released".into(),
        }
    }

    /// Closes the tap and releases the address.
    pub(super) fn release(mut self) -> Result<(), PlatformError> {
        self.released = true;
        self.guest = None;
        Networking::system().detach_tap(&self.id, &self.bridge)?;
        Ok(())
    }
}

impl Drop for VmNet {
    fn drop(&mut self) {
        if !self.released {
            self.guest = None;
            if let Err(e) = Networking::system().detach_tap(&self.id, &self.bridge) {
                eprintln!("warning: releasing the network of VM {}: {e}", self.id);
            }
        }
    }
}

/// The recorded taps (bridge, VM id) of VMs, or attachments (bridge, id), whose
/// experiment died: ids that start with one of `prefixes`.
pub(super) fn dead_taps(taps: &[(String, String)], prefixes: &[String]) -> Vec<(String, String)> {
    taps.iter()
        .filter(|(_, id)| prefixes.iter().any(|p| id.starts_with(p.as_str())))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gc_collects_the_taps_of_dead_experiments_only() {
        let taps = [
            ("isolab0".to_owned(), "isolab-exp3-pid42-c0-r1".to_owned()),
            ("isolab0".to_owned(), "isolab-exp3-pid4-c0-r1".to_owned()),
            (
                "isolab0".to_owned(),
                "isolab-exp4-pid43-c1-r2-db".to_owned(),
            ),
        ];
        let dead = dead_taps(
            &taps,
            &[
                "isolab-exp3-pid42-".to_owned(),
                "isolab-exp4-pid43-".to_owned(),
            ],
        );
        assert_eq!(dead, [taps[0].clone(), taps[2].clone()]);
        assert!(dead_taps(&taps, &[]).is_empty());
    }
}
