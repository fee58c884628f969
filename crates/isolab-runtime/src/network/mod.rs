//! Container networking: `none`, `host` and `bridge`, with guaranteed teardown.
//!
//! # How
//!
//! The bridge mode runs Debian's CNI plugins (`containernetworking-plugins`,
//! `/usr/lib/cni`) the way a CNI runtime does: each plugin is executed with
//! `CNI_COMMAND=ADD|DEL`, `CNI_CONTAINERID`, `CNI_NETNS`, `CNI_IFNAME=eth0`,
//! `CNI_PATH` and the network configuration (CNI 1.0.0) on stdin, and prints
//! a JSON result. The chain is
//!
//! 1. `bridge` with `host-local` IPAM: creates the bridge (default
//!    `isolab0`, `isGateway`, so it holds the subnet's first address and IPv4
//!    forwarding is switched on), a veth pair with `eth0` in the container,
//!    an address from a file-locked allocator (leases under
//!    `/run/isolab/cni/ipam/<bridge>/`), and the default route;
//! 2. `portmap` when ports are published: DNAT chains per container (needs
//!    iptables);
//!
//! plus, done here: one egress `MASQUERADE` rule per bridge (see
//! `iptables.rs` for why not the plugin's per-container `ipMasq`), and `lo`
//! up inside the namespace. DEL runs in reverse order. A record of every
//! attachment is written *before* the first plugin runs
//! (`/run/isolab/cni/attachments/<bridge>/<id>.json`), so [`detach`] and
//! [`cleanup_leftovers`] know what to undo even after a crash, and a
//! namespace path is only entered if it is still the namespace that was
//! attached (a pid can be reused).
//!
//! Why CNI and not our own netlink code: the plugins are packaged, tested
//! against the kernel's corner cases (veth naming races, bridge port state,
//! hairpin, route_localnet for published ports on 127.0.0.1) and give us the
//! file-locked allocator and the port mapping for free; the price is one
//! process per plugin per container (a few milliseconds each). The only
//! netlink we speak ourselves is RTM_DELLINK (for a stray veth and the bridge).
//!
//! # Virtual machines
//!
//! [`Networking::attach_tap`] puts a VM on the same bridge: the bridge is made
//! by ioctl when no container made it first (with the gateway address the
//! plugin would give it), the guest's address is leased from the same
//! `host-local` allocator (owner: the VM's id and `eth0`), and a
//! non-persistent tap named [`TAP_PREFIX`] + the address's host number is put
//! on the bridge, its descriptor handed to QEMU. The record is the containers'
//! kind, with the tap as its host interface, so [`Networking::detach_tap`] and
//! gc ([`Networking::recorded_taps`]) release the lease after a crash; the tap
//! itself goes with QEMU's descriptor.
//!
//! # What stays
//!
//! Like `docker0`, the bridge, its masquerade rule and portmap's shared
//! `CNI-HOSTPORT-*` chains stay after the last container, and so does
//! `net.ipv4.ip_forward = 1` (set by the bridge plugin). [`remove_bridge`]
//! removes all but the sysctl when no container is attached.
//!
//! # Use
//!
//! The runtime's parent calls [`attach`] once the child's network namespace
//! exists (the child waits), [`detach`] after the container exited, and
//! `gc` calls [`cleanup_leftovers`] for containers whose runtime was killed.
//! [`Networking`] is the same with an explicit [`NetHost`] and state
//! directory (tests use a fake host or a temporary state directory).

mod cni;
mod config;
mod error;
mod host;
mod iptables;
mod link;
mod manager;
mod publish;
mod state;
mod tap;

#[cfg(test)]
mod privileged_tests;

use std::path::Path;

use crate::id::ContainerId;

pub use cni::{CniCommand, CniResult, PluginRequest};
pub use config::{BridgeConfig, Ipv4Subnet, NetworkMode, DEFAULT_BRIDGE, DEFAULT_SUBNET};
pub use error::NetworkError;
pub use host::{NetHost, NetnsId, SystemHost, DEFAULT_PLUGIN_DIR};
pub use manager::{Attachment, Networking, TapAttachment, DEFAULT_STATE_DIR};
pub use publish::{Proto, Publish};
pub use tap::{guest_mac, tap_name, TAP_PREFIX};

/// Connects the container whose network namespace is at `netns`
/// (`/proc/<pid>/ns/net` or a bind mount of it); see [`Networking::attach`].
/// Returns the address for the bridge mode, `None` otherwise.
pub fn attach(
    container_id: &ContainerId,
    netns: &Path,
    mode: &NetworkMode,
) -> Result<Option<Attachment>, NetworkError> {
    Networking::system().attach(container_id, netns, mode)
}

/// Undoes [`attach`] (idempotent); see [`Networking::detach`].
pub fn detach(
    container_id: &ContainerId,
    netns: &Path,
    mode: &NetworkMode,
) -> Result<(), NetworkError> {
    Networking::system().detach(container_id, netns, mode)
}

/// Brings `lo` up in the current thread's network namespace (for `none`,
/// called in the container's child): ioctl SIOCSIFFLAGS, no tools.
/// [`attach`] with [`NetworkMode::None`] does the same from the parent.
pub fn loopback_up() -> Result<(), NetworkError> {
    link::loopback_up()
}

/// For gc after a killed runtime: releases the lease, removes the veth and
/// the port mappings of `container_id` although its namespace is gone.
/// Returns a line per thing removed.
pub fn cleanup_leftovers(
    container_id: &ContainerId,
    mode: &NetworkMode,
) -> Result<Vec<String>, NetworkError> {
    Networking::system().cleanup_leftovers(container_id, mode)
}

/// Removes the bridge, its masquerade rule, its allocator state, and
/// portmap's shared chains if unused (for `gc --all`); refuses while
/// containers are attached. Returns a line per thing removed.
pub fn remove_bridge(config: &BridgeConfig) -> Result<Vec<String>, NetworkError> {
    Networking::system().remove_bridge(config)
}

/// Every (bridge, container id) with an attachment record under the default
/// state directory: candidates for [`cleanup_leftovers`] in `gc --all`.
pub fn recorded_attachments() -> Result<Vec<(String, String)>, NetworkError> {
    Networking::system().recorded_attachments()
}
