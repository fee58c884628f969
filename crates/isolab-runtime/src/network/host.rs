//! Every effect the network module has on the host, behind one trait so the
//! attach/detach logic can be tested with a fake.

use std::io::Write;
use std::os::fd::OwnedFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::{Deserialize, Serialize};

use super::cni::{plugin_error, PluginRequest};
use super::config::Ipv4Subnet;
use super::{link, tap, NetworkError};

/// Identity of a network namespace (device and inode of its nsfs file), used
/// to tell whether a `/proc/<pid>/ns/net` path still names the namespace we
/// attached, and not one of a process that reused the pid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetnsId {
    /// `st_dev`.
    pub dev: u64,
    /// `st_ino`.
    pub ino: u64,
}

/// The host effects of the network module.
pub trait NetHost: Send + Sync {
    /// Executes a CNI plugin; returns its stdout when it exits with 0.
    fn run_plugin(&self, req: &PluginRequest) -> Result<Vec<u8>, NetworkError>;
    /// Runs `iptables -w ARGS`; a non-zero exit is [`NetworkError::Iptables`]
    /// (code 1 means "no such rule or chain" for -C/-D/-F/-X).
    fn iptables(&self, args: &[String]) -> Result<(), NetworkError>;
    /// Number of rules in `table`/`chain`, `None` when the chain does not exist.
    fn chain_rule_count(&self, table: &str, chain: &str) -> Result<Option<usize>, NetworkError>;
    /// The identity of the namespace at `path`, `None` when it is gone.
    fn netns_identity(&self, path: &Path) -> Option<NetnsId>;
    /// Brings `lo` up inside the namespace at `netns`.
    fn loopback_up_in(&self, netns: &Path) -> Result<(), NetworkError>;
    /// The bridge the host link `name` is enslaved to, if the link exists.
    fn link_master(&self, name: &str) -> Option<String>;
    /// Whether the host link `name` exists.
    fn link_exists(&self, name: &str) -> bool;
    /// Deletes the host link `name`; `false` when it did not exist.
    fn delete_link(&self, name: &str) -> Result<bool, NetworkError>;
    /// Makes sure the bridge `name` exists with the subnet's gateway address and
    /// is up, and that the host forwards IPv4; `true` when it was created.
    fn ensure_bridge(&self, name: &str, subnet: Ipv4Subnet) -> Result<bool, NetworkError>;
    /// Creates the non-persistent tap `name` on `bridge`, up; it lives as long as
    /// the returned descriptor and its copies.
    fn create_tap(&self, name: &str, bridge: &str) -> Result<OwnedFd, NetworkError>;
}

/// The real host: plugins from a directory, `iptables` from `PATH`, the
/// kernel for the rest.
#[derive(Debug, Clone)]
pub struct SystemHost {
    plugin_dir: PathBuf,
}

/// Where Debian's `containernetworking-plugins` installs the plugins.
pub const DEFAULT_PLUGIN_DIR: &str = "/usr/lib/cni";

impl SystemHost {
    /// A host whose CNI plugins live in `plugin_dir`.
    pub fn new(plugin_dir: impl Into<PathBuf>) -> Self {
        SystemHost {
            plugin_dir: plugin_dir.into(),
        }
    }

    /// The plugin directory.
    pub fn plugin_dir(&self) -> &Path {
        &self.plugin_dir
    }
}

impl Default for SystemHost {
    fn default() -> Self {
        SystemHost::new(DEFAULT_PLUGIN_DIR)
    }
}

/// `PATH` for plugins (portmap runs `iptables`); fixed so the caller's
/// environment cannot change what runs as root.
const PLUGIN_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

