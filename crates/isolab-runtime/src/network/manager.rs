//! Attach, detach and clean up: the CNI chain `bridge` → `portmap`, run by
//! hand (ADD in order with `prevResult`, DEL in reverse), with a record
//! written before the first plugin so teardown always knows what to undo.

use std::net::{IpAddr, Ipv4Addr};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::cni::{self, CniCommand, CniResult, PluginRequest, CONTAINER_IFNAME};
use super::config::Ipv4Subnet;
use super::host::{NetHost, SystemHost};
use super::state::{AttachmentRecord, StateDir};
use super::{iptables, BridgeConfig, NetworkError, NetworkMode, Publish};
use crate::id::ContainerId;

/// Default state directory.
pub const DEFAULT_STATE_DIR: &str = "/run/isolab/cni";

/// How long teardown waits for the kernel to destroy a veth whose namespace
/// just died (namespace cleanup runs asynchronously) before deleting it.
const VETH_GONE_WAIT: Duration = Duration::from_millis(500);

/// A container's place on the bridge network, as attach left it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attachment {
    /// The container's address.
    pub ip: IpAddr,
    /// Its default gateway (the bridge's address).
    pub gateway: IpAddr,
    /// Prefix length of `ip`.
    pub prefix: u8,
    /// The bridge.
    pub bridge: String,
    /// Host end of the veth pair.
    pub host_veth: Option<String>,
    /// Interface name inside the container (`eth0`).
    pub container_ifname: String,
    /// MAC address of the container's interface.
    pub mac: Option<String>,
    /// Published ports.
    pub publish: Vec<Publish>,
}

/// A virtual machine's place on the bridge network, as [`Networking::attach_tap`]
/// left it: a tap on the bridge and the guest's address, leased from the same
/// allocator as the containers' (the lease names the VM's id and `eth0`, the
/// guest's interface).
#[derive(Debug)]
pub struct TapAttachment {
    /// The guest's address.
    pub ip: Ipv4Addr,
    /// Its default gateway: the bridge's address, where the guest reaches the host.
    pub gateway: Ipv4Addr,
    /// Prefix length of `ip`.
    pub prefix: u8,
    /// The bridge.
    pub bridge: String,
    /// The tap's name ([`super::tap_name`]).
    pub tap: String,
    /// The MAC address to give the guest's interface ([`super::guest_mac`]).
    pub mac: String,
    /// The tap's descriptor, for QEMU (`-netdev tap,fd=N`). The tap is
    /// non-persistent: it goes when this and every copy of it are closed.
    pub fd: OwnedFd,
}

/// The network namespace a tap lives in, as CNI_NETNS for the allocator (which
/// requires one for ADD but never enters it).
const HOST_NETNS: &str = "/proc/self/ns/net";

/// Container networking with explicit host effects and state directory.
/// The free functions of this module use [`Networking::system`].
#[derive(Debug, Clone)]
pub struct Networking<H: NetHost = SystemHost> {
    host: H,
    state: StateDir,
}

impl Networking<SystemHost> {
    /// Debian's plugins in `/usr/lib/cni`, state in `/run/isolab/cni`.
    pub fn system() -> Self {
        Networking::new(SystemHost::default(), DEFAULT_STATE_DIR)
    }
}

impl<H: NetHost> Networking<H> {
    /// Networking through `host`, keeping its state under `state_dir`.
    pub fn new(host: H, state_dir: impl Into<PathBuf>) -> Self {
        Networking {
            host,
            state: StateDir::new(state_dir),
        }
    }

    /// The state directory.
    pub fn state_dir(&self) -> &Path {
        self.state.root()
    }

    /// Connects the container whose network namespace is `netns`.
    ///
    /// `None`: brings `lo` up in `netns`. `Host`: nothing. `Bridge`: creates
    /// the bridge if needed, a veth pair with `eth0` inside, an address and a
    /// default route, the egress masquerade rule, port mappings, and `lo` up.
    /// On failure everything done so far is undone.
    pub fn attach(
        &self,
        container_id: &ContainerId,
        netns: &Path,
        mode: &NetworkMode,
    ) -> Result<Option<Attachment>, NetworkError> {
        let cfg = match mode {
            NetworkMode::Host => return Ok(None),
            NetworkMode::None => {
                self.host.loopback_up_in(netns)?;
                return Ok(None);
            }
            NetworkMode::Bridge(cfg) => cfg,
        };
        let container_id = container_id.as_str();
        let subnet = cfg.validate()?;
        let ns_id = self
            .host
            .netns_identity(netns)
            .ok_or_else(|| NetworkError::Netns {
                path: netns.to_owned(),
                op: "stat",
                source: std::io::Error::from(std::io::ErrorKind::NotFound),
            })?;
        // A record left by an earlier container with the same id (a crash
        // without gc): undo it first so its lease and rules do not leak.
        if let Some(stale) = self.state.read_record(&cfg.bridge, container_id)? {
            self.teardown(container_id, None, cfg, Some(stale))?;
        }
        let mut record = AttachmentRecord {
            container_id: container_id.to_owned(),
            bridge: cfg.bridge.clone(),
            subnet: cfg.subnet.clone(),
            publish: cfg.publish.clone(),
            netns: Some(ns_id),
            result: None,
        };
        self.state.write_record(&record)?;
        match self.attach_bridge(&mut record, netns, cfg, subnet) {
            Ok(att) => Ok(Some(att)),
            Err(e) => {
                // Best effort: the original error is the one worth reporting.
                let _ = self.release(container_id, Some(netns), cfg, Some(record));
                Err(e)
            }
        }
    }

