//! Building seccomp filters with libseccomp and taking the classic BPF program out of it.
//!
//! libseccomp resolves syscall names for every architecture it knows, translates a rule to
//! each architecture of the filter (skipping names an architecture does not have, and
//! rewriting `socket`-family calls to `socketcall`/`ipc` on x86), compares arguments itself
//! (all 64 bits on 64-bit architectures) and lays the program out. The program is exported
//! to memory in the parent, through a memfd (`seccomp_export_bpf_mem` only exists since
//! libseccomp 2.6; Debian bookworm has 2.5.4), so that the container process only hands the
//! instructions ([`CompiledFilter`]) to `seccomp(2)`, without allocating and without
//! libseccomp.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::fd::{FromRawFd, OwnedFd};

use libseccomp::{ScmpAction, ScmpArch, ScmpArgCompare, ScmpFilterContext, ScmpSyscall};

use crate::security::error::SecurityError;

/// One classic BPF instruction, the kernel's `struct sock_filter`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SockFilter {
    /// Opcode.
    pub code: u16,
    /// Jump offset when true.
    pub jt: u8,
    /// Jump offset when false.
    pub jf: u8,
    /// Operand.
    pub k: u32,
}

/// A classic BPF program, as `seccomp(SECCOMP_SET_MODE_FILTER)` takes it.
pub type BpfProgram = Vec<SockFilter>;

/// The most instructions the kernel accepts in one program (`BPF_MAXINSNS`).
pub const BPF_MAXINSNS: usize = 4096;

/// `SECCOMP_FILTER_FLAG_TSYNC`.
pub const FLAG_TSYNC: u32 = 1;
/// `SECCOMP_FILTER_FLAG_LOG`.
pub const FLAG_LOG: u32 = 2;
/// `SECCOMP_FILTER_FLAG_SPEC_ALLOW`.
pub const FLAG_SPEC_ALLOW: u32 = 4;
/// `SECCOMP_FILTER_FLAG_TSYNC_ESRCH`: with `TSYNC`, fail with `ESRCH` rather than return
/// the id of the thread that could not be synchronised.
pub const FLAG_TSYNC_ESRCH: u32 = 16;

/// A compiled filter and the `seccomp(2)` flags to install it with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompiledFilter {
    /// The program.
    pub program: BpfProgram,
    /// `SECCOMP_FILTER_FLAG_*` bits.
    pub flags: u32,
}

/// A libseccomp filter being built; `what` in errors names the filter (`Docker's default
/// profile`, `the OCI profile`).
pub(crate) struct FilterBuilder {
    ctx: ScmpFilterContext,
    what: &'static str,
}

impl FilterBuilder {
    /// A filter with this default action, for exactly the given architectures (the native
    /// one is removed unless listed), killing the process on any other.
    pub(crate) fn new(
        what: &'static str,
        default: ScmpAction,
        arches: &[ScmpArch],
    ) -> Result<FilterBuilder, SecurityError> {
        let refused =
            |step: String| move |source| SecurityError::CompileSeccomp { what, step, source };
        let mut ctx = ScmpFilterContext::new(default)
            .map_err(refused(format!("the default action {default:?}")))?;
        ctx.set_act_badarch(ScmpAction::KillProcess)
            .map_err(refused("the bad-architecture action KILL_PROCESS".into()))?;
        for &arch in arches {
            ctx.add_arch(arch)
                .map_err(refused(format!("architecture {arch:?}")))?;
        }
        let native = ScmpArch::native();
        if !arches.is_empty() && !arches.contains(&native) {
            ctx.remove_arch(native).map_err(refused(format!(
                "removing the native architecture {native:?}"
            )))?;
        }
        Ok(FilterBuilder { ctx, what })
    }

