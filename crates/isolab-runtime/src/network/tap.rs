//! Kernel interfaces for virtual machines on the bridge: the bridge itself (made
//! here when no container made it first, with the address the CNI bridge plugin
//! would give it) and tap devices enslaved to it, all by ioctl on a datagram
//! socket and `/dev/net/tun` — no tools.
//!
//! A tap is made *non-persistent*: the kernel removes it when the last file
//! descriptor on it closes, i.e. when the VM's QEMU (which inherits it) and the
//! caller are gone, however they ended. A killed run leaves no tap behind, only
//! its address lease, which gc releases from the attachment record.

use std::ffi::c_char;
use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

use super::config::{validate_ifname, Ipv4Subnet};
use super::NetworkError;

/// The prefix of every tap isolab makes (`isolabvm` + the lease's host number in
/// hex), so that gc and people can tell them from other links.
pub const TAP_PREFIX: &str = "isolabvm";

/// `SIOCBRADDBR` and `SIOCBRADDIF` of `<linux/sockios.h>` (the libc crate has them
/// for Android only).
const SIOCBRADDBR: libc::c_ulong = 0x89a0;
const SIOCBRADDIF: libc::c_ulong = 0x89a2;

/// The clone device of the tun/tap driver.
const TUN_DEVICE: &str = "/dev/net/tun";

/// The tap name for `ip` in `subnet`: [`TAP_PREFIX`] + the host number of `ip` in
/// hex (`10.213.0.5` in `10.213.0.0/24` → `isolabvm5`). The allocator hands each
/// address to one holder at a time, so two live VMs never share a name; a /8 needs
/// at most six hex digits, which keeps the name within Linux's 15 bytes.
pub fn tap_name(ip: Ipv4Addr, subnet: Ipv4Subnet) -> String {
    let host = u32::from(ip) - u32::from(subnet.network);
    format!("{TAP_PREFIX}{host:x}")
}

/// A MAC address for the guest with address `ip`: locally administered, unicast
/// (`02:00:` + the four bytes of `ip`), so unique wherever the address is.
pub fn guest_mac(ip: Ipv4Addr) -> String {
    let [a, b, c, d] = ip.octets();
    format!("02:00:{a:02x}:{b:02x}:{c:02x}:{d:02x}")
}

fn link_err<'a>(name: &'a str, op: &'static str) -> impl FnOnce(io::Error) -> NetworkError + 'a {
    move |source| NetworkError::Link {
        name: name.to_owned(),
        op,
        source,
    }
}

/// A datagram socket for interface ioctls.
fn ioctl_socket(name: &str) -> Result<OwnedFd, NetworkError> {
    // SAFETY: plain socket(2) call; the result is checked before use.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(link_err(name, "socket")(io::Error::last_os_error()));
    }
    // SAFETY: fd is a fresh, valid descriptor we own from here on.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// An `ifreq` naming `name` (validated: at most 15 bytes, so NUL-terminated).
fn ifreq(name: &str) -> Result<libc::ifreq, NetworkError> {
    validate_ifname(name)?;
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *dst = src as c_char;
    }
    Ok(req)
}

fn sockaddr_in(ip: Ipv4Addr) -> libc::sockaddr {
    let sin = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: 0,
        sin_addr: libc::in_addr {
            s_addr: u32::from(ip).to_be(),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: sockaddr_in and sockaddr have the same size on Linux; both are plain data.
    unsafe { std::mem::transmute::<libc::sockaddr_in, libc::sockaddr>(sin) }
}

/// Sets IFF_UP on `name`.
fn set_up(sock: &OwnedFd, name: &str) -> Result<(), NetworkError> {
    let mut req = ifreq(name)?;
    // SAFETY: SIOCGIFFLAGS reads ifr_name and writes ifr_ifru.ifru_flags of a valid ifreq.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) } < 0 {
        return Err(link_err(name, "SIOCGIFFLAGS")(io::Error::last_os_error()));
    }
    // SAFETY: the kernel just filled ifru_flags; updating the union field is sound.
    unsafe { req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short };
    // SAFETY: SIOCSIFFLAGS reads a valid ifreq.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &req) } < 0 {
        return Err(link_err(name, "SIOCSIFFLAGS")(io::Error::last_os_error()));
    }
    Ok(())
}