    fn attach_bridge(
        &self,
        record: &mut AttachmentRecord,
        netns: &Path,
        cfg: &BridgeConfig,
        subnet: Ipv4Subnet,
    ) -> Result<Attachment, NetworkError> {
        {
            let _lock = self.state.lock_bridge(&cfg.bridge)?;
            iptables::ensure_masquerade(&self.host, &cfg.bridge, subnet)?;
        }
        let bridge_conf = cni::bridge_config(&cfg.bridge, subnet, &self.state.ipam_dir());
        let out = self.host.run_plugin(&self.request(
            "bridge",
            CniCommand::Add,
            record,
            Some(netns),
            bridge_conf,
        ))?;
        let result = cni::parse_result("bridge", &out)?;
        record.result = Some(result.clone());
        self.state.write_record(record)?;
        let (ip, prefix, gateway) = cni::ipv4_of(&result, "bridge")?;
        if let IpAddr::V4(v4) = ip {
            if !subnet.contains(v4) {
                return Err(NetworkError::PluginResult {
                    plugin: "bridge".to_owned(),
                    command: CniCommand::Add.as_str(),
                    reason: format!("address {ip} lies outside the subnet {subnet}"),
                });
            }
        }
        if !cfg.publish.is_empty() {
            let conf = cni::portmap_config(&cfg.bridge, &cfg.publish, Some(&result));
            self.host.run_plugin(&self.request(
                "portmap",
                CniCommand::Add,
                record,
                Some(netns),
                conf,
            ))?;
        }
        self.host.loopback_up_in(netns)?;
        let container_if = result.interfaces.iter().find(|i| i.sandbox.is_some());
        Ok(Attachment {
            ip,
            gateway,
            prefix,
            bridge: cfg.bridge.clone(),
            host_veth: host_veth_name(&result, &cfg.bridge),
            container_ifname: container_if
                .map_or_else(|| CONTAINER_IFNAME.to_owned(), |i| i.name.clone()),
            mac: container_if.and_then(|i| i.mac.clone()),
            publish: cfg.publish.clone(),
        })
    }

    fn request(
        &self,
        plugin: &str,
        command: CniCommand,
        record: &AttachmentRecord,
        netns: Option<&Path>,
        config: serde_json::Value,
    ) -> PluginRequest {
        PluginRequest {
            plugin: plugin.to_owned(),
            command,
            container_id: record.container_id.clone(),
            netns: netns.map(Path::to_owned),
            ifname: CONTAINER_IFNAME.to_owned(),
            config,
        }
    }

    /// Puts a virtual machine on the bridge of `cfg`: makes sure the bridge
    /// exists (with its gateway address, as the CNI bridge plugin makes it), adds
    /// the egress masquerade rule, leases an address for `vm_id` from the
    /// containers' allocator (`host-local`), and creates a non-persistent tap named
    /// after the address ([`super::tap_name`]) on the bridge. Published ports are
    /// not supported (the guest's address is reachable from the host directly).
    /// An attachment record is written first, so [`Self::detach_tap`] and
    /// [`Self::cleanup_leftovers`] release the lease after any failure or crash;
    /// on failure everything done so far is undone.
    pub fn attach_tap(
        &self,
        vm_id: &ContainerId,
        cfg: &BridgeConfig,
    ) -> Result<TapAttachment, NetworkError> {
        let id = vm_id.as_str();
        let subnet = cfg.validate()?;
        if let Some(stale) = self.state.read_record(&cfg.bridge, id)? {
            self.teardown(id, None, cfg, Some(stale))?;
        }
        let mut record = AttachmentRecord {
            container_id: id.to_owned(),
            bridge: cfg.bridge.clone(),
            subnet: cfg.subnet.clone(),
            publish: Vec::new(),
            netns: None,
            result: None,
        };
        self.state.write_record(&record)?;
        match self.attach_tap_inner(&mut record, cfg, subnet) {
            Ok(att) => Ok(att),
            Err(e) => {
                // Best effort: the original error is the one worth reporting.
                let _ = self.release(id, None, cfg, Some(record));
                Err(e)
            }
        }
    }