impl NetHost for SystemHost {
    fn run_plugin(&self, req: &PluginRequest) -> Result<Vec<u8>, NetworkError> {
        let path = self.plugin_dir.join(&req.plugin);
        if !path.is_file() {
            return Err(NetworkError::PluginMissing { path });
        }
        let spawn_err = |source| NetworkError::PluginSpawn {
            path: path.clone(),
            source,
        };
        let stdin =
            serde_json::to_vec(&req.config).map_err(|e| spawn_err(std::io::Error::other(e)))?;
        let mut child = Command::new(&path)
            .env_clear()
            .env("PATH", PLUGIN_PATH)
            .env("CNI_COMMAND", req.command.as_str())
            .env("CNI_CONTAINERID", &req.container_id)
            .env("CNI_NETNS", req.netns.as_deref().unwrap_or(Path::new("")))
            .env("CNI_IFNAME", &req.ifname)
            .env("CNI_PATH", &self.plugin_dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(spawn_err)?;
        if let Some(mut pipe) = child.stdin.take() {
            // The config is a few hundred bytes, below the pipe buffer, so
            // writing before reading cannot deadlock.
            pipe.write_all(&stdin).map_err(spawn_err)?;
        }
        let out = child.wait_with_output().map_err(spawn_err)?;
        if out.status.success() {
            Ok(out.stdout)
        } else {
            Err(plugin_error(req, &out.stdout, &out.stderr))
        }
    }

    fn iptables(&self, args: &[String]) -> Result<(), NetworkError> {
        let out = Command::new("iptables")
            .arg("-w")
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|source| NetworkError::IptablesSpawn {
                args: args.join(" "),
                source,
            })?;
        if out.status.success() {
            Ok(())
        } else {
            Err(NetworkError::Iptables {
                args: args.join(" "),
                code: out.status.code(),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            })
        }
    }

    fn chain_rule_count(&self, table: &str, chain: &str) -> Result<Option<usize>, NetworkError> {
        let args = ["-w", "-t", table, "-S", chain];
        let out = Command::new("iptables")
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|source| NetworkError::IptablesSpawn {
                args: args.join(" "),
                source,
            })?;
        match out.status.code() {
            Some(0) => Ok(Some(
                String::from_utf8_lossy(&out.stdout)
                    .lines()
                    .filter(|l| l.starts_with("-A "))
                    .count(),
            )),
            Some(1) => Ok(None),
            code => Err(NetworkError::Iptables {
                args: args.join(" "),
                code,
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            }),
        }
    }

    fn netns_identity(&self, path: &Path) -> Option<NetnsId> {
        let meta = std::fs::metadata(path).ok()?;
        Some(NetnsId {
            dev: meta.dev(),
            ino: meta.ino(),
        })
    }

    fn loopback_up_in(&self, netns: &Path) -> Result<(), NetworkError> {
        link::in_netns(netns, link::loopback_up)
    }

    fn link_master(&self, name: &str) -> Option<String> {
        link::link_master(name)
    }

    fn link_exists(&self, name: &str) -> bool {
        link::link_exists(name)
    }

    fn delete_link(&self, name: &str) -> Result<bool, NetworkError> {
        link::delete_link(name)
    }

    fn ensure_bridge(&self, name: &str, subnet: Ipv4Subnet) -> Result<bool, NetworkError> {
        tap::ensure_bridge(name, subnet)
    }

    fn create_tap(&self, name: &str, bridge: &str) -> Result<OwnedFd, NetworkError> {
        tap::create_tap(name, bridge)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::network::cni::{CniCommand, CONTAINER_IFNAME};

    #[test]
    fn a_missing_plugin_says_what_to_install() {
        let host = SystemHost::new("/nonexistent/cni");
        let req = PluginRequest {
            plugin: "bridge".into(),
            command: CniCommand::Add,
            container_id: "c1".into(),
            netns: None,
            ifname: CONTAINER_IFNAME.into(),
            config: serde_json::Value::Null,
        };
        let e = host.run_plugin(&req).unwrap_err();
        assert!(e.to_string().contains("containernetworking-plugins"), "{e}");
    }

    #[test]
    fn netns_identity_of_own_namespace_and_of_nothing() {
        let host = SystemHost::default();
        assert!(host
            .netns_identity(Path::new("/proc/self/ns/net"))
            .is_some());
        assert!(host.netns_identity(Path::new("/nonexistent")).is_none());
    }
}
