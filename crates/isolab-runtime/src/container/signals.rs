//! Forwarding the signals a front end receives to its container's init: handlers that
//! write each signal to a self-pipe, which [`Instance::wait`](super) polls.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, Ordering};

use crate::error::RuntimeError;
use crate::sys;

/// Write end of the signal self-pipe of the one [`run`] that forwards signals.
static SIGNAL_PIPE: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(sig: libc::c_int) {
    let fd = SIGNAL_PIPE.load(Ordering::Relaxed);
    if fd >= 0 {
        let byte = [sig as u8];
        // SAFETY: write(2) is async-signal-safe; the buffer is a local byte.
        unsafe { libc::write(fd, byte.as_ptr().cast(), 1) };
    }
}

/// Signals a front end forwards to its container.
const FORWARDED: [libc::c_int; 6] = [
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
];

/// Handlers that write forwarded signals to a pipe, restored on drop.
pub(super) struct SignalForwarder {
    pub(super) read: OwnedFd,
    _write: OwnedFd,
    old: Vec<(libc::c_int, libc::sigaction)>,
}

impl SignalForwarder {
    /// Installs the handlers; `None` when another run of this process already forwards.
    pub(super) fn install() -> Result<Option<SignalForwarder>, RuntimeError> {
        let (read, write) = sys::pipe().map_err(|source| RuntimeError::Syscall {
            op: "pipe2 (signal forwarding)",
            source,
        })?;
        if SIGNAL_PIPE
            .compare_exchange(-1, write.as_raw_fd(), Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
        {
            return Ok(None);
        }
        let mut old = Vec::new();
        for sig in FORWARDED {
            // SAFETY: zeroed sigaction structs are valid; the handler is an
            // async-signal-safe extern "C" fn; `prev` receives the old action.
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
                action.sa_flags = libc::SA_RESTART;
                libc::sigemptyset(&mut action.sa_mask);
                let mut prev: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(sig, &action, &mut prev) == 0 {
                    old.push((sig, prev));
                }
            }
        }
        Ok(Some(SignalForwarder {
            read,
            _write: write,
            old,
        }))
    }
}

impl Drop for SignalForwarder {
    fn drop(&mut self) {
        for (sig, prev) in &self.old {
            // SAFETY: restores an action previously returned by sigaction.
            unsafe { libc::sigaction(*sig, prev, std::ptr::null_mut()) };
        }
        SIGNAL_PIPE.store(-1, Ordering::SeqCst);
    }
}