    fn attach_tap_inner(
        &self,
        record: &mut AttachmentRecord,
        cfg: &BridgeConfig,
        subnet: Ipv4Subnet,
    ) -> Result<TapAttachment, NetworkError> {
        {
            let _lock = self.state.lock_bridge(&cfg.bridge)?;
            self.host.ensure_bridge(&cfg.bridge, subnet)?;
            iptables::ensure_masquerade(&self.host, &cfg.bridge, subnet)?;
        }
        let bridge_conf = cni::bridge_config(&cfg.bridge, subnet, &self.state.ipam_dir());
        let ipam_conf = serde_json::json!({
            "cniVersion": cni::CNI_VERSION,
            "name": cfg.bridge,
            "ipam": bridge_conf["ipam"],
        });
        let out = self.host.run_plugin(&self.request(
            "host-local",
            CniCommand::Add,
            record,
            Some(Path::new(HOST_NETNS)),
            ipam_conf,
        ))?;
        let mut result = cni::parse_result("host-local", &out)?;
        let (ip, prefix, gateway) = cni::ipv4_of(&result, "host-local")?;
        let (IpAddr::V4(ip), IpAddr::V4(gateway)) = (ip, gateway) else {
            return Err(NetworkError::PluginResult {
                plugin: "host-local".to_owned(),
                command: CniCommand::Add.as_str(),
                reason: format!("address {ip} or gateway {gateway} is not IPv4"),
            });
        };
        if !subnet.contains(ip) {
            return Err(NetworkError::PluginResult {
                plugin: "host-local".to_owned(),
                command: CniCommand::Add.as_str(),
                reason: format!("address {ip} lies outside the subnet {subnet}"),
            });
        }
        let tap = super::tap_name(ip, subnet);
        // The tap as the host-side interface of the record, so that teardown
        // (and gc after a crash) removes it if it outlived its descriptors.
        result.interfaces = vec![
            cni::CniInterface {
                name: cfg.bridge.clone(),
                mac: None,
                sandbox: None,
            },
            cni::CniInterface {
                name: tap.clone(),
                mac: None,
                sandbox: None,
            },
        ];
        record.result = Some(result);
        self.state.write_record(record)?;
        let fd = self.host.create_tap(&tap, &cfg.bridge)?;
        Ok(TapAttachment {
            ip,
            gateway,
            prefix,
            bridge: cfg.bridge.clone(),
            mac: super::guest_mac(ip),
            tap,
            fd,
        })
    }

    /// Undoes [`Self::attach_tap`] once the VM is gone and the tap's descriptor
    /// closed: releases the lease, deletes the tap if it is still there, removes
    /// the record. Idempotent. Returns a line per thing removed.
    pub fn detach_tap(
        &self,
        vm_id: &ContainerId,
        cfg: &BridgeConfig,
    ) -> Result<Vec<String>, NetworkError> {
        cfg.validate()?;
        let id = vm_id.as_str();
        let record = self.state.read_record(&cfg.bridge, id)?;
        self.release(id, None, cfg, record)
    }

    /// The VM ids whose attachment record names a tap (a host interface named
    /// [`super::TAP_PREFIX`]…), with their bridge: what gc passes to
    /// [`Self::detach_tap`] for the VMs of dead experiments.
    pub fn recorded_taps(&self) -> Result<Vec<(String, String)>, NetworkError> {
        let mut out = Vec::new();
        for (bridge, id) in self.state.records()? {
            let Some(record) = self.state.read_record(&bridge, &id)? else {
                continue;
            };
            let is_tap = record
                .result
                .as_ref()
                .and_then(|r| host_veth_name(r, &bridge))
                .is_some_and(|name| name.starts_with(super::TAP_PREFIX));
            if is_tap {
                out.push((bridge, id));
            }
        }
        Ok(out)
    }

    /// Undoes [`Self::attach`]. Idempotent: a second call, or a call for a
    /// container that was never attached, finds nothing and succeeds. `netns`
    /// is only entered if it still names the namespace that was attached.
    pub fn detach(
        &self,
        container_id: &ContainerId,
        netns: &Path,
        mode: &NetworkMode,
    ) -> Result<(), NetworkError> {
        match mode {
            NetworkMode::None | NetworkMode::Host => Ok(()),
            NetworkMode::Bridge(cfg) => {
                let container_id = container_id.as_str();
                cfg.validate()?;
                let record = self.state.read_record(&cfg.bridge, container_id)?;
                self.release(container_id, Some(netns), cfg, record)
                    .map(|_| ())
            }
        }
    }

    /// Removes what a container left on the bridge network after its
    /// runtime was killed (its namespace is usually gone): the IPAM lease,
    /// the portmap rules, the host veth if it survived. Returns a line per
    /// thing removed.
    pub fn cleanup_leftovers(
        &self,
        container_id: &ContainerId,
        mode: &NetworkMode,
    ) -> Result<Vec<String>, NetworkError> {
        match mode {
            NetworkMode::None | NetworkMode::Host => Ok(Vec::new()),
            NetworkMode::Bridge(cfg) => {
                let container_id = container_id.as_str();
                cfg.validate()?;
                let record = self.state.read_record(&cfg.bridge, container_id)?;
                self.release(container_id, None, cfg, record)
            }
        }
    }

