//! The private network of network neighbours: two namespaces of this host joined
//! by a veth pair, with iperf3 servers in one. Traffic never leaves the host.

use std::fmt;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use isolab_tools::{SystemTools, ToolCommand, ToolRunner};

use super::bridge::{BridgeAddress, BridgeError, BridgePort};

/// Where `ip netns add` puts its namespaces.
const NETNS_DIR: &str = "/run/netns";

/// Port of the iperf3 server of neighbour 0; neighbour `i` uses `BASE_PORT + i`
/// (an iperf3 server serves one client at a time).
pub const BASE_PORT: u16 = 5201;

/// How long a server may take to listen.
const LISTEN_WAIT: Duration = Duration::from_secs(5);

/// The names and addresses of the neighbour network of one isolab process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetNames {
    /// Namespace of the clients: `isolab-nb<pid>-a`.
    pub ns_a: String,
    /// Namespace of the servers: `isolab-nb<pid>-b`.
    pub ns_b: String,
    /// The veth end in namespace a: `nb<pid>a` (at most 15 characters).
    pub veth_a: String,
    /// The veth end in namespace b: `nb<pid>b`.
    pub veth_b: String,
    /// Address of `veth_a`: `10.214.<pid mod 256>.1/30`.
    pub addr_a: Ipv4Addr,
    /// Address of `veth_b`: `10.214.<pid mod 256>.2/30`.
    pub addr_b: Ipv4Addr,
}

/// Prefix length of the veth addresses.
const PREFIX: u8 = 30;

impl NetNames {
    /// The names of process `pid`'s network.
    pub fn of(pid: u32) -> NetNames {
        let x = (pid % 256) as u8;
        NetNames {
            ns_a: format!("isolab-nb{pid}-a"),
            ns_b: format!("isolab-nb{pid}-b"),
            veth_a: format!("nb{pid}a"),
            veth_b: format!("nb{pid}b"),
            addr_a: Ipv4Addr::new(10, 214, x, 1),
            addr_b: Ipv4Addr::new(10, 214, x, 2),
        }
    }

    /// The server port of neighbour `index`.
    pub fn port(index: u32) -> u16 {
        BASE_PORT.saturating_add(u16::try_from(index).unwrap_or(u16::MAX))
    }

    /// A TCP iperf3 client in namespace a to the server of neighbour `index`,
    /// running `seconds`.
    pub fn client(&self, index: u32, seconds: u32) -> Vec<String> {
        vec![
            "ip".into(),
            "netns".into(),
            "exec".into(),
            self.ns_a.clone(),
            "iperf3".into(),
            "-c".into(),
            self.addr_b.to_string(),
            "-p".into(),
            NetNames::port(index).to_string(),
            "-t".into(),
            seconds.to_string(),
        ]
    }

    /// The iperf3 server of neighbour `index` in namespace b.
    pub fn server(&self, index: u32) -> Vec<String> {
        self.server_at(index, self.addr_b)
    }

    /// The iperf3 server of neighbour `index` in namespace b, bound to `address`.
    fn server_at(&self, index: u32, address: Ipv4Addr) -> Vec<String> {
        vec![
            "ip".into(),
            "netns".into(),
            "exec".into(),
            self.ns_b.clone(),
            "iperf3".into(),
            "-s".into(),
            "-B".into(),
            address.to_string(),
            "-p".into(),
            NetNames::port(index).to_string(),
        ]
    }

    /// The `ip` commands that build the network, in order.
    fn setup(&self) -> Vec<Vec<String>> {
        let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let addr_a = format!("{}/{PREFIX}", self.addr_a);
        let addr_b = format!("{}/{PREFIX}", self.addr_b);
        let (a, b) = (self.ns_a.as_str(), self.ns_b.as_str());
        let (va, vb) = (self.veth_a.as_str(), self.veth_b.as_str());
        vec![
            s(&[
                "ip", "link", "add", "name", va, "netns", a, "type", "veth", "peer", "name", vb,
                "netns", b,
            ]),
            s(&["ip", "-n", a, "addr", "add", &addr_a, "dev", va]),
            s(&["ip", "-n", b, "addr", "add", &addr_b, "dev", vb]),
            s(&["ip", "-n", a, "link", "set", "lo", "up"]),
            s(&["ip", "-n", b, "link", "set", "lo", "up"]),
            s(&["ip", "-n", a, "link", "set", va, "up"]),
            s(&["ip", "-n", b, "link", "set", vb, "up"]),
        ]
    }
}