    /// Adds a rule for `syscall` (resolved by [`resolve`]); `conditions` must all hold.
    /// `describe` names the rule in the error.
    pub(crate) fn add(
        &mut self,
        action: ScmpAction,
        syscall: ScmpSyscall,
        conditions: &[ScmpArgCompare],
        describe: impl FnOnce() -> String,
    ) -> Result<(), SecurityError> {
        self.ctx
            .add_rule_conditional(action, syscall, conditions)
            .map(|_| ())
            .map_err(|source| SecurityError::CompileSeccomp {
                what: self.what,
                step: describe(),
                source,
            })
    }

    /// The filter as a BPF program in memory.
    pub(crate) fn export(&self) -> Result<BpfProgram, SecurityError> {
        let io_err = |step| move |source| SecurityError::ExportSeccomp { step, source };
        // SAFETY: memfd_create with a NUL-terminated name and flags; no memory is shared.
        let fd = unsafe { libc::memfd_create(c"isolab-seccomp".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(io_err("memfd_create")(std::io::Error::last_os_error()));
        }
        // SAFETY: `fd` was just returned by memfd_create and is owned by nobody else.
        let mut file = File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        self.ctx
            .export_bpf(&file)
            .map_err(|source| SecurityError::CompileSeccomp {
                what: self.what,
                step: "seccomp_export_bpf".into(),
                source,
            })?;
        file.seek(SeekFrom::Start(0))
            .map_err(io_err("lseek on the memfd"))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(io_err("read from the memfd"))?;
        let program =
            decode(&bytes).ok_or(SecurityError::SeccompBadExport { bytes: bytes.len() })?;
        if program.len() > BPF_MAXINSNS {
            return Err(SecurityError::SeccompTooLong {
                what: self.what,
                instructions: program.len(),
            });
        }
        Ok(program)
    }
}

/// `name` as libseccomp numbers it for the native architecture (a negative "pseudo" number
/// when the native architecture lacks it but another has it: libseccomp then adds the rule
/// only where it exists). `None` when libseccomp does not know the name at all.
pub(crate) fn resolve(name: &str) -> Option<ScmpSyscall> {
    ScmpSyscall::from_name(name).ok()
}

/// Raw `struct sock_filter` array (native endianness) → instructions; `None` when the length
/// is not a non-zero multiple of 8.
fn decode(bytes: &[u8]) -> Option<BpfProgram> {
    let instructions = bytes.chunks_exact(8);
    if bytes.is_empty() || !instructions.remainder().is_empty() {
        return None;
    }
    Some(
        instructions
            .map(|i| SockFilter {
                code: u16::from_ne_bytes([i[0], i[1]]),
                jt: i[2],
                jf: i[3],
                k: u32::from_ne_bytes([i[4], i[5], i[6], i[7]]),
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_sock_filters() {
        let mut raw = Vec::new();
        raw.extend_from_slice(&0x15u16.to_ne_bytes());
        raw.extend_from_slice(&[1, 2]);
        raw.extend_from_slice(&0xc000_003eu32.to_ne_bytes());
        assert_eq!(
            decode(&raw).unwrap(),
            [SockFilter {
                code: 0x15,
                jt: 1,
                jf: 2,
                k: 0xc000_003e
            }]
        );
        assert!(decode(&raw[..7]).is_none());
        assert!(decode(&[]).is_none());
    }

    #[test]
    fn exports_a_small_filter() {
        let mut f = FilterBuilder::new("a test filter", ScmpAction::Allow, &[]).unwrap();
        f.add(
            ScmpAction::Errno(1),
            resolve("mount").unwrap(),
            &[],
            String::new,
        )
        .unwrap();
        let program = f.export().unwrap();
        // Load arch, check arch, load nr, compare, return errno, return allow, …
        assert!(program.len() > 4 && program.len() < 20, "{program:?}");
        // The last instruction is a return (BPF_RET | BPF_K = 0x06).
        assert_eq!(program.last().unwrap().code, 0x06);
        assert!(resolve("no_such_call").is_none());
    }
}
