//! Attaching an image file to a loop device with `LO_FLAGS_AUTOCLEAR`.
//!
//! With autoclear the kernel detaches the device when its last user goes: the
//! runtime's descriptor and the container's mount. A runtime killed by SIGKILL
//! therefore leaks no loop device once its container is gone.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::RuntimeError;

const LOOP_CTL_GET_FREE: libc::c_ulong = 0x4C82;
const LOOP_CONFIGURE: libc::c_ulong = 0x4C0A;
const LOOP_CLR_FD: libc::c_ulong = 0x4C01;
const LO_FLAGS_READ_ONLY: u32 = 1;
const LO_FLAGS_AUTOCLEAR: u32 = 4;

/// `struct loop_info64` of `<linux/loop.h>`.
#[repr(C)]
struct LoopInfo64 {
    lo_device: u64,
    lo_inode: u64,
    lo_rdevice: u64,
    lo_offset: u64,
    lo_sizelimit: u64,
    lo_number: u32,
    lo_encrypt_type: u32,
    lo_encrypt_key_size: u32,
    lo_flags: u32,
    lo_file_name: [u8; 64],
    lo_crypt_name: [u8; 64],
    lo_encrypt_key: [u8; 32],
    lo_init: [u64; 2],
}

/// `struct loop_config` of `<linux/loop.h>` (Linux 5.8+).
#[repr(C)]
struct LoopConfig {
    fd: u32,
    block_size: u32,
    info: LoopInfo64,
    reserved: [u64; 8],
}

/// An attached loop device; dropping it closes the runtime's descriptor (the kernel
/// detaches the device once no mount uses it either).
#[derive(Debug)]
pub struct LoopDevice {
    file: File,
    path: PathBuf,
    number: u32,
}

impl LoopDevice {
    /// Attaches `image` to a free loop device (autoclear; read-only when asked).
    pub fn attach(image: &Path, readonly: bool) -> Result<LoopDevice, RuntimeError> {
        let err = |op: &'static str| {
            move |source: io::Error| RuntimeError::LoopDevice {
                image: image.to_owned(),
                op,
                source,
            }
        };
        let backing = OpenOptions::new()
            .read(true)
            .write(!readonly)
            .custom_flags(libc::O_CLOEXEC)
            .open(image)
            .map_err(err("open the image"))?;
        let control = OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/loop-control")
            .map_err(err("open /dev/loop-control"))?;
        let mut last = io::Error::from_raw_os_error(libc::EBUSY);
        // Another process may take the free device between GET_FREE and CONFIGURE.
        for _ in 0..16 {
            // SAFETY: ioctl on an open loop-control descriptor with no argument.
            let n = unsafe { libc::ioctl(control.as_raw_fd(), LOOP_CTL_GET_FREE) };
            if n < 0 {
                return Err(err("find a free loop device")(io::Error::last_os_error()));
            }
            let path = PathBuf::from(format!("/dev/loop{n}"));
            let file = OpenOptions::new()
                .read(true)
                .write(!readonly)
                .custom_flags(libc::O_CLOEXEC)
                .open(&path)
                .map_err(err("open the loop device"))?;
            // SAFETY: an all-zero loop_config is valid (no offset, no size limit).
            let mut config: LoopConfig = unsafe { std::mem::zeroed() };
            config.fd = backing.as_raw_fd() as u32;
            config.info.lo_flags =
                LO_FLAGS_AUTOCLEAR | if readonly { LO_FLAGS_READ_ONLY } else { 0 };
            let name = image.as_os_str().as_encoded_bytes();
            let len = name.len().min(63);
            config.info.lo_file_name[..len].copy_from_slice(&name[..len]);
            // SAFETY: LOOP_CONFIGURE reads a loop_config, which `config` is.
            let ret = unsafe { libc::ioctl(file.as_raw_fd(), LOOP_CONFIGURE, &config) };
            if ret == 0 {
                return Ok(LoopDevice {
                    file,
                    path,
                    number: n as u32,
                });
            }
            last = io::Error::last_os_error();
            if last.raw_os_error() != Some(libc::EBUSY) {
                break;
            }
        }
        Err(err("configure the loop device")(last))
    }

    /// The device node, e.g. `/dev/loop3`.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Closes the runtime's descriptor and waits (up to `timeout`) until the kernel
    /// has detached the device; if it has not, detaches it explicitly.
    pub fn release(self, timeout: Duration) -> Result<(), RuntimeError> {
        let LoopDevice { file, path, number } = self;
        drop(file);
        let start = Instant::now();
        while is_attached(number) {
            if start.elapsed() > timeout {
                return detach(&path);
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        Ok(())
    }
}

/// Whether `/dev/loop<number>` has a backing file.
pub fn is_attached(number: u32) -> bool {
    Path::new(&format!("/sys/block/loop{number}/loop/backing_file")).exists()
}

/// The backing file of every attached loop device: `(device, backing file)`.
pub fn attached() -> Vec<(PathBuf, PathBuf)> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir("/sys/block") else {
        return out;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with("loop") {
            continue;
        }
        if let Ok(backing) = std::fs::read_to_string(entry.path().join("loop/backing_file")) {
            out.push((
                PathBuf::from(format!("/dev/{name}")),
                PathBuf::from(backing.trim_end()),
            ));
        }
    }
    out
}

/// Detaches a loop device with `LOOP_CLR_FD` (for `gc`).
pub fn detach(device: &Path) -> Result<(), RuntimeError> {
    let err = |source| RuntimeError::LoopDevice {
        image: device.to_owned(),
        op: "detach",
        source,
    };
    let file = File::open(device).map_err(err)?;
    // SAFETY: LOOP_CLR_FD takes no argument.
    if unsafe { libc::ioctl(file.as_raw_fd(), LOOP_CLR_FD, 0) } < 0 {
        let e = io::Error::last_os_error();
        // ENXIO: already detached.
        if e.raw_os_error() != Some(libc::ENXIO) {
            return Err(err(e));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn struct_sizes_match_the_kernel() {
        assert_eq!(std::mem::size_of::<LoopInfo64>(), 232);
        assert_eq!(std::mem::size_of::<LoopConfig>(), 304);
    }

    #[test]
    fn missing_image_names_it() {
        let e = LoopDevice::attach(Path::new("/nonexistent/isolab.img"), true).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/isolab.img"), "{e}");
    }
}
