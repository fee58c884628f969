//! The one error type of the network module.

use std::path::PathBuf;

/// What went wrong while setting up or tearing down container networking.
///
/// Every variant names the object it failed on and, where there is one, what
/// to do about it.
#[derive(Debug, thiserror::Error)]
pub enum NetworkError {
    /// The bridge name is not a valid Linux interface name.
    #[error("invalid bridge name {name:?}: {reason}")]
    InvalidBridgeName {
        /// The rejected name.
        name: String,
        /// Why it was rejected.
        reason: &'static str,
    },
    /// The subnet is not an IPv4 CIDR the allocator can use.
    #[error(
        "invalid subnet {subnet:?}: {reason} (expected an IPv4 network such as 10.213.0.0/24)"
    )]
    InvalidSubnet {
        /// The rejected subnet.
        subnet: String,
        /// Why it was rejected.
        reason: String,
    },
    /// A `--publish` value could not be parsed.
    #[error(
        "invalid port mapping {spec:?}: {reason} (expected HOST:CONTAINER or HOST:CONTAINER/udp)"
    )]
    InvalidPublish {
        /// The rejected value.
        spec: String,
        /// Why it was rejected.
        reason: String,
    },
    /// A CNI plugin binary is not installed.
    #[error("CNI plugin {path} not found: install Debian's containernetworking-plugins or set the plugin directory")]
    PluginMissing {
        /// Where the plugin was expected.
        path: PathBuf,
    },
    /// A CNI plugin could not be started or talked to.
    #[error("could not run CNI plugin {path}")]
    PluginSpawn {
        /// The plugin binary.
        path: PathBuf,
        /// The underlying I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A CNI plugin reported an error.
    #[error("CNI plugin {plugin} {command} for container {container_id} failed (code {code}): {msg}{details}")]
    Plugin {
        /// Plugin type (`bridge`, `portmap`, …).
        plugin: String,
        /// `ADD` or `DEL`.
        command: &'static str,
        /// The container the call was for.
        container_id: String,
        /// CNI error code (0 when the plugin printed no error object).
        code: u32,
        /// The plugin's message.
        msg: String,
        /// The plugin's details, prefixed with "; " when present.
        details: String,
    },
    /// A CNI plugin printed something that is not a CNI result.
    #[error("CNI plugin {plugin} {command} printed an unreadable result: {reason}")]
    PluginResult {
        /// Plugin type.
        plugin: String,
        /// `ADD` or `DEL`.
        command: &'static str,
        /// What was wrong with it.
        reason: String,
    },
    /// The container's network namespace could not be used.
    #[error("network namespace {path}: {op} failed")]
    Netns {
        /// The namespace path.
        path: PathBuf,
        /// The operation (`open`, `setns`, …).
        op: &'static str,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Reading or writing the network state under the state directory failed.
    #[error("network state {path}: {op} failed (is the state directory writable?)")]
    State {
        /// The file or directory.
        path: PathBuf,
        /// The operation.
        op: &'static str,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A network state file holds something else than an attachment record.
    #[error("network state file {path} is corrupt; remove it and run gc again")]
    StateFormat {
        /// The file.
        path: PathBuf,
        /// The parse error.
        #[source]
        source: serde_json::Error,
    },
    /// `iptables` could not be run.
    #[error("could not run `iptables {args}`: is the iptables package installed?")]
    IptablesSpawn {
        /// The arguments.
        args: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// `iptables` failed.
    #[error("`iptables {args}` failed with exit code {code:?}: {stderr}")]
    Iptables {
        /// The arguments.
        args: String,
        /// Its exit code (1: no such rule or chain; `None`: killed by a signal).
        code: Option<i32>,
        /// What it printed on stderr.
        stderr: String,
    },
    /// An interface operation (ioctl or rtnetlink) failed.
    #[error("interface {name}: {op} failed")]
    Link {
        /// The interface.
        name: String,
        /// The operation.
        op: &'static str,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The bridge still has containers attached.
    #[error("bridge {bridge} still has {} lease(s) ({}): stop those containers or run gc first", leases.len(), leases.join(", "))]
    BridgeInUse {
        /// The bridge.
        bridge: String,
        /// The addresses still leased.
        leases: Vec<String>,
    },
}
