//! Real networking tests: root, Debian's CNI plugins and iptables.
//!
//! Each test makes its own network namespaces (a `cat` child that did
//! `unshare(CLONE_NEWNET)` and waits on its stdin pipe), its own bridge
//! `ilt<pid%1000>x<n>` on its own subnet `10.213.<100+n>.0/24`, and a
//! temporary state directory; a guard removes all of it, restores
//! `net.ipv4.ip_forward`, and the test compares the iptables rules before and
//! after. Traffic only flows between the bridge's host address and the test
//! namespaces. Tests hold one lock, so they run one at a time.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use super::link::in_netns;
use super::*;
use crate::id::ContainerId;

fn cid(s: &str) -> ContainerId {
    s.parse().unwrap()
}

static SERIAL: Mutex<()> = Mutex::new(());
const TIMEOUT: Duration = Duration::from_secs(5);
const IP_FORWARD: &str = "/proc/sys/net/ipv4/ip_forward";

/// Why the privileged tests cannot run here, if they cannot.
fn skip_reason() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("the network tests need root (namespaces, veths, iptables)".into());
    }
    for plugin in ["bridge", "host-local", "portmap"] {
        let p = Path::new(DEFAULT_PLUGIN_DIR).join(plugin);
        if !p.exists() {
            return Some(format!(
                "{} missing (containernetworking-plugins)",
                p.display()
            ));
        }
    }
    if Command::new("iptables-save")
        .stdout(Stdio::null())
        .status()
        .map(|s| !s.success())
        .unwrap_or(true)
    {
        return Some("iptables-save does not run (apt-get install iptables)".into());
    }
    None
}

macro_rules! require_root_and_plugins {
    () => {
        if let Some(reason) = skip_reason() {
            isolab_skip::skip(reason);
            return;
        }
    };
}

/// A process holding a fresh network namespace until dropped.
struct NetnsHolder {
    child: Child,
}

