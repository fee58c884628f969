//! `clone3(2)` for a caller that starts a child in a cgroup with [`crate::CloneTarget`]:
//! `CLONE_INTO_CGROUP` joins the cgroup2 directory at the clone, with no migration.

/// `CLONE_INTO_CGROUP` of `<linux/sched.h>`: start the child in the cgroup2 directory
/// `clone_args.cgroup`.
pub const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// `struct clone_args` of `<linux/sched.h>` (clone3), up to `cgroup`.
#[repr(C)]
#[derive(Debug, Default)]
pub struct CloneArgs {
    /// `CLONE_*` flags.
    pub flags: u64,
    /// With `CLONE_PIDFD`: where the kernel stores the child's pidfd (an `int *`).
    pub pidfd: u64,
    /// With `CLONE_CHILD_SETTID`: where the child's tid is stored in the child.
    pub child_tid: u64,
    /// With `CLONE_PARENT_SETTID`: where the child's tid is stored in the parent.
    pub parent_tid: u64,
    /// The signal sent to the parent when the child exits (`SIGCHLD`).
    pub exit_signal: u64,
    /// The child's stack (0: a copy of the caller's).
    pub stack: u64,
    /// The size of `stack`.
    pub stack_size: u64,
    /// With `CLONE_SETTLS`: the child's thread pointer.
    pub tls: u64,
    /// The pids to ask for, one per pid namespace.
    pub set_tid: u64,
    /// The length of `set_tid`.
    pub set_tid_size: u64,
    /// With `CLONE_INTO_CGROUP`: a descriptor of the cgroup2 directory.
    pub cgroup: u64,
}

/// `clone3(2)` without `CLONE_VM`: like fork, the child gets a copy of the address
/// space and continues on a copy of this stack; returns 0 in the child, the pid (or
/// -1, with errno) in the parent.
///
/// # Safety
/// The caller may be multi-threaded: in the child, only allocation-free code that
/// never returns may run (another thread may have held the allocator's lock).
pub unsafe fn clone3(args: &CloneArgs) -> libc::c_long {
    // SAFETY: a valid clone_args of the size passed; the caller's contract covers
    // what the child runs.
    unsafe {
        libc::syscall(
            libc::SYS_clone3,
            std::ptr::from_ref(args),
            std::mem::size_of::<CloneArgs>(),
        )
    }
}