    /// Every (bridge, container id) with an attachment record: what
    /// `gc --all` should pass to [`Self::cleanup_leftovers`] (with
    /// `BridgeConfig { bridge, ..Default::default() }`: the record holds the
    /// subnet and ports, so only the bridge name of the mode matters).
    pub fn recorded_attachments(&self) -> Result<Vec<(String, String)>, NetworkError> {
        self.state.records()
    }

    /// Deletes the bridge, its masquerade rule and its state, and portmap's
    /// shared chains if no container on the host maps ports any more. Refuses
    /// while containers hold addresses on it. Returns a line per thing removed.
    pub fn remove_bridge(&self, cfg: &BridgeConfig) -> Result<Vec<String>, NetworkError> {
        let subnet = cfg.validate()?;
        let leases = self.state.leases(&cfg.bridge)?;
        if !leases.is_empty() {
            return Err(NetworkError::BridgeInUse {
                bridge: cfg.bridge.clone(),
                leases: leases
                    .iter()
                    .map(|(ip, id)| format!("{ip} ({id})"))
                    .collect(),
            });
        }
        let mut removed = self.remove_bridge_if_idle(&cfg.bridge, subnet)?;
        let _lock = self.state.lock_bridge(&cfg.bridge)?;
        removed.extend(self.state.remove_bridge_state(&cfg.bridge)?);
        Ok(removed)
    }