impl NetnsHolder {
    fn new() -> Self {
        let mut cmd = Command::new("cat");
        cmd.stdin(Stdio::piped()).stdout(Stdio::null());
        // SAFETY: unshare(2) is async-signal-safe and touches no memory of
        // the parent; it runs in the forked child before exec.
        unsafe {
            cmd.pre_exec(|| {
                if libc::unshare(libc::CLONE_NEWNET) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        // spawn returns after exec, so the namespace exists from here on.
        NetnsHolder {
            child: cmd.spawn().expect("spawn netns holder"),
        }
    }

    fn path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/{}/ns/net", self.child.id()))
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for NetnsHolder {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A test's bridge, state and containers; removes everything on drop.
struct TestNet {
    net: Networking,
    cfg: BridgeConfig,
    subnet: Ipv4Subnet,
    ids: Vec<ContainerId>,
    ip_forward: String,
    _state: tempfile::TempDir,
    _serial: std::sync::MutexGuard<'static, ()>,
}

impl TestNet {
    fn new(n: u8, publish: &[&str]) -> Self {
        let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let state = tempfile::tempdir().unwrap();
        let cfg = BridgeConfig {
            bridge: format!("ilt{}x{n}", std::process::id() % 1000),
            subnet: format!("10.213.{}.0/24", 100 + u16::from(n)),
            publish: publish.iter().map(|p| p.parse().unwrap()).collect(),
        };
        let subnet = cfg.validate().unwrap();
        TestNet {
            net: Networking::new(SystemHost::default(), state.path()),
            subnet,
            cfg,
            ids: Vec::new(),
            ip_forward: std::fs::read_to_string(IP_FORWARD).unwrap_or_else(|_| "0\n".into()),
            _state: state,
            _serial: serial,
        }
    }

    fn mode(&self) -> NetworkMode {
        NetworkMode::Bridge(self.cfg.clone())
    }

    fn attach(&mut self, id: &ContainerId, ns: &NetnsHolder) -> Attachment {
        self.ids.push(id.clone());
        self.net
            .attach(id, &ns.path(), &self.mode())
            .unwrap()
            .expect("bridge attach returns an attachment")
    }

    fn lease_file_count(&self) -> usize {
        std::fs::read_dir(self.net.state_dir().join("ipam").join(&self.cfg.bridge))
            .map(|d| {
                d.filter(|e| {
                    e.as_ref()
                        .is_ok_and(|e| e.file_name().to_string_lossy().parse::<IpAddr>().is_ok())
                })
                .count()
            })
            .unwrap_or(0)
    }

    /// Our slice of the iptables rules: anything naming CNI chains, our bridge or subnet.
    fn our_rules(&self) -> Vec<String> {
        let prefix = self.cfg.subnet.trim_end_matches("0/24");
        iptables_rules()
            .into_iter()
            .filter(|l| l.contains("CNI-") || l.contains(&self.cfg.bridge) || l.contains(prefix))
            .collect()
    }
}

impl Drop for TestNet {
    fn drop(&mut self) {
        let mode = self.mode();
        for id in &self.ids {
            if let Err(e) = self.net.cleanup_leftovers(id, &mode) {
                eprintln!("cleanup of {id} failed: {e}");
            }
        }
        if let Err(e) = self.net.remove_bridge(&self.cfg) {
            eprintln!("removing bridge {} failed: {e}", self.cfg.bridge);
        }
        let _ = std::fs::write(IP_FORWARD, &self.ip_forward);
    }
}

/// iptables-save's rules and user chains per table, counters dropped, sorted (tests only).
fn iptables_rules() -> Vec<String> {
    let out = Command::new("iptables-save")
        .output()
        .expect("iptables-save");
    let mut table = String::new();
    let mut lines = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        if let Some(t) = line.strip_prefix('*') {
            table = t.to_owned();
        } else if line.starts_with("-A ") {
            lines.push(format!("{table} {line}"));
        } else if let Some(decl) = line.strip_prefix(':') {
            let mut parts = decl.split_whitespace();
            if let (Some(chain), Some("-")) = (parts.next(), parts.next()) {
                lines.push(format!("{table} chain {chain}"));
            }
        }
    }
    lines.sort();
    lines
}

/// (name, is up, IPv4 addresses) of every interface, seen from inside `netns`.
fn interfaces_in(netns: &Path) -> Vec<(String, bool, Vec<Ipv4Addr>)> {
    in_netns(netns, || {
        let mut out: Vec<(String, bool, Vec<Ipv4Addr>)> = Vec::new();
        let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
        // SAFETY: getifaddrs fills `head` with a list we free below.
        assert_eq!(unsafe { libc::getifaddrs(&mut head) }, 0);
        let mut cur = head;
        while !cur.is_null() {
            // SAFETY: cur is a node of the list getifaddrs returned.
            let ifa = unsafe { &*cur };
            // SAFETY: ifa_name is a NUL-terminated string owned by the list.
            let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) }
                .to_string_lossy()
                .into_owned();
            let up = ifa.ifa_flags & libc::IFF_UP as u32 != 0;
            let idx = out
                .iter()
                .position(|(n, _, _)| *n == name)
                .unwrap_or_else(|| {
                    out.push((name.clone(), up, Vec::new()));
                    out.len() - 1
                });
            let family = if ifa.ifa_addr.is_null() {
                0
            } else {
                // SAFETY: a non-null ifa_addr points at a sockaddr owned by the list.
                i32::from(unsafe { (*ifa.ifa_addr).sa_family })
            };
            if family == libc::AF_INET {
                // SAFETY: family AF_INET means it is a sockaddr_in.
                let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
                out[idx]
                    .2
                    .push(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)));
            }
            cur = ifa.ifa_next;
        }
        // SAFETY: head came from getifaddrs and is freed once.
        unsafe { libc::freeifaddrs(head) };
        Ok(out)
    })
    .unwrap()
}

/// The default route's gateway inside `netns` (from /proc/thread-self/net/route).
fn default_gateway_in(netns: &Path) -> Option<Ipv4Addr> {
    in_netns(netns, || {
        let table = std::fs::read_to_string("/proc/thread-self/net/route").unwrap();
        Ok(table.lines().skip(1).find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.get(1) == Some(&"00000000") && f.get(7) == Some(&"00000000"))
                .then(|| u32::from_str_radix(f[2], 16).ok())
                .flatten()
                .map(|gw| Ipv4Addr::from(u32::from_be(gw)))
        }))
    })
    .unwrap()
}

/// Connects to `addr` from inside `netns`, sends "ping", expects "pong".
fn ping_from(netns: &Path, addr: SocketAddr) -> Result<(), String> {
    in_netns(netns, move || {
        Ok((|| -> std::io::Result<()> {
            let mut s = TcpStream::connect_timeout(&addr, TIMEOUT)?;
            s.set_read_timeout(Some(TIMEOUT))?;
            s.write_all(b"ping")?;
            let mut buf = [0u8; 4];
            s.read_exact(&mut buf)?;
            assert_eq!(&buf, b"pong");
            Ok(())
        })())
    })
    .unwrap()
    .map_err(|e| format!("connect to {addr} from {}: {e}", netns.display()))
}

/// Answers one "ping" with "pong" on `listener`, in a thread.
fn serve_once(listener: TcpListener) -> std::thread::JoinHandle<std::io::Result<()>> {
    std::thread::spawn(move || {
        listener.set_nonblocking(false)?;
        let (mut s, _) = listener.accept()?;
        s.set_read_timeout(Some(TIMEOUT))?;
        let mut buf = [0u8; 4];
        s.read_exact(&mut buf)?;
        s.write_all(b"pong")
    })
}

