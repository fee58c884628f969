//! What the guest and the host agree on, below the agent and the inner engines that
//! write the guest's scripts: where isolab's things live in the guest, the guest's
//! default `PATH`, shell quoting, and the guest's network interface.

use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

/// Where the agent, busybox and the control share live in the guest (a tmpfs under `/run`).
pub const GUEST_DIR: &str = "/run/isolab-vm";
/// The guest path of the read-only bind mount of the guest's root, the default image of the
/// container in `vm+isolab`.
pub const GUEST_IMAGE: &str = "/run/isolab-vm/image";
/// `PATH` of the guest command when the caller gives none.
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/// The `PATH` of `env`, or [`DEFAULT_PATH`].
pub(crate) fn env_path(env: &[(String, String)]) -> &str {
    env.iter()
        .find(|(k, _)| k == "PATH")
        .map_or(DEFAULT_PATH, |(_, v)| v.as_str())
}

/// Whether `flags` hold `flag`, as `--flag VALUE` or `--flag=VALUE`.
pub(crate) fn has_flag(flags: &[String], flag: &str) -> bool {
    flags
        .iter()
        .any(|f| f == flag || f.starts_with(&format!("{flag}=")))
}

pub use isolab_tools::shell_quote;

/// The guest's network interface: a tap on the host (already on a bridge, e.g.
/// isolab-runtime's [`TapAttachment`](isolab_runtime::network::TapAttachment)) that QEMU
/// inherits as a descriptor, and the address the guest gives its `eth0`.
#[derive(Debug, Clone)]
pub struct GuestNetwork {
    /// The tap's descriptor; it must stay open until the VM is up (the caller keeps it until
    /// the VM is gone, so that the tap goes with the last copy).
    pub tap: Arc<OwnedFd>,
    /// The guest's address.
    pub ip: Ipv4Addr,
    /// Its prefix length.
    pub prefix: u8,
    /// The default gateway (the host's address on the bridge).
    pub gateway: Ipv4Addr,
    /// The MAC address of the guest's interface.
    pub mac: String,
}

impl PartialEq for GuestNetwork {
    fn eq(&self, other: &Self) -> bool {
        self.tap.as_raw_fd() == other.tap.as_raw_fd()
            && (self.ip, self.prefix, self.gateway) == (other.ip, other.prefix, other.gateway)
            && self.mac == other.mac
    }
}

impl Eq for GuestNetwork {}