/// Makes sure the bridge `name` exists, holds the subnet's first address (the
/// gateway, as the CNI bridge plugin's `isGateway` gives it), is up, and that the
/// host forwards IPv4. Returns `true` when it created the bridge.
pub fn ensure_bridge(name: &str, subnet: Ipv4Subnet) -> Result<bool, NetworkError> {
    let sock = ioctl_socket(name)?;
    let created = if super::link::link_exists(name) {
        false
    } else {
        let cname = ifreq(name)?.ifr_name;
        // SAFETY: SIOCBRADDBR reads a NUL-terminated name of at most IFNAMSIZ bytes.
        let rc = unsafe { libc::ioctl(sock.as_raw_fd(), SIOCBRADDBR, cname.as_ptr()) };
        match rc {
            0 => true,
            // Another process made it meanwhile.
            _ if io::Error::last_os_error().raw_os_error() == Some(libc::EEXIST) => false,
            _ => return Err(link_err(name, "SIOCBRADDBR")(io::Error::last_os_error())),
        }
    };
    let gateway = Ipv4Addr::from(u32::from(subnet.network) + 1);
    let mut req = ifreq(name)?;
    // SAFETY: SIOCGIFADDR reads ifr_name and writes ifr_addr of a valid ifreq.
    let has_addr = unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFADDR, &mut req) } == 0;
    if !has_addr {
        let mut req = ifreq(name)?;
        req.ifr_ifru.ifru_addr = sockaddr_in(gateway);
        // SAFETY: SIOCSIFADDR reads a valid ifreq with an AF_INET address.
        if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFADDR, &req) } < 0 {
            return Err(link_err(name, "SIOCSIFADDR")(io::Error::last_os_error()));
        }
        let mask = Ipv4Addr::from(u32::MAX << (32 - u32::from(subnet.prefix)));
        req.ifr_ifru.ifru_netmask = sockaddr_in(mask);
        // SAFETY: SIOCSIFNETMASK reads a valid ifreq with an AF_INET mask.
        if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFNETMASK, &req) } < 0 {
            return Err(link_err(name, "SIOCSIFNETMASK")(io::Error::last_os_error()));
        }
    }
    set_up(&sock, name)?;
    let forward = Path::new("/proc/sys/net/ipv4/ip_forward");
    std::fs::write(forward, "1").map_err(|source| NetworkError::State {
        path: forward.to_owned(),
        op: "write",
        source,
    })?;
    Ok(created)
}

/// Creates the non-persistent tap `name` (no packet information header),
/// enslaves it to `bridge` and brings it up. The tap lives as long as the
/// returned descriptor (and its copies, e.g. in QEMU).
pub fn create_tap(name: &str, bridge: &str) -> Result<OwnedFd, NetworkError> {
    let mut req = ifreq(name)?;
    let path = std::ffi::CString::new(TUN_DEVICE).unwrap_or_default();
    // SAFETY: open(2) on a NUL-terminated path; the result is checked.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(link_err(name, "open /dev/net/tun")(
            io::Error::last_os_error(),
        ));
    }
    // SAFETY: fd is fresh and owned from here on.
    let tap = unsafe { OwnedFd::from_raw_fd(fd) };
    req.ifr_ifru.ifru_flags = (libc::IFF_TAP | libc::IFF_NO_PI) as libc::c_short;
    // SAFETY: TUNSETIFF reads ifr_name and ifru_flags of a valid ifreq.
    if unsafe { libc::ioctl(tap.as_raw_fd(), libc::TUNSETIFF, &req) } < 0 {
        return Err(link_err(name, "TUNSETIFF")(io::Error::last_os_error()));
    }
    let sock = ioctl_socket(bridge)?;
    let cname = std::ffi::CString::new(name).unwrap_or_default();
    // SAFETY: if_nametoindex reads a valid NUL-terminated string.
    let index = unsafe { libc::if_nametoindex(cname.as_ptr()) };
    if index == 0 {
        return Err(link_err(name, "if_nametoindex")(io::Error::last_os_error()));
    }
    let mut req = ifreq(bridge)?;
    req.ifr_ifru.ifru_ifindex = index as libc::c_int;
    // SAFETY: SIOCBRADDIF reads the bridge's name and the port's index of a valid ifreq.
    if unsafe { libc::ioctl(sock.as_raw_fd(), SIOCBRADDIF, &req) } < 0 {
        return Err(link_err(bridge, "SIOCBRADDIF")(io::Error::last_os_error()));
    }
    set_up(&sock, name)?;
    Ok(tap)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tap_names_carry_the_prefix_and_the_host_number() {
        let s24 = Ipv4Subnet::parse("10.213.0.0/24").unwrap();
        assert_eq!(tap_name(Ipv4Addr::new(10, 213, 0, 5), s24), "isolabvm5");
        assert_eq!(tap_name(Ipv4Addr::new(10, 213, 0, 254), s24), "isolabvmfe");
        let s8 = Ipv4Subnet::parse("10.0.0.0/8").unwrap();
        let longest = tap_name(Ipv4Addr::new(10, 255, 255, 254), s8);
        assert_eq!(longest, "isolabvmfffffe");
        assert!(validate_ifname(&longest).is_ok());
    }

    #[test]
    fn guest_macs_are_local_unicast_and_follow_the_address() {
        let mac = guest_mac(Ipv4Addr::new(10, 213, 0, 5));
        assert_eq!(mac, "02:00:0a:d5:00:05");
        let first = u8::from_str_radix(&mac[..2], 16).unwrap();
        assert_eq!(first & 0b11, 0b10, "locally administered, unicast");
    }

    #[test]
    fn bad_names_are_refused_before_any_ioctl() {
        let e = create_tap("a-name-far-too-long", "isolab0").unwrap_err();
        assert!(matches!(e, NetworkError::InvalidBridgeName { .. }), "{e}");
    }
}