#[test]
fn bridge_attach_configures_the_namespace_and_reaches_the_host() {
    require_root_and_plugins!();
    let mut t = TestNet::new(1, &[]);
    let before = t.our_rules();
    let ns1 = NetnsHolder::new();
    let ns2 = NetnsHolder::new();
    let a1 = t.attach(&cid("c1"), &ns1);
    let a2 = t.attach(&cid("c2"), &ns2);

    let IpAddr::V4(ip1) = a1.ip else {
        panic!("not IPv4: {a1:?}")
    };
    let IpAddr::V4(gw) = a1.gateway else {
        panic!("not IPv4: {a1:?}")
    };
    assert!(t.subnet.contains(ip1), "{ip1} not in {}", t.subnet);
    assert_eq!(a1.prefix, 24);
    assert_ne!(a1.ip, a2.ip, "two containers got the same address");
    assert_eq!(a1.gateway, a2.gateway);
    assert_eq!(t.lease_file_count(), 2);

    let ifs = interfaces_in(&ns1.path());
    let eth0 = ifs
        .iter()
        .find(|(n, _, _)| n == "eth0")
        .expect("eth0 inside");
    assert!(eth0.1 && eth0.2.contains(&ip1), "{ifs:?}");
    let lo = ifs.iter().find(|(n, _, _)| n == "lo").expect("lo inside");
    assert!(lo.1, "lo is down: {ifs:?}");
    assert_eq!(default_gateway_in(&ns1.path()), Some(gw));
    let veth = a1.host_veth.clone().expect("host veth name");
    assert_eq!(
        link::link_master(&veth).as_deref(),
        Some(t.cfg.bridge.as_str())
    );

    // The host side of the bridge is reachable from the container.
    let listener = TcpListener::bind((gw, 0)).unwrap();
    let addr = listener.local_addr().unwrap();
    let server = serve_once(listener);
    ping_from(&ns1.path(), addr).unwrap();
    server.join().unwrap().unwrap();

    let mode = t.mode();
    t.net.detach(&cid("c1"), &ns1.path(), &mode).unwrap();
    t.net.detach(&cid("c2"), &ns2.path(), &mode).unwrap();
    assert!(!link::link_exists(&veth), "veth {veth} survived detach");
    assert!(!interfaces_in(&ns1.path())
        .iter()
        .any(|(n, _, _)| n == "eth0"));
    assert_eq!(t.lease_file_count(), 0, "leases left");
    t.net.detach(&cid("c1"), &ns1.path(), &mode).unwrap();
    // The last detach took the bridge and its rule along.
    assert!(
        !link::link_exists(&t.cfg.bridge),
        "bridge left after the last detach"
    );
    assert_eq!(t.our_rules(), before, "iptables rules left behind");

    let removed = t.net.remove_bridge(&t.cfg).unwrap();
    assert!(
        removed.iter().all(|r| r.starts_with("state directory")),
        "{removed:?}"
    );
}

#[test]
fn published_port_reaches_a_server_in_the_container() {
    require_root_and_plugins!();
    let mut t = TestNet::new(2, &["18080:80"]);
    let before = t.our_rules();
    let ns = NetnsHolder::new();
    let inside = in_netns(&ns.path(), || Ok(TcpListener::bind("0.0.0.0:80")))
        .unwrap()
        .unwrap();
    let a = t.attach(&cid("p1"), &ns);
    assert_eq!(a.publish.len(), 1);
    let server = serve_once(inside);
    let mut s = TcpStream::connect_timeout(&SocketAddr::new(a.gateway, 18080), TIMEOUT).unwrap();
    s.set_read_timeout(Some(TIMEOUT)).unwrap();
    s.write_all(b"ping").unwrap();
    let mut buf = [0u8; 4];
    s.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"pong");
    server.join().unwrap().unwrap();
    let during = t.our_rules();
    assert!(
        during.iter().any(|l| l.contains("--dport 18080")),
        "{during:?}"
    );

    t.net.detach(&cid("p1"), &ns.path(), &t.mode()).unwrap();
    let after_detach = t.our_rules();
    let ip = a.ip.to_string();
    assert!(
        !after_detach
            .iter()
            .any(|l| l.contains("CNI-DN-") || l.contains(&ip)),
        "per-container rules left: {after_detach:?}"
    );
    t.net.remove_bridge(&t.cfg).unwrap();
    assert_eq!(t.our_rules(), before, "iptables rules left behind");
}

