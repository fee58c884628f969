//! Kernel interfaces for links: `lo` up by ioctl, link deletion by
//! rtnetlink, and running a closure inside another network namespace.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

use super::NetworkError;

/// Brings `lo` up in the calling thread's network namespace
/// (SIOCGIFFLAGS/SIOCSIFFLAGS on a datagram socket; no tools).
pub fn loopback_up() -> Result<(), NetworkError> {
    let err = |op, source| NetworkError::Link {
        name: "lo".to_owned(),
        op,
        source,
    };
    // SAFETY: plain socket(2) call; the result is checked before use.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(err("socket", io::Error::last_os_error()));
    }
    // SAFETY: fd is a fresh, valid descriptor we own from here on.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS reads ifr_name and writes ifr_ifru.ifru_flags of a valid ifreq.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) } < 0 {
        return Err(err("SIOCGIFFLAGS", io::Error::last_os_error()));
    }
    // SAFETY: the kernel just filled ifru_flags; reading and updating the union field is sound.
    unsafe {
        req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
    }
    // SAFETY: SIOCSIFFLAGS reads a valid ifreq.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &req) } < 0 {
        return Err(err("SIOCSIFFLAGS", io::Error::last_os_error()));
    }
    Ok(())
}

/// Runs `f` on a new thread that joined the network namespace at `netns`.
/// Only that short-lived thread changes namespace; the caller's stays.
pub fn in_netns<T: Send + 'static>(
    netns: &Path,
    f: impl FnOnce() -> Result<T, NetworkError> + Send + 'static,
) -> Result<T, NetworkError> {
    let ns_err = |op, source| NetworkError::Netns {
        path: netns.to_owned(),
        op,
        source,
    };
    let file = File::open(netns).map_err(|e| ns_err("open", e))?;
    let handle = std::thread::spawn(move || -> Result<Result<T, NetworkError>, io::Error> {
        // SAFETY: setns(2) on a valid namespace fd; affects only this thread,
        // which ends when the closure returns.
        if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(f())
    });
    match handle.join() {
        Ok(Ok(result)) => result,
        Ok(Err(e)) => Err(ns_err("setns", e)),
        Err(_) => Err(ns_err(
            "run in namespace",
            io::Error::other("the namespace thread panicked"),
        )),
    }
}

/// Deletes the link `name` in the current network namespace via rtnetlink
/// (RTM_DELLINK). Returns `false` when no such link exists.
pub fn delete_link(name: &str) -> Result<bool, NetworkError> {
    let err = |op, source| NetworkError::Link {
        name: name.to_owned(),
        op,
        source,
    };
    let Ok(cname) = std::ffi::CString::new(name) else {
        return Ok(false);
    };
    // SAFETY: if_nametoindex reads a valid NUL-terminated string.
    let index = unsafe { libc::if_nametoindex(cname.as_ptr()) };
    if index == 0 {
        return Ok(false);
    }
    // SAFETY: plain socket(2) call; checked below.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_ROUTE,
        )
    };
    if fd < 0 {
        return Err(err("netlink socket", io::Error::last_os_error()));
    }
    // SAFETY: fd is fresh and owned from here on.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };

    #[repr(C)]
    struct Request {
        hdr: libc::nlmsghdr,
        ifi: IfInfoMsg,
    }
    #[repr(C)]
    struct IfInfoMsg {
        family: u8,
        pad: u8,
        kind: u16,
        index: i32,
        flags: u32,
        change: u32,
    }
    let req = Request {
        hdr: libc::nlmsghdr {
            nlmsg_len: std::mem::size_of::<Request>() as u32,
            nlmsg_type: libc::RTM_DELLINK,
            nlmsg_flags: (libc::NLM_F_REQUEST | libc::NLM_F_ACK) as u16,
            nlmsg_seq: 1,
            nlmsg_pid: 0,
        },
        ifi: IfInfoMsg {
            family: libc::AF_UNSPEC as u8,
            pad: 0,
            kind: 0,
            index: i32::try_from(index).unwrap_or(i32::MAX),
            flags: 0,
            change: 0,
        },
    };
    // SAFETY: sockaddr_nl is plain old data; zero means "the kernel".
    let mut kernel: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    kernel.nl_family = libc::AF_NETLINK as u16;
    // SAFETY: we pass a pointer to `req` with its exact size and a valid sockaddr_nl.
    let sent = unsafe {
        libc::sendto(
            sock.as_raw_fd(),
            (&req as *const Request).cast(),
            std::mem::size_of::<Request>(),
            0,
            (&kernel as *const libc::sockaddr_nl).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as u32,
        )
    };
    if sent < 0 {
        return Err(err("RTM_DELLINK send", io::Error::last_os_error()));
    }
    let mut buf = [0u8; 1024];
    // SAFETY: recv into a buffer we own, with its length.
    let n = unsafe { libc::recv(sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n < 0 {
        return Err(err("RTM_DELLINK receive", io::Error::last_os_error()));
    }
    let n = n as usize;
    let hdr_len = std::mem::size_of::<libc::nlmsghdr>();
    if n < hdr_len + 4 {
        return Err(err(
            "RTM_DELLINK receive",
            io::Error::other("short netlink reply"),
        ));
    }
    let msg_type = u16::from_ne_bytes([buf[4], buf[5]]);
    if msg_type != libc::NLMSG_ERROR as u16 {
        return Err(err(
            "RTM_DELLINK receive",
            io::Error::other("unexpected netlink reply"),
        ));
    }
    let code = i32::from_ne_bytes([
        buf[hdr_len],
        buf[hdr_len + 1],
        buf[hdr_len + 2],
        buf[hdr_len + 3],
    ]);
    match -code {
        0 => Ok(true),
        libc::ENODEV => Ok(false),
        errno => Err(err("RTM_DELLINK", io::Error::from_raw_os_error(errno))),
    }
}

/// Whether a link of that name exists in the current network namespace.
pub fn link_exists(name: &str) -> bool {
    Path::new("/sys/class/net").join(name).exists()
}

/// The bridge a link is enslaved to (from `/sys/class/net/<name>/master`).
pub fn link_master(name: &str) -> Option<String> {
    let target = std::fs::read_link(Path::new("/sys/class/net").join(name).join("master")).ok()?;
    target.file_name().map(|n| n.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deleting_a_missing_link_is_not_an_error() {
        assert!(!delete_link("isolab-nope0").unwrap());
        assert!(!delete_link("bad\0name").unwrap());
    }

    #[test]
    fn in_netns_reports_a_missing_namespace() {
        let e = in_netns(Path::new("/nonexistent/ns"), || Ok(())).unwrap_err();
        assert!(matches!(e, NetworkError::Netns { op: "open", .. }), "{e}");
    }
}
