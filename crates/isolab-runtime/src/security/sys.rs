//! The system calls the security module makes, behind a trait so that the order and the
//! arguments of [`Prepared::apply`](super::Prepared::apply) can be tested without root.
//!
//! [`LinuxSecurity`] is the real implementation: raw `prctl(2)`, `capget(2)`/`capset(2)` and
//! `seccomp(2)` calls, none of which allocates.

use std::io;

use super::seccomp::SockFilter;

use super::caps::{CapabilitySet, LAST_KNOWN_CAP};

/// The host effects of applying security settings.
pub trait SecuritySyscalls {
    /// `prctl(PR_CAPBSET_READ, cap)` for every known capability: the bounding set.
    fn read_bounding(&self) -> io::Result<CapabilitySet>;
    /// `capget(2)`: the permitted set of this thread.
    fn read_permitted(&self) -> io::Result<CapabilitySet>;
    /// `prctl(PR_CAPBSET_DROP, cap)`.
    fn drop_bounding(&mut self, cap: u8) -> io::Result<()>;
    /// `prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)`.
    fn clear_ambient(&mut self) -> io::Result<()>;
    /// `prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap)`.
    fn raise_ambient(&mut self, cap: u8) -> io::Result<()>;
    /// `capset(2)` version 3 with these three sets.
    fn set_caps(
        &mut self,
        effective: CapabilitySet,
        permitted: CapabilitySet,
        inheritable: CapabilitySet,
    ) -> io::Result<()>;
    /// `prctl(PR_SET_NO_NEW_PRIVS, 1)`.
    fn set_no_new_privs(&mut self) -> io::Result<()>;
    /// `seccomp(SECCOMP_SET_MODE_FILTER, flags, prog)` for the calling thread (`flags`:
    /// `SECCOMP_FILTER_FLAG_*`).
    fn install_filter(&mut self, program: &[SockFilter], flags: u32) -> io::Result<()>;
}

/// The real system calls of the calling thread.
#[derive(Debug, Default, Clone, Copy)]
pub struct LinuxSecurity;

/// `_LINUX_CAPABILITY_VERSION_3` (64-bit sets as two 32-bit words).
const CAP_VERSION_3: u32 = 0x2008_0522;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

#[repr(C)]
struct SockFprog {
    len: libc::c_ushort,
    filter: *const SockFilter,
}

fn check(rc: libc::c_long) -> io::Result<()> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn prctl(option: libc::c_int, arg2: libc::c_ulong) -> io::Result<libc::c_int> {
    // SAFETY: prctl with integer arguments only; the options used here take no pointers.
    let rc = unsafe { libc::prctl(option, arg2, 0 as libc::c_ulong, 0 as libc::c_ulong, 0) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

impl SecuritySyscalls for LinuxSecurity {
    fn read_bounding(&self) -> io::Result<CapabilitySet> {
        let mut bits = 0u64;
        for cap in 0..=LAST_KNOWN_CAP {
            match prctl(libc::PR_CAPBSET_READ, libc::c_ulong::from(cap)) {
                Ok(1) => bits |= 1 << cap,
                Ok(_) => {}
                // Above the kernel's CAP_LAST_CAP: not supported, so not in the set.
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => break,
                Err(e) => return Err(e),
            }
        }
        Ok(CapabilitySet::from_mask(bits))
    }

    fn read_permitted(&self) -> io::Result<CapabilitySet> {
        let mut header = CapHeader {
            version: CAP_VERSION_3,
            pid: 0,
        };
        let mut data = [CapData::default(); 2];
        // SAFETY: header and a two-element data array, as capget(2) version 3 expects; both
        // live for the duration of the call.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_capget,
                &mut header as *mut CapHeader,
                data.as_mut_ptr(),
            )
        };
        check(rc)?;
        let bits = u64::from(data[0].permitted) | (u64::from(data[1].permitted) << 32);
        Ok(CapabilitySet::from_mask(bits))
    }

    fn drop_bounding(&mut self, cap: u8) -> io::Result<()> {
        prctl(libc::PR_CAPBSET_DROP, libc::c_ulong::from(cap)).map(|_| ())
    }

    fn clear_ambient(&mut self) -> io::Result<()> {
        // SAFETY: integer arguments only.
        let rc = unsafe {
            libc::prctl(
                libc::PR_CAP_AMBIENT,
                libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
                0 as libc::c_ulong,
                0 as libc::c_ulong,
                0 as libc::c_ulong,
            )
        };
        check(libc::c_long::from(rc))
    }

    fn raise_ambient(&mut self, cap: u8) -> io::Result<()> {
        // SAFETY: integer arguments only.
        let rc = unsafe {
            libc::prctl(
                libc::PR_CAP_AMBIENT,
                libc::PR_CAP_AMBIENT_RAISE as libc::c_ulong,
                libc::c_ulong::from(cap),
                0 as libc::c_ulong,
                0 as libc::c_ulong,
            )
        };
        check(libc::c_long::from(rc))
    }

    fn set_caps(
        &mut self,
        effective: CapabilitySet,
        permitted: CapabilitySet,
        inheritable: CapabilitySet,
    ) -> io::Result<()> {
        let mut header = CapHeader {
            version: CAP_VERSION_3,
            pid: 0,
        };
        let (e, p, i) = (effective.words(), permitted.words(), inheritable.words());
        let data = [
            CapData {
                effective: e[0],
                permitted: p[0],
                inheritable: i[0],
            },
            CapData {
                effective: e[1],
                permitted: p[1],
                inheritable: i[1],
            },
        ];
        // SAFETY: header and a two-element data array, as capset(2) version 3 expects; the
        // kernel only reads the data.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_capset,
                &mut header as *mut CapHeader,
                data.as_ptr(),
            )
        };
        check(rc)
    }

    fn set_no_new_privs(&mut self) -> io::Result<()> {
        prctl(libc::PR_SET_NO_NEW_PRIVS, 1).map(|_| ())
    }

    fn install_filter(&mut self, program: &[SockFilter], flags: u32) -> io::Result<()> {
        let len = libc::c_ushort::try_from(program.len())
            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        let prog = SockFprog {
            len,
            filter: program.as_ptr(),
        };
        // SAFETY: `prog` points at `program`, which outlives the call; the kernel copies the
        // instructions (copy_from_user) and keeps no reference to our memory.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER as libc::c_ulong,
                libc::c_ulong::from(flags),
                &prog as *const SockFprog,
            )
        };
        check(rc)?;
        if rc > 0 {
            // TSYNC without TSYNC_ESRCH: the id of a thread that could not be synchronised.
            return Err(io::Error::from_raw_os_error(libc::ESRCH));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process_caps() {
        let sys = LinuxSecurity;
        let bounding = sys.read_bounding().unwrap();
        let permitted = sys.read_permitted().unwrap();
        // Whatever we run as, permitted is within bounding for a normal process started by
        // exec (both are what /proc/self/status shows).
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let field = |name: &str| {
            let line = status.lines().find(|l| l.starts_with(name)).unwrap();
            u64::from_str_radix(line.split_whitespace().nth(1).unwrap(), 16).unwrap()
        };
        assert_eq!(bounding.mask(), field("CapBnd:"));
        assert_eq!(permitted.mask(), field("CapPrm:"));
    }
}