    /// The DEL chain in reverse ADD order, then the host veth, then the record.
    fn teardown(
        &self,
        container_id: &str,
        netns: Option<&Path>,
        mode_cfg: &BridgeConfig,
        record: Option<AttachmentRecord>,
    ) -> Result<Vec<String>, NetworkError> {
        let leased: Vec<IpAddr> = self
            .state
            .leases(&mode_cfg.bridge)?
            .into_iter()
            .filter(|(_, owner)| owner == container_id)
            .map(|(ip, _)| ip)
            .collect();
        let Some(record) = record.or_else(|| {
            // No record but a lease: the state was partly lost; rebuild from the mode.
            (!leased.is_empty()).then(|| AttachmentRecord {
                container_id: container_id.to_owned(),
                bridge: mode_cfg.bridge.clone(),
                subnet: mode_cfg.subnet.clone(),
                publish: mode_cfg.publish.clone(),
                netns: None,
                result: None,
            })
        }) else {
            return Ok(Vec::new());
        };
        let subnet = Ipv4Subnet::parse(&record.subnet)?;
        // Enter the namespace only if it is still the one we attached.
        let live_ns = match (netns, record.netns) {
            (Some(path), Some(id)) if self.host.netns_identity(path) == Some(id) => Some(path),
            _ => None,
        };
        let mut removed = Vec::new();
        if !record.publish.is_empty() {
            let conf = cni::portmap_config(&record.bridge, &record.publish, record.result.as_ref());
            self.host.run_plugin(&self.request(
                "portmap",
                CniCommand::Del,
                &record,
                live_ns,
                conf,
            ))?;
            removed.push(format!(
                "port mappings {} of {container_id}",
                record
                    .publish
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        let conf = cni::bridge_config(&record.bridge, subnet, &self.state.ipam_dir());
        self.host
            .run_plugin(&self.request("bridge", CniCommand::Del, &record, live_ns, conf))?;
        removed.extend(
            leased
                .iter()
                .map(|ip| format!("address {ip} on {}", record.bridge)),
        );
        if let Some(veth) = record
            .result
            .as_ref()
            .and_then(|r| host_veth_name(r, &record.bridge))
        {
            if self.remove_host_veth(&veth, &record.bridge)? {
                removed.push(format!("veth {veth}"));
            }
        }
        self.state.remove_record(&record.bridge, container_id)?;
        Ok(removed)
    }

    /// [`Self::teardown`], then the bridge if that was its last attachment: how an
    /// attachment ends (detach, gc, a failed attach). A stale record an attach replaces
    /// is torn down alone, since the attach is about to use the bridge.
    fn release(
        &self,
        container_id: &str,
        netns: Option<&Path>,
        mode_cfg: &BridgeConfig,
        record: Option<AttachmentRecord>,
    ) -> Result<Vec<String>, NetworkError> {
        // Nothing recorded: nothing ended (a second detach, gc of a clean id), so the
        // bridge is left as it is.
        let ended = record.is_some();
        let mut removed = self.teardown(container_id, netns, mode_cfg, record)?;
        if ended {
            removed.extend(self.remove_bridge_if_idle(&mode_cfg.bridge, mode_cfg.validate()?)?);
        }
        Ok(removed)
    }

    /// For gc: deletes the bridge of `cfg` if it exists and nothing is attached to it
    /// (one an older isolab left, which removed bridges only in `gc --all`). Returns a
    /// line per thing removed.
    pub fn remove_idle_bridge(&self, cfg: &BridgeConfig) -> Result<Vec<String>, NetworkError> {
        let subnet = cfg.validate()?;
        if !self.host.link_exists(&cfg.bridge) {
            return Ok(Vec::new());
        }
        self.remove_bridge_if_idle(&cfg.bridge, subnet)
    }

    /// Deletes `bridge`, its masquerade rule and portmap's shared chains (when no
    /// container maps ports any more) once nothing is attached to it: no lease and no
    /// attachment record, checked under the bridge's lock. An attacher writes its
    /// record before it takes the lock to make the bridge, so one on its way keeps the
    /// bridge, and one that comes later makes it again. The allocator's state stays
    /// (a later attachment continues it; `remove_bridge` removes it). Returns a line
    /// per thing removed.
    fn remove_bridge_if_idle(
        &self,
        bridge: &str,
        subnet: Ipv4Subnet,
    ) -> Result<Vec<String>, NetworkError> {
        let _lock = self.state.lock_bridge(bridge)?;
        let attached = self.state.records()?.iter().any(|(b, _)| b == bridge);
        if attached || !self.state.leases(bridge)?.is_empty() {
            return Ok(Vec::new());
        }
        let mut removed = Vec::new();
        if iptables::remove_masquerade(&self.host, bridge, subnet)? {
            removed.push(format!("iptables masquerade rule for {subnet} on {bridge}"));
        }
        if self.host.delete_link(bridge)? {
            removed.push(format!("bridge {bridge}"));
        }
        removed.extend(iptables::remove_idle_portmap_chains(&self.host)?);
        Ok(removed)
    }

    /// Waits briefly for a dying namespace to take the veth along, then
    /// deletes it if it is still there and still on our bridge.
    fn remove_host_veth(&self, veth: &str, bridge: &str) -> Result<bool, NetworkError> {
        let deadline = Instant::now() + VETH_GONE_WAIT;
        while self.host.link_exists(veth) {
            if Instant::now() >= deadline {
                if self.host.link_master(veth).as_deref() == Some(bridge) {
                    return self.host.delete_link(veth);
                }
                return Ok(false);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(false)
    }
}

/// The host-side veth in a bridge result: the interface without a sandbox
/// that is not the bridge.
fn host_veth_name(result: &CniResult, bridge: &str) -> Option<String> {
    result
        .interfaces
        .iter()
        .find(|i| i.sandbox.is_none() && i.name != bridge)
        .map(|i| i.name.clone())
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Mutex;

    use super::*;
    use crate::network::host::NetnsId;

    fn id(s: &str) -> ContainerId {
        s.parse().unwrap()
    }

    /// A host that records plugin and iptables calls, with a fake rule set
    /// and host-local writing lease files like the real one.
    #[derive(Default)]
    struct FakeHost {
        calls: Mutex<Vec<String>>,
        rules: Mutex<Vec<String>>,
        links: Mutex<HashMap<String, String>>,
        fail_portmap_add: bool,
        fail_tap: bool,
        ipam_dir: PathBuf,
    }

    impl NetHost for FakeHost {
        fn run_plugin(&self, req: &PluginRequest) -> Result<Vec<u8>, NetworkError> {
            let netns = req
                .netns
                .as_ref()
                .map_or(String::new(), |p| p.display().to_string());
            self.calls.lock().unwrap().push(format!(
                "{} {} {} ns={netns}",
                req.plugin,
                req.command.as_str(),
                req.container_id
            ));
            let lease_dir = self.ipam_dir.join(req.config["name"].as_str().unwrap());
            match (req.plugin.as_str(), req.command) {
                ("bridge", CniCommand::Add) => {
                    std::fs::create_dir_all(&lease_dir).unwrap();
                    std::fs::write(
                        lease_dir.join("10.213.0.2"),
                        format!("{}\r\neth0", req.container_id),
                    )
                    .unwrap();
                    self.links
                        .lock()
                        .unwrap()
                        .insert("vethabc".into(), "isolab0".into());
                    Ok(br#"{"cniVersion":"1.0.0","interfaces":[{"name":"isolab0"},{"name":"vethabc"},
                        {"name":"eth0","mac":"aa:bb:cc:dd:ee:ff","sandbox":"/x"}],
                        "ips":[{"interface":2,"address":"10.213.0.2/24","gateway":"10.213.0.1"}]}"#
                        .to_vec())
                }
                ("host-local", CniCommand::Add) => {
                    assert_eq!(req.ifname, "eth0", "the lease names the guest's interface");
                    assert!(req.netns.is_some(), "host-local's ADD needs CNI_NETNS");
                    std::fs::create_dir_all(&lease_dir).unwrap();
                    std::fs::write(
                        lease_dir.join("10.213.0.3"),
                        format!("{}\r\neth0", req.container_id),
                    )
                    .unwrap();
                    Ok(br#"{"cniVersion":"1.0.0",
                        "ips":[{"address":"10.213.0.3/24","gateway":"10.213.0.1"}],
                        "routes":[{"dst":"0.0.0.0/0"}]}"#
                        .to_vec())
                }
                ("bridge", CniCommand::Del) => {
                    // host-local releases every lease of the id (and eth0).
                    for entry in std::fs::read_dir(&lease_dir).into_iter().flatten() {
                        let path = entry.unwrap().path();
                        let owner = std::fs::read_to_string(&path).unwrap_or_default();
                        if owner.starts_with(&format!("{}\r\n", req.container_id)) {
                            std::fs::remove_file(path).unwrap();
                        }
                    }
                    if req.netns.is_some() {
                        self.links.lock().unwrap().remove("vethabc");
                    }
                    Ok(Vec::new())
                }
                ("portmap", CniCommand::Add) if self.fail_portmap_add => {
                    Err(NetworkError::Plugin {
                        plugin: "portmap".into(),
                        command: "ADD",
                        container_id: req.container_id.clone(),
                        code: 999,
                        msg: "boom".into(),
                        details: String::new(),
                    })
                }
                ("portmap", CniCommand::Add) => {
                    assert!(
                        req.config.get("prevResult").is_some(),
                        "portmap needs prevResult"
                    );
                    Ok(b"{}".to_vec())
                }
                _ => Ok(Vec::new()),
            }
        }

        fn iptables(&self, args: &[String]) -> Result<(), NetworkError> {
            let mut rules = self.rules.lock().unwrap();
            let key = args[3..].join(" ");
            let absent = || NetworkError::Iptables {
                args: args.join(" "),
                code: Some(1),
                stderr: String::new(),
            };
            match args[2].as_str() {
                "-C" => rules.contains(&key).then_some(()).ok_or_else(absent),
                "-A" => {
                    rules.push(key);
                    Ok(())
                }
                "-D" => match rules.iter().position(|r| r == &key) {
                    Some(i) => {
                        rules.remove(i);
                        Ok(())
                    }
                    None => Err(absent()),
                },
                _ => Err(absent()),
            }
        }

        fn chain_rule_count(&self, _: &str, _: &str) -> Result<Option<usize>, NetworkError> {
            Ok(None)
        }

        fn netns_identity(&self, path: &Path) -> Option<NetnsId> {
            (path == Path::new("/proc/42/ns/net")).then_some(NetnsId { dev: 4, ino: 42 })
        }

        fn loopback_up_in(&self, netns: &Path) -> Result<(), NetworkError> {
            self.calls
                .lock()
                .unwrap()
                .push(format!("lo up {}", netns.display()));
            Ok(())
        }

        fn link_master(&self, name: &str) -> Option<String> {
            self.links.lock().unwrap().get(name).cloned()
        }

        fn link_exists(&self, name: &str) -> bool {
            self.links.lock().unwrap().contains_key(name)
        }

        fn delete_link(&self, name: &str) -> Result<bool, NetworkError> {
            self.calls
                .lock()
                .unwrap()
                .push(format!("delete link {name}"));
            Ok(self.links.lock().unwrap().remove(name).is_some())
        }

        fn ensure_bridge(&self, name: &str, subnet: Ipv4Subnet) -> Result<bool, NetworkError> {
            self.calls
                .lock()
                .unwrap()
                .push(format!("ensure bridge {name} {subnet}"));
            Ok(false)
        }

        fn create_tap(&self, name: &str, bridge: &str) -> Result<OwnedFd, NetworkError> {
            self.calls
                .lock()
                .unwrap()
                .push(format!("create tap {name} on {bridge}"));
            if self.fail_tap {
                return Err(NetworkError::Link {
                    name: name.into(),
                    op: "TUNSETIFF",
                    source: std::io::Error::from_raw_os_error(libc::EPERM),
                });
            }
            self.links
                .lock()
                .unwrap()
                .insert(name.into(), bridge.into());
            Ok(std::fs::File::open("/dev/null").unwrap().into())
        }
    }

    fn setup(fail_portmap_add: bool) -> (tempfile::TempDir, Networking<FakeHost>) {
        let tmp = tempfile::tempdir().unwrap();
        let host = FakeHost {
            fail_portmap_add,
            ipam_dir: tmp.path().join("ipam"),
            ..FakeHost::default()
        };
        let net = Networking::new(host, tmp.path());
        (tmp, net)
    }

    fn bridge_mode(publish: &[&str]) -> NetworkMode {
        NetworkMode::Bridge(BridgeConfig {
            publish: publish.iter().map(|p| p.parse().unwrap()).collect(),
            ..BridgeConfig::default()
        })
    }

    const NS: &str = "/proc/42/ns/net";

    #[test]
    fn attach_runs_bridge_then_portmap_and_detach_reverses() {
        let (_tmp, net) = setup(false);
        let mode = bridge_mode(&["8080:80"]);
        let att = net
            .attach(&id("c1"), Path::new(NS), &mode)
            .unwrap()
            .unwrap();
        assert_eq!(att.ip.to_string(), "10.213.0.2");
        assert_eq!(att.gateway.to_string(), "10.213.0.1");
        assert_eq!(att.prefix, 24);
        assert_eq!(att.host_veth.as_deref(), Some("vethabc"));
        assert_eq!(
            net.host.rules.lock().unwrap().len(),
            1,
            "one masquerade rule"
        );
        net.detach(&id("c1"), Path::new(NS), &mode).unwrap();
        let calls = net.host.calls.lock().unwrap().clone();
        assert_eq!(
            calls,
            [
                format!("bridge ADD c1 ns={NS}"),
                format!("portmap ADD c1 ns={NS}"),
                format!("lo up {NS}"),
                format!("portmap DEL c1 ns={NS}"),
                format!("bridge DEL c1 ns={NS}"),
                // The last attachment takes the bridge along.
                "delete link isolab0".to_owned(),
            ]
        );
        assert!(
            net.host.rules.lock().unwrap().is_empty(),
            "masquerade rule left"
        );
        assert!(net.recorded_attachments().unwrap().is_empty());
        // Idempotent: nothing recorded, nothing leased, no plugin runs.
        net.detach(&id("c1"), Path::new(NS), &mode).unwrap();
        assert_eq!(net.host.calls.lock().unwrap().len(), 6);
    }

    #[test]
    fn a_second_attach_does_not_duplicate_the_masquerade_rule() {
        let (_tmp, net) = setup(false);
        let mode = bridge_mode(&[]);
        net.attach(&id("c1"), Path::new(NS), &mode).unwrap();
        net.attach(&id("c2"), Path::new(NS), &mode).unwrap();
        assert_eq!(net.host.rules.lock().unwrap().len(), 1);
    }

    #[test]
    fn failed_portmap_rolls_the_bridge_back() {
        let (tmp, net) = setup(true);
        let err = net
            .attach(&id("c1"), Path::new(NS), &bridge_mode(&["8080:80"]))
            .unwrap_err();
        assert!(err.to_string().contains("boom"), "{err}");
        let calls = net.host.calls.lock().unwrap().clone();
        assert_eq!(
            calls[calls.len() - 2..],
            [
                format!("bridge DEL c1 ns={NS}"),
                "delete link isolab0".to_owned()
            ]
        );
        assert!(net.recorded_attachments().unwrap().is_empty());
        assert!(!tmp.path().join("ipam/isolab0/10.213.0.2").exists());
    }

    #[test]
    fn cleanup_after_a_crash_passes_no_namespace_and_removes_the_veth() {
        let (tmp, net) = setup(false);
        let mode = bridge_mode(&["8080:80"]);
        net.attach(&id("c1"), Path::new(NS), &mode).unwrap();
        let removed = net.cleanup_leftovers(&id("c1"), &mode).unwrap();
        let calls = net.host.calls.lock().unwrap().clone();
        assert!(calls.contains(&"bridge DEL c1 ns=".to_owned()), "{calls:?}");
        assert!(
            calls.contains(&"delete link vethabc".to_owned()),
            "{calls:?}"
        );
        assert!(
            removed.iter().any(|r| r.contains("10.213.0.2")),
            "{removed:?}"
        );
        assert!(removed.iter().any(|r| r.contains("vethabc")), "{removed:?}");
        assert!(removed.iter().any(|r| r.contains("8080:80")), "{removed:?}");
        assert!(!tmp.path().join("ipam/isolab0/10.213.0.2").exists());
        assert!(net.cleanup_leftovers(&id("c1"), &mode).unwrap().is_empty());
    }

    #[test]
    fn a_stale_record_of_the_same_id_is_torn_down_before_attach() {
        let (_tmp, net) = setup(false);
        let mode = bridge_mode(&[]);
        net.attach(&id("c1"), Path::new(NS), &mode).unwrap();
        net.attach(&id("c1"), Path::new(NS), &mode).unwrap();
        let calls = net.host.calls.lock().unwrap().clone();
        assert_eq!(calls[2], "bridge DEL c1 ns=", "{calls:?}");
        assert_eq!(calls[4], format!("bridge ADD c1 ns={NS}"), "{calls:?}");
    }

    #[test]
    fn a_reused_namespace_path_is_not_entered() {
        let (_tmp, net) = setup(false);
        let mode = bridge_mode(&[]);
        net.attach(&id("c1"), Path::new(NS), &mode).unwrap();
        net.detach(&id("c1"), Path::new("/proc/43/ns/net"), &mode)
            .unwrap();
        let calls = net.host.calls.lock().unwrap().clone();
        assert!(calls.contains(&"bridge DEL c1 ns=".to_owned()), "{calls:?}");
    }

    #[test]
    fn remove_bridge_refuses_while_leased_and_then_cleans_up() {
        let (_tmp, net) = setup(false);
        let mode = bridge_mode(&[]);
        net.attach(&id("c1"), Path::new(NS), &mode).unwrap();
        let NetworkMode::Bridge(cfg) = &mode else {
            unreachable!()
        };
        let err = net.remove_bridge(cfg).unwrap_err();
        assert!(matches!(err, NetworkError::BridgeInUse { .. }), "{err}");
        // The last attachment takes the bridge and its rule along.
        net.detach(&id("c1"), Path::new(NS), &mode).unwrap();
        assert!(net.host.rules.lock().unwrap().is_empty());
        let removed = net.remove_bridge(cfg).unwrap();
        assert!(
            removed.iter().all(|r| r.starts_with("state directory")),
            "{removed:?}"
        );
    }

    #[test]
    fn none_brings_lo_up_and_host_does_nothing() {
        let (_tmp, net) = setup(false);
        assert!(net
            .attach(&id("c1"), Path::new(NS), &NetworkMode::None)
            .unwrap()
            .is_none());
        assert!(net
            .attach(&id("c1"), Path::new(NS), &NetworkMode::Host)
            .unwrap()
            .is_none());
        assert_eq!(
            net.host.calls.lock().unwrap().clone(),
            [format!("lo up {NS}")]
        );
        assert!(net
            .cleanup_leftovers(&id("c1"), &NetworkMode::None)
            .unwrap()
            .is_empty());
    }

    #[test]
    fn bad_input_is_rejected_before_anything_runs() {
        let (_tmp, net) = setup(false);
        // A bad id ("../x") cannot be passed at all: `ContainerId` refuses it.
        assert!("../x".parse::<ContainerId>().is_err());
        let e = net
            .attach(&id("c1"), Path::new("/proc/1/ns/none"), &bridge_mode(&[]))
            .unwrap_err();
        assert!(matches!(e, NetworkError::Netns { .. }));
        assert!(net.host.calls.lock().unwrap().is_empty());
    }

    #[test]
    fn a_vm_gets_a_tap_and_a_lease_from_the_containers_allocator() {
        let (tmp, net) = setup(false);
        let cfg = BridgeConfig::default();
        let att = net.attach_tap(&id("isolab-exp1-pid2-c0-r1"), &cfg).unwrap();
        assert_eq!(att.ip, Ipv4Addr::new(10, 213, 0, 3));
        assert_eq!(att.gateway, Ipv4Addr::new(10, 213, 0, 1));
        assert_eq!((att.prefix, att.bridge.as_str()), (24, "isolab0"));
        assert_eq!(att.tap, "isolabvm3");
        assert_eq!(att.mac, "02:00:0a:d5:00:03");
        let calls = net.host.calls.lock().unwrap().clone();
        assert_eq!(
            calls,
            [
                "ensure bridge isolab0 10.213.0.0/24",
                "host-local ADD isolab-exp1-pid2-c0-r1 ns=/proc/self/ns/net",
                "create tap isolabvm3 on isolab0",
            ]
        );
        assert_eq!(net.host.rules.lock().unwrap().len(), 1, "masquerade");
        let lease = tmp.path().join("ipam/isolab0/10.213.0.3");
        assert!(lease.exists());
        assert_eq!(
            net.recorded_taps().unwrap(),
            [("isolab0".to_owned(), "isolab-exp1-pid2-c0-r1".to_owned())]
        );
        // A container's record is not a tap's.
        net.attach(&id("c1"), Path::new(NS), &bridge_mode(&[]))
            .unwrap();
        assert_eq!(net.recorded_taps().unwrap().len(), 1);

        drop(att.fd);
        let removed = net.detach_tap(&id("isolab-exp1-pid2-c0-r1"), &cfg).unwrap();
        assert!(!lease.exists());
        assert!(
            removed.iter().any(|r| r == "address 10.213.0.3 on isolab0"),
            "{removed:?}"
        );
        // The fake's tap outlives its descriptor, so teardown deletes it.
        assert!(removed.iter().any(|r| r == "veth isolabvm3"), "{removed:?}");
        assert!(net.recorded_taps().unwrap().is_empty());
        assert!(net
            .detach_tap(&id("isolab-exp1-pid2-c0-r1"), &cfg)
            .unwrap()
            .is_empty());
    }

    #[test]
    fn a_failed_tap_releases_the_lease() {
        let tmp = tempfile::tempdir().unwrap();
        let host = FakeHost {
            fail_tap: true,
            ipam_dir: tmp.path().join("ipam"),
            ..FakeHost::default()
        };
        let net = Networking::new(host, tmp.path());
        let e = net
            .attach_tap(&id("vm1"), &BridgeConfig::default())
            .unwrap_err();
        assert!(e.to_string().contains("isolabvm3"), "{e}");
        assert!(!tmp.path().join("ipam/isolab0/10.213.0.3").exists());
        assert!(net.recorded_attachments().unwrap().is_empty());
    }
}