#[test]
fn cleanup_leftovers_after_the_namespace_died() {
    require_root_and_plugins!();
    let mut t = TestNet::new(3, &["18081:81/udp", "18082:82"]);
    let before = t.our_rules();
    let mut ns = NetnsHolder::new();
    let a = t.attach(&cid("k1"), &ns);
    let veth = a.host_veth.clone().unwrap();
    ns.kill(); // the runtime and its container are gone; nothing detached
    let removed = t.net.cleanup_leftovers(&cid("k1"), &t.mode()).unwrap();
    assert!(
        removed.iter().any(|r| r.contains(&a.ip.to_string())),
        "{removed:?}"
    );
    assert!(
        removed.iter().any(|r| r.contains("18082:82")),
        "{removed:?}"
    );
    assert_eq!(t.lease_file_count(), 0);
    assert!(!link::link_exists(&veth), "veth {veth} survived");
    assert!(!t.our_rules().iter().any(|l| l.contains("CNI-DN-")));
    assert!(t.net.recorded_attachments().unwrap().is_empty());
    assert!(t
        .net
        .cleanup_leftovers(&cid("k1"), &t.mode())
        .unwrap()
        .is_empty());
    t.net.remove_bridge(&t.cfg).unwrap();
    assert_eq!(t.our_rules(), before, "iptables rules left behind");
}

#[test]
fn network_none_brings_loopback_up() {
    require_root_and_plugins!();
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let ns = NetnsHolder::new();
    let lo_up = |ns: &NetnsHolder| {
        interfaces_in(&ns.path())
            .iter()
            .any(|(n, up, _)| n == "lo" && *up)
    };
    assert!(!lo_up(&ns));
    let net = Networking::system();
    assert!(net
        .attach(&cid("n1"), &ns.path(), &NetworkMode::None)
        .unwrap()
        .is_none());
    assert!(lo_up(&ns));
    net.detach(&cid("n1"), &ns.path(), &NetworkMode::None)
        .unwrap();

    let ns2 = NetnsHolder::new();
    in_netns(&ns2.path(), loopback_up).unwrap();
    assert!(lo_up(&ns2));
    // 127.0.0.1 works inside.
    let addrs = interfaces_in(&ns2.path());
    assert!(
        addrs
            .iter()
            .any(|(n, _, a)| n == "lo" && a.contains(&Ipv4Addr::LOCALHOST)),
        "{addrs:?}"
    );
}

#[test]
fn a_vm_tap_makes_the_bridge_that_containers_then_share() {
    require_root_and_plugins!();
    let mut t = TestNet::new(5, &[]);
    let before = t.our_rules();
    assert!(!link::link_exists(&t.cfg.bridge));
    let vm = cid("vm1");
    t.ids.push(vm.clone());
    let tap = t.net.attach_tap(&vm, &t.cfg).unwrap();
    assert!(t.subnet.contains(tap.ip), "{tap:?}");
    assert_eq!(tap.gateway, Ipv4Addr::from(u32::from(t.subnet.network) + 1));
    assert_eq!(tap.tap, tap_name(tap.ip, t.subnet));
    assert_eq!(
        link::link_master(&tap.tap).as_deref(),
        Some(t.cfg.bridge.as_str())
    );
    let flags = std::fs::read_to_string(format!("/sys/class/net/{}/flags", tap.tap)).unwrap();
    let flags = u32::from_str_radix(flags.trim().trim_start_matches("0x"), 16).unwrap();
    assert_ne!(flags & libc::IFF_UP as u32, 0, "tap is down");
    // The bridge we made holds the gateway, as the CNI plugin would have made it.
    let listener = TcpListener::bind((tap.gateway, 0)).unwrap();
    assert_eq!(t.lease_file_count(), 1);

    // A container joins the same bridge through the CNI plugin and reaches the host.
    let ns = NetnsHolder::new();
    let a = t.attach(&cid("c1"), &ns);
    assert_ne!(
        a.ip,
        IpAddr::V4(tap.ip),
        "the VM's address went to a container"
    );
    assert_eq!(a.gateway, IpAddr::V4(tap.gateway));
    let addr = listener.local_addr().unwrap();
    let server = serve_once(listener);
    ping_from(&ns.path(), addr).unwrap();
    server.join().unwrap().unwrap();
    t.net.detach(&cid("c1"), &ns.path(), &t.mode()).unwrap();

    // The tap is gone with its last descriptor; detach releases the lease.
    let name = tap.tap.clone();
    drop(tap.fd);
    assert!(
        !link::link_exists(&name),
        "tap {name} outlived its descriptor"
    );
    t.net.detach_tap(&vm, &t.cfg).unwrap();
    assert_eq!(t.lease_file_count(), 0, "leases left");
    assert!(t.net.recorded_taps().unwrap().is_empty());
    t.net.remove_bridge(&t.cfg).unwrap();
    assert!(!link::link_exists(&t.cfg.bridge));
    assert_eq!(t.our_rules(), before, "iptables rules left behind");
}
