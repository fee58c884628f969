//! `clone3(2)` for a caller that starts a child in a cgroup with [`crate::CloneTarget`]:
//! `CLONE_INTO_CGROUP` joins the cgroup2 directory at the clone, with no migration.

/// `CLONE_INTO_CGROUP` of `<linux/sched.h>`: start the child in the cgroup2 directory
/// `clone_args.cgroup`.
pub const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// `struct clone_args` of `<linux/sched.h>` (clone3), up to `cgroup`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
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

/// What [`clone3_vfork`]'s child runs, on its own stack: never returns.
pub type VforkChild = extern "C" fn(*mut libc::c_void) -> !;

/// `clone3(2)` with `CLONE_VM | CLONE_VFORK` added to `args.flags`, as `posix_spawn`
/// starts a program: the child shares this address space (no copy of the page tables,
/// no copy-on-write faults afterwards) and runs `child(arg)` on the stack
/// `args.stack`/`args.stack_size`, while the calling thread waits until the child has
/// execed or exited. Returns the child's pid, or `-errno` (not -1: errno is not set).
/// Only on x86_64 (the system call's return into a new stack needs a few lines of
/// assembly); elsewhere it returns `-ENOSYS`, and the caller starts its child another way.
///
/// # Safety
/// `args.stack` must point to `args.stack_size` writable bytes, 16-aligned at both ends,
/// used by nothing else until this returns. `child` runs in this address space while
/// other threads go on: it may only make async-signal-safe system calls on memory that
/// stays valid until it execs (the caller's frame does: the caller waits), with every
/// signal blocked by the caller until the child has reset the handlers it inherited,
/// and must end in `execve` or `_exit`.
pub unsafe fn clone3_vfork(
    args: &CloneArgs,
    child: VforkChild,
    arg: *mut libc::c_void,
) -> libc::c_long {
    let args = CloneArgs {
        flags: args.flags | libc::CLONE_VM as u64 | libc::CLONE_VFORK as u64,
        ..*args
    };
    #[cfg(target_arch = "x86_64")]
    {
        let ret: libc::c_long;
        // SAFETY: the caller's contract. In the child the kernel has set the stack
        // pointer to the new stack's top; it clears the frame pointer (the end of the
        // stack for unwinders) and calls `child(arg)` from registers the system call
        // preserves; `child` never returns (`ud2` if it did). The parent falls through
        // with the result in rax; the system call clobbers rcx and r11 only.
        unsafe {
            std::arch::asm!(
                "syscall",
                "test rax, rax",
                "jnz 2f",
                "xor ebp, ebp",
                "mov rdi, r12",
                "call r13",
                "ud2",
                "2:",
                inlateout("rax") libc::SYS_clone3 => ret,
                in("rdi") std::ptr::from_ref(&args),
                in("rsi") std::mem::size_of::<CloneArgs>(),
                in("r12") arg,
                in("r13") child,
                lateout("rcx") _,
                lateout("r11") _,
                options(nostack),
            );
        }
        ret
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (args, child, arg);
        -libc::c_long::from(libc::ENOSYS)
    }
}