/// Why the neighbour network could not be built, measured or removed.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    /// A command failed.
    #[error("`{command}` failed ({status}): {stderr}; network neighbours need root and iproute2")]
    Failed {
        /// The command line.
        command: String,
        /// How it ended.
        status: String,
        /// What it printed on standard error.
        stderr: String,
    },
    /// An `ip` command is not installed, could not start or failed.
    #[error("{0}; network neighbours need root and iproute2")]
    Ip(isolab_tools::ToolError),
    /// A command could not be started.
    #[error("cannot start `{program}`: {source}; is it installed (iproute2, iperf3)?")]
    Spawn {
        /// The program.
        program: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// An iperf3 server did not listen in time.
    #[error("iperf3 server in namespace {namespace} did not listen on port {port} within {waited:?} ({state}); is port {port} taken or iperf3 missing?")]
    NotListening {
        /// The namespace.
        namespace: String,
        /// The port.
        port: u16,
        /// How long isolab waited.
        waited: Duration,
        /// Whether it had exited.
        state: String,
    },
    /// The servers' namespace could not be attached to or detached from the bridge.
    #[error(transparent)]
    Bridge(#[from] BridgeError),
    /// The network has no server whose counters could be read.
    #[error("no iperf3 server runs in namespace {0}, so its traffic cannot be read; create the NeighbourNet with at least one server")]
    NoServer(String),
    /// A counter file could not be read or lacks the interface.
    #[error("cannot read the counters of {interface} from {path}: {detail}")]
    Counters {
        /// The interface.
        interface: String,
        /// The file.
        path: PathBuf,
        /// What went wrong.
        detail: String,
    },
}

/// Runs the `ip` commands that build and remove the network (a fake in tests).
pub trait NetCommands: fmt::Debug + Send + Sync {
    /// Runs `argv` to completion and returns its standard output; an error when it
    /// cannot start or fails.
    fn run(&self, argv: &[String]) -> Result<String, NetError>;
}

/// Runs the commands for real, without a shell, through [`isolab_tools::SystemTools`]
/// (`ip` comes from Debian's `iproute2`).
#[derive(Debug, Clone, Copy, Default)]
pub struct IpCommands;

impl NetCommands for IpCommands {
    fn run(&self, argv: &[String]) -> Result<String, NetError> {
        let (program, args) = argv.split_first().ok_or_else(|| NetError::Failed {
            command: String::new(),
            status: "empty command".into(),
            stderr: String::new(),
        })?;
        let command = args
            .iter()
            .fold(ToolCommand::new(program, "iproute2"), ToolCommand::arg);
        let out = SystemTools.run(&command).map_err(NetError::Ip)?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

/// The neighbour network of this process, as a guard: [`NeighbourNet::create`]
/// makes namespaces `isolab-nb<pid>-a` and `-b` joined by a veth pair
/// (`10.214.<pid mod 256>.0/30`, both ends and loopback up) and starts the iperf3
/// servers in namespace b; dropping it (also while unwinding from a panic) stops
/// the servers and deletes both namespaces, which deletes the veth pair.
///
/// One process has one neighbour network at a time: [`super::command`] derives the
/// names the clients use from the process id.
#[derive(Debug)]
pub struct NeighbourNet {
    names: NetNames,
    commands: Arc<dyn NetCommands>,
    created: Vec<String>,
    servers: Vec<(u16, Child)>,
    proc_root: PathBuf,
    /// For neighbour VMs: namespace b on isolab's bridge instead of joined to a.
    bridged: Option<Bridged>,
}

/// Namespace b's place on isolab's bridge.
#[derive(Debug)]
struct Bridged {
    port: Arc<dyn BridgePort>,
    id: String,
    address: BridgeAddress,
}

impl NeighbourNet {
    /// The network of this process with `servers` iperf3 servers (one per network
    /// neighbour), built with the real `ip`.
    pub fn create(servers: u32) -> Result<NeighbourNet, NetError> {
        NeighbourNet::create_with(
            Arc::new(IpCommands),
            std::process::id(),
            servers,
            Path::new("/proc"),
        )
    }

    /// The network of process `pid` before anything is made: dropping it removes what
    /// has been made since.
    fn nothing_yet(commands: Arc<dyn NetCommands>, pid: u32, proc_root: &Path) -> NeighbourNet {
        NeighbourNet {
            names: NetNames::of(pid),
            commands,
            created: Vec::new(),
            servers: Vec::new(),
            proc_root: proc_root.to_path_buf(),
            bridged: None,
        }
    }

    /// The network of process `pid`, built with `commands`, its servers watched
    /// through `proc_root`. Everything already made is removed again on error.
    pub fn create_with(
        commands: Arc<dyn NetCommands>,
        pid: u32,
        servers: u32,
        proc_root: &Path,
    ) -> Result<NeighbourNet, NetError> {
        let mut net = NeighbourNet::nothing_yet(commands, pid, proc_root);
        for ns in [net.names.ns_a.clone(), net.names.ns_b.clone()] {
            net.commands
                .run(&["ip".into(), "netns".into(), "add".into(), ns.clone()])?;
            net.created.push(ns);
        }
        for argv in net.names.setup() {
            net.commands.run(&argv)?;
        }
        for i in 0..servers {
            net.start_server(i)?;
        }
        Ok(net)
    }

    /// The network of neighbour VMs, built with the real `ip` and the runtime's
    /// bridge: namespace `isolab-nb<pid>-b` attached to isolab's bridge as `id` (its
    /// lease goes with a dead experiment's in gc), with `servers` iperf3 servers on its
    /// address, which the guests reach over the bridge. There is no namespace a: the
    /// clients run in the guests ([`Self::guest_client`]).
    pub fn create_on_bridge(servers: u32, id: &str) -> Result<NeighbourNet, NetError> {
        NeighbourNet::create_bridged_with(
            Arc::new(IpCommands),
            Arc::new(super::bridge::RuntimeBridge),
            (std::process::id(), id),
            servers,
            Path::new("/proc"),
        )
    }

    /// [`Self::create_on_bridge`] for process `pid` with `commands` and `port`.
    pub fn create_bridged_with(
        commands: Arc<dyn NetCommands>,
        port: Arc<dyn BridgePort>,
        (pid, id): (u32, &str),
        servers: u32,
        proc_root: &Path,
    ) -> Result<NeighbourNet, NetError> {
        let mut net = NeighbourNet::nothing_yet(commands, pid, proc_root);
        let ns = net.names.ns_b.clone();
        net.commands
            .run(&["ip".into(), "netns".into(), "add".into(), ns.clone()])?;
        net.created.push(ns.clone());
        let address = port.attach(id, &Path::new(NETNS_DIR).join(&ns))?;
        net.bridged = Some(Bridged {
            port,
            id: id.to_owned(),
            address,
        });
        for i in 0..servers {
            net.start_server(i)?;
        }
        Ok(net)
    }

    /// The address the clients connect to: namespace b's veth end, or its address
    /// on the bridge.
    pub fn server_address(&self) -> Ipv4Addr {
        self.bridged
            .as_ref()
            .map_or(self.names.addr_b, |b| b.address.ip)
    }

    /// `argv`, a network neighbour's client as [`super::command`] builds it, as a
    /// guest runs it on a bridged network: `iperf3` connecting to
    /// [`Self::server_address`]. `None` when it is not such a client.
    pub fn guest_client(&self, argv: &[String]) -> Option<Vec<String>> {
        super::bridge::in_guest(argv, &self.names.ns_a, self.server_address())
    }

    /// Interfaces of the host's namespace that carry only the neighbours' traffic
    /// (the bridged namespace's veth end): not the subject's.
    pub fn host_interfaces(&self) -> Vec<String> {
        self.bridged
            .iter()
            .filter_map(|b| b.address.host_veth.clone())
            .collect()
    }

    /// The interface in namespace b whose counters are the neighbours' traffic.
    fn counted_interface(&self) -> &str {
        self.bridged
            .as_ref()
            .map_or(&self.names.veth_b, |b| &b.address.ifname)
    }

    fn start_server(&mut self, index: u32) -> Result<(), NetError> {
        let argv = self.names.server_at(index, self.server_address());
        let port = NetNames::port(index);
        let mut child = Command::new(&argv[0])
            .args(&argv[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|source| NetError::Spawn {
                program: argv[0].clone(),
                source,
            })?;
        let started = Instant::now();
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(NetError::NotListening {
                    namespace: self.names.ns_b.clone(),
                    port,
                    waited: started.elapsed(),
                    state: format!("it exited with {status}"),
                });
            }
            if crate::platform::process::listens_in_other_namespace(
                &self.proc_root,
                child.id(),
                port,
            ) {
                break;
            }
            if started.elapsed() > LISTEN_WAIT {
                let _ = child.kill();
                let _ = child.wait();
                return Err(NetError::NotListening {
                    namespace: self.names.ns_b.clone(),
                    port,
                    waited: LISTEN_WAIT,
                    state: "still running".into(),
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.servers.push((port, child));
        Ok(())
    }

    /// The names and addresses.
    pub fn names(&self) -> &NetNames {
        &self.names
    }

    /// The clients' namespace (`isolab-nb<pid>-a`), where [`Self::interface`] lives.
    pub fn namespace(&self) -> &str {
        &self.names.ns_a
    }

    /// The veth end in namespace a, through which all neighbour traffic leaves:
    /// where a `net` reservation puts its rate limit
    /// ([`Self::rate_limit_command`]). There is no host-side interface.
    pub fn interface(&self) -> &str {
        &self.names.veth_a
    }

    /// `tc` (run in namespace a) limiting everything the neighbours send to `mbps`
    /// Mbit/s with a token bucket (netem is not available on this kernel): the
    /// transmit direction. [`Self::rate_limit`] puts the same bucket on namespace b's
    /// end too (the receive direction).
    pub fn rate_limit_command(&self, mbps: u64) -> Vec<String> {
        tbf_command(&self.names.ns_a, &self.names.veth_a, mbps)
    }

    /// Limits the neighbours' traffic to `mbps` Mbit/s both ways — what they send
    /// ([`Self::rate_limit_command`], namespace a's end) and what they receive (the
    /// same bucket on namespace b's end) — and reads both rates back from the kernel
    /// (`tc -j qdisc show`); returns the lower, in Mbit/s.
    pub fn rate_limit(&self, mbps: u64) -> Result<f64, NetError> {
        let mut lowest = f64::INFINITY;
        for (ns, dev) in [
            (&self.names.ns_a, &self.names.veth_a),
            (&self.names.ns_b, &self.names.veth_b),
        ] {
            self.commands.run(&tbf_command(ns, dev, mbps))?;
            let show: Vec<String> = [
                "ip", "netns", "exec", ns, "tc", "-j", "qdisc", "show", "dev", dev,
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            let json = self.commands.run(&show)?;
            let rate = tbf_rate_mbps(&json).ok_or_else(|| NetError::Failed {
                command: show.join(" "),
                status: "no tbf rate in its output".into(),
                stderr: json.chars().take(300).collect(),
            })?;
            lowest = lowest.min(rate);
        }
        Ok(lowest)
    }

    /// Process ids of the iperf3 servers, e.g. to attach them to a cgroup.
    pub fn server_pids(&self) -> Vec<u32> {
        self.servers.iter().map(|(_, c)| c.id()).collect()
    }

    /// Bytes the neighbours moved so far in `direction`: for transmit, what namespace
    /// b's veth end received (everything they sent); for receive, what it sent
    /// (everything they received).
    pub fn carried_bytes(&self, direction: super::NetDirection) -> Result<u64, NetError> {
        match direction {
            super::NetDirection::Transmit => self.received_bytes(),
            super::NetDirection::Receive => self.b_counter(tx_bytes),
        }
    }

    /// Bytes received so far by namespace b's veth end: everything the neighbours
    /// sent. Read from `/proc/<server>/net/dev`, which shows the server's namespace.
    pub fn received_bytes(&self) -> Result<u64, NetError> {
        self.b_counter(rx_bytes)
    }

    /// A counter of namespace b's veth end, read by `column` from
    /// `/proc/<server>/net/dev`.
    fn b_counter(&self, column: fn(&str, &str) -> Option<u64>) -> Result<u64, NetError> {
        let (_, server) = self
            .servers
            .first()
            .ok_or_else(|| NetError::NoServer(self.names.ns_b.clone()))?;
        let path = self.proc_root.join(server.id().to_string()).join("net/dev");
        let interface = self.counted_interface();
        let counters = |detail: String| NetError::Counters {
            interface: interface.to_owned(),
            path: path.clone(),
            detail,
        };
        let text = std::fs::read_to_string(&path).map_err(|e| counters(e.to_string()))?;
        column(&text, interface).ok_or_else(|| counters("the interface is not listed".into()))
    }

    /// Stops the servers and deletes the namespaces, reporting the first failure
    /// (dropping does the same silently).
    pub fn remove(mut self) -> Result<(), NetError> {
        self.teardown()
    }

    fn teardown(&mut self) -> Result<(), NetError> {
        for (_, mut child) in self.servers.drain(..) {
            let _ = child.kill();
            let _ = child.wait();
        }
        let mut first = Ok(());
        if let Some(b) = self.bridged.take() {
            let netns = Path::new(NETNS_DIR).join(&self.names.ns_b);
            first = b.port.detach(&b.id, &netns).map_err(NetError::from);
        }
        while let Some(ns) = self.created.pop() {
            let done = self
                .commands
                .run(&["ip".into(), "netns".into(), "del".into(), ns]);
            if first.is_ok() {
                first = done.map(drop);
            }
        }
        first
    }
}

impl Drop for NeighbourNet {
    fn drop(&mut self) {
        let _ = self.teardown();
    }
}

/// Whether a rate `read` back from tc (Mbit/s) is not the `asked` one: tc stores
/// bytes per second, so a rounding within 1% is not a change.
pub fn rate_differs(asked: u64, read: f64) -> bool {
    (read - asked as f64).abs() > 0.01 * asked as f64 + 0.01
}

/// The rate of the root `tbf` qdisc in `tc -j qdisc show` output, in Mbit/s (tc
/// reports bytes per second).
pub(crate) fn tbf_rate_mbps(json: &str) -> Option<f64> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    v.as_array()?
        .iter()
        .find(|q| q["kind"] == "tbf")
        .and_then(|q| q["options"]["rate"].as_f64())
        .map(|bytes| bytes * 8.0 / 1e6)
}

/// Received bytes of `interface` in a `/proc/net/dev` table.
fn rx_bytes(table: &str, interface: &str) -> Option<u64> {
    dev_column(table, interface, 0)
}

/// `tc` in namespace `ns` putting a token bucket of `mbps` Mbit/s on `dev`'s egress.
fn tbf_command(ns: &str, dev: &str, mbps: u64) -> Vec<String> {
    let mut v: Vec<String> = ["ip", "netns", "exec", ns].map(String::from).to_vec();
    v.extend(tbf_args(dev, mbps));
    v
}

/// `tc` putting a token bucket of `mbps` Mbit/s on `dev`'s egress (netem is not
/// available on this kernel), in the caller's namespace.
pub(crate) fn tbf_args(dev: &str, mbps: u64) -> Vec<String> {
    // At least 10 ms of traffic per burst, so that the bucket can hold the rate.
    let burst = (mbps * 1250).max(32 * 1024);
    [
        "tc",
        "qdisc",
        "replace",
        "dev",
        dev,
        "root",
        "tbf",
        "rate",
        &format!("{mbps}mbit"),
        "burst",
        &burst.to_string(),
        "latency",
        "50ms",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// Transmitted bytes of `interface` in a `/proc/net/dev` table.
fn tx_bytes(table: &str, interface: &str) -> Option<u64> {
    dev_column(table, interface, 8)
}

/// Column `n` (0: received bytes, 8: transmitted bytes) of `interface`'s row in a
/// `/proc/net/dev` table.
fn dev_column(table: &str, interface: &str, n: usize) -> Option<u64> {
    table.lines().find_map(|line| {
        let (name, rest) = line.split_once(':')?;
        (name.trim() == interface)
            .then(|| rest.split_whitespace().nth(n)?.parse().ok())
            .flatten()
    })
}

/// The processes below `proc_root` whose network namespace is the one `netns` (a file
/// `ip netns add` made) holds: a killed run's iperf3 servers outlive it there, so gc
/// kills them before it deletes the namespace (deleting only unmounts it).
pub fn namespace_pids(netns: &Path, proc_root: &Path) -> Vec<u32> {
    use std::os::unix::fs::MetadataExt;
    let Ok(ns) = std::fs::metadata(netns) else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(proc_root) else {
        return Vec::new();
    };
    let mut pids: Vec<u32> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::metadata(proc_root.join(pid.to_string()).join("ns/net"))
                .is_ok_and(|m| (m.dev(), m.ino()) == (ns.dev(), ns.ino()))
        })
        .collect();
    pids.sort_unstable();
    pids
}

/// Namespaces (`isolab-nb<pid>-a`/`-b`) in `netns_dir` (`/run/netns`) whose isolab
/// process is gone by `alive`: left by a killed run, to delete with
/// `ip netns del NAME`.
pub fn stale_namespaces(netns_dir: &Path, alive: impl Fn(u32) -> bool) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(netns_dir) else {
        return Vec::new();
    };
    let mut stale: Vec<String> = entries
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|name| {
            name.strip_prefix("isolab-nb")
                .and_then(|r| r.strip_suffix("-a").or_else(|| r.strip_suffix("-b")))
                .and_then(|pid| pid.parse::<u32>().ok())
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

    /// Records commands; fails the one containing `fail_on`.
    #[derive(Debug, Default)]
    struct Fake {
        log: Mutex<Vec<String>>,
        fail_on: Option<&'static str>,
    }

    impl NetCommands for Fake {
        fn run(&self, argv: &[String]) -> Result<String, NetError> {
            let line = argv.join(" ");
            self.log.lock().unwrap().push(line.clone());
            match self.fail_on {
                Some(f) if line.contains(f) => Err(NetError::Failed {
                    command: line,
                    status: "exit status: 2".into(),
                    stderr: "RTNETLINK answers: File exists".into(),
                }),
                _ if line.contains("tc -j qdisc show") => Ok(TBF_1500.into()),
                _ => Ok(String::new()),
            }
        }
    }

    const TBF_1500: &str = r#"[{"kind":"tbf","handle":"800f:","root":true,"refcnt":3,"options":{"rate":187500000,"burst":1874812,"lat":50001}}]"#;

    #[test]
    fn the_rate_is_read_back_from_tc_json() {
        assert_eq!(tbf_rate_mbps(TBF_1500), Some(1500.0));
        assert_eq!(tbf_rate_mbps(r#"[{"kind":"noqueue","options":{}}]"#), None);
        assert_eq!(tbf_rate_mbps("not json"), None);
        assert!(!rate_differs(1500, 1500.0) && !rate_differs(200, 201.0));
        assert!(rate_differs(200, 203.0));
    }

    #[test]
    fn names_fit_the_kernel_and_the_address_plan() {
        let n = NetNames::of(4_194_304);
        assert!(n.veth_a.len() <= 15, "{}", n.veth_a);
        assert_eq!(n.ns_a, "isolab-nb4194304-a");
        assert_eq!(n.addr_a, Ipv4Addr::new(10, 214, 0, 1));
        let n = NetNames::of(4242);
        assert_eq!(n.addr_b, Ipv4Addr::new(10, 214, 146, 2));
        assert_eq!(
            n.server(1).join(" "),
            "ip netns exec isolab-nb4242-b iperf3 -s -B 10.214.146.2 -p 5202"
        );
    }

    #[test]
    fn builds_then_removes_both_namespaces() {
        let fake = Arc::new(Fake::default());
        let net = NeighbourNet::create_with(fake.clone(), 42, 0, Path::new("/proc")).unwrap();
        assert_eq!(net.interface(), "nb42a");
        assert_eq!(net.namespace(), "isolab-nb42-a");
        drop(net);
        let log = fake.log.lock().unwrap().clone();
        assert_eq!(log[0], "ip netns add isolab-nb42-a");
        assert_eq!(log[1], "ip netns add isolab-nb42-b");
        assert_eq!(
            log[2],
            "ip link add name nb42a netns isolab-nb42-a type veth peer name nb42b netns isolab-nb42-b"
        );
        assert!(log.contains(&"ip -n isolab-nb42-a addr add 10.214.42.1/30 dev nb42a".to_owned()));
        assert!(log.contains(&"ip -n isolab-nb42-b link set lo up".to_owned()));
        assert!(log.contains(&"ip -n isolab-nb42-b link set nb42b up".to_owned()));
        assert_eq!(
            &log[log.len() - 2..],
            ["ip netns del isolab-nb42-b", "ip netns del isolab-nb42-a"]
        );
    }

    /// A bridge that leases one address and logs into the commands' log.
    #[derive(Debug)]
    struct FakeBridge(Arc<Fake>);

    impl BridgePort for FakeBridge {
        fn attach(&self, id: &str, netns: &Path) -> Result<BridgeAddress, BridgeError> {
            let line = format!("attach {id} {}", netns.display());
            self.0.log.lock().unwrap().push(line);
            Ok(BridgeAddress {
                ip: Ipv4Addr::new(10, 213, 0, 9),
                ifname: "eth0".into(),
                host_veth: Some("veth1a2b3c".into()),
            })
        }

        fn detach(&self, id: &str, netns: &Path) -> Result<(), BridgeError> {
            let line = format!("detach {id} {}", netns.display());
            self.0.log.lock().unwrap().push(line);
            Ok(())
        }
    }

    #[test]
    fn neighbour_vms_stream_to_one_namespace_on_the_bridge() {
        let fake = Arc::new(Fake::default());
        let bridge = Arc::new(FakeBridge(fake.clone()));
        let net = NeighbourNet::create_bridged_with(
            fake.clone(),
            bridge,
            (42, "isolab-exp1-pid42-c0-r1-nbnet"),
            0,
            Path::new("/proc"),
        )
        .unwrap();
        assert_eq!(net.server_address(), Ipv4Addr::new(10, 213, 0, 9));
        assert_eq!(net.counted_interface(), "eth0");
        assert_eq!(net.host_interfaces(), ["veth1a2b3c"]);
        let client = NetNames::of(42).client(1, 5);
        assert_eq!(
            net.guest_client(&client).unwrap().join(" "),
            "iperf3 -c 10.213.0.9 -p 5202 -t 5"
        );
        drop(net);
        // No namespace a; namespace b leaves the bridge before it is deleted.
        assert_eq!(
            *fake.log.lock().unwrap(),
            [
                "ip netns add isolab-nb42-b",
                "attach isolab-exp1-pid42-c0-r1-nbnet /run/netns/isolab-nb42-b",
                "detach isolab-exp1-pid42-c0-r1-nbnet /run/netns/isolab-nb42-b",
                "ip netns del isolab-nb42-b",
            ]
        );
        // On the host, the servers keep namespace b's veth end.
        let net = NeighbourNet::create_with(fake.clone(), 42, 0, Path::new("/proc")).unwrap();
        assert_eq!(net.server_address(), Ipv4Addr::new(10, 214, 42, 2));
        assert!(net.host_interfaces().is_empty());
    }

    #[test]
    fn a_failed_setup_removes_what_it_made() {
        let fake = Arc::new(Fake {
            fail_on: Some("type veth"),
            ..Fake::default()
        });
        let e = NeighbourNet::create_with(fake.clone(), 7, 0, Path::new("/proc")).unwrap_err();
        assert!(e.to_string().contains("File exists"), "{e}");
        let log = fake.log.lock().unwrap().clone();
        assert_eq!(
            &log[log.len() - 2..],
            ["ip netns del isolab-nb7-b", "ip netns del isolab-nb7-a"]
        );
        // A namespace that could not be made is not deleted (it may be another's).
        let fake = Arc::new(Fake {
            fail_on: Some("netns add isolab-nb8-b"),
            ..Fake::default()
        });
        assert!(NeighbourNet::create_with(fake.clone(), 8, 0, Path::new("/proc")).is_err());
        let log = fake.log.lock().unwrap().clone();
        assert_eq!(log.last().unwrap(), "ip netns del isolab-nb8-a");
        assert!(!log.contains(&"ip netns del isolab-nb8-b".to_owned()));
    }

    #[test]
    fn a_panic_still_removes_the_namespaces() {
        let fake = Arc::new(Fake::default());
        let f2 = fake.clone();
        let r = std::panic::catch_unwind(move || {
            let _net = NeighbourNet::create_with(f2, 9, 0, Path::new("/proc")).unwrap();
            panic!("boom");
        });
        assert!(r.is_err());
        let log = fake.log.lock().unwrap().clone();
        assert!(log.contains(&"ip netns del isolab-nb9-a".to_owned()));
        assert!(log.contains(&"ip netns del isolab-nb9-b".to_owned()));
    }

    #[test]
    fn rate_limit_is_a_token_bucket_on_both_ends() {
        let fake = Arc::new(Fake::default());
        let net = NeighbourNet::create_with(fake.clone(), 42, 0, Path::new("/proc")).unwrap();
        assert_eq!(
            net.rate_limit_command(800).join(" "),
            "ip netns exec isolab-nb42-a tc qdisc replace dev nb42a root tbf rate 800mbit burst 1000000 latency 50ms"
        );
        assert_eq!(net.rate_limit(1500).unwrap(), 1500.0);
        let log = fake.log.lock().unwrap().clone();
        for end in [
            "isolab-nb42-a tc qdisc replace dev nb42a",
            "isolab-nb42-b tc qdisc replace dev nb42b",
        ] {
            assert!(log.iter().any(|l| l.contains(end)), "{end}: {log:#?}");
        }
        assert!(matches!(net.received_bytes(), Err(NetError::NoServer(_))));
    }

    #[test]
    fn parses_proc_net_tables() {
        let tcp = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 02D60A0A:1451 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0\n   1: 02D60A0A:1452 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0\n";
        let listens = |port| crate::platform::process::parse_ports(tcp, "0A").contains(&port);
        assert!(listens(5201));
        assert!(!listens(5202), "established, not listening");
        assert!(!listens(5203));
        let dev = "Inter-|   Receive                                                |  Transmit\n face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    lo:       0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0\n nb42b: 123456789  1000    0    0    0     0          0         0     4242      10    0    0    0     0       0          0\n";
        assert_eq!(rx_bytes(dev, "nb42b"), Some(123_456_789));
        assert_eq!(rx_bytes(dev, "lo"), Some(0));
        assert_eq!(rx_bytes(dev, "eth0"), None);
        assert_eq!(tx_bytes(dev, "nb42b"), Some(4242));
    }

    #[test]
    fn finds_the_processes_left_in_a_namespace() {
        let dir = tempfile::tempdir().unwrap();
        let ns = dir.path().join("isolab-nb10-b");
        std::fs::write(&ns, "").unwrap();
        let other = dir.path().join("other");
        std::fs::write(&other, "").unwrap();
        let proc_root = dir.path().join("proc");
        for (pid, target) in [("42", &ns), ("43", &other), ("7", &ns)] {
            std::fs::create_dir_all(proc_root.join(pid).join("ns")).unwrap();
            std::os::unix::fs::symlink(target, proc_root.join(pid).join("ns/net")).unwrap();
        }
        std::fs::create_dir_all(proc_root.join("self")).unwrap();
        assert_eq!(namespace_pids(&ns, &proc_root), [7, 42]);
        assert!(namespace_pids(&dir.path().join("gone"), &proc_root).is_empty());
    }

    #[test]
    fn finds_namespaces_of_dead_processes() {
        let dir = tempfile::tempdir().unwrap();
        for n in [
            "isolab-nb10-a",
            "isolab-nb10-b",
            "isolab-nb11-a",
            "other",
            "isolab-nbx-a",
        ] {
            std::fs::write(dir.path().join(n), "").unwrap();
        }
        assert_eq!(
            stale_namespaces(dir.path(), |pid| pid == 11),
            ["isolab-nb10-a", "isolab-nb10-b"]
        );
        assert!(stale_namespaces(&dir.path().join("missing"), |_| false).is_empty());
    }
}
