//! A cache of compiled seccomp programs: building a filter with libseccomp costs about
//! 1 ms for Docker's default profile and 8–9 ms for an engine's three-architecture
//! profile, on every container start; reading a cached program back costs a few
//! microseconds.
//!
//! A program is stored under the SHA-256 of everything that decides its bytes: the
//! profile (Docker's default as a digest of its rule table with the kept capabilities,
//! or an OCI profile's JSON), the native architecture, libseccomp's version, the kernel
//! release, this crate's version and a digest of the seccomp sources it was built from
//! (the rule table, the resolution per architecture, the BPF compiler; `build.rs`), so
//! that a rebuilt runtime with another allow-list never loads an older build's program. One file a program set, written whole (a temporary file renamed) or not
//! at all; a file that does not parse is ignored and rewritten. The directory lives
//! under the runtime's state directory (a tmpfs, `/run/isolab/seccomp-cache`), so it
//! starts empty after a reboot, as crun's does.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::bpf::{CompiledFilter, SockFilter, BPF_MAXINSNS};

/// The file name of the cache directory under a state directory.
pub const DIR_NAME: &str = "seccomp-cache";

/// The cache key of a profile: the SHA-256 (hex) of `profile` and of the facts that
/// change the compiled program.
pub fn key(profile: &[u8]) -> String {
    let mut h = Sha256::new();
    let version = libseccomp::ScmpVersion::current()
        .map(|v| format!("{}.{}.{}", v.major, v.minor, v.micro))
        .unwrap_or_default();
    for part in [
        env!("CARGO_PKG_VERSION").as_bytes(),
        env!("ISOLAB_SECCOMP_SOURCE_DIGEST").as_bytes(),
        version.as_bytes(),
        kernel_release().as_bytes(),
        std::env::consts::ARCH.as_bytes(),
        profile,
    ] {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part);
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

fn kernel_release() -> String {
    isolab_cgroups::read_pseudo_file(std::path::Path::new("/proc/sys/kernel/osrelease"))
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

fn path(dir: &Path, key: &str) -> PathBuf {
    dir.join(format!("{key}.bpf"))
}

/// The programs cached under `key`, if a whole, well-formed file is there.
pub fn load(dir: &Path, key: &str) -> Option<Vec<CompiledFilter>> {
    decode(&fs::read(path(dir, key)).ok()?)
}

/// Stores `filters` under `key`; failures are ignored (the cache is an optimisation:
/// the next start compiles again).
pub fn store(dir: &Path, key: &str, filters: &[CompiledFilter]) {
    let file = path(dir, key);
    let tmp = file.with_extension(format!("tmp.{}", std::process::id()));
    let written = fs::create_dir_all(dir)
        .and_then(|()| fs::File::create(&tmp))
        .and_then(|mut f| f.write_all(&encode(filters)))
        .and_then(|()| fs::rename(&tmp, &file));
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
}

/// `count`, then for each program `flags`, `len` and `len` instructions (little endian).
fn encode(filters: &[CompiledFilter]) -> Vec<u8> {
    let mut out = (filters.len() as u32).to_le_bytes().to_vec();
    for f in filters {
        out.extend(f.flags.to_le_bytes());
        out.extend((f.program.len() as u32).to_le_bytes());
        for i in &f.program {
            out.extend(i.code.to_le_bytes());
            out.push(i.jt);
            out.push(i.jf);
            out.extend(i.k.to_le_bytes());
        }
    }
    out
}

/// A cursor over the cache file's bytes.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let b = self.bytes.get(self.at..self.at + N)?;
        self.at += N;
        b.try_into().ok()
    }

    fn u32(&mut self) -> Option<u32> {
        self.take::<4>().map(u32::from_le_bytes)
    }
}

fn decode(bytes: &[u8]) -> Option<Vec<CompiledFilter>> {
    let mut r = Reader { bytes, at: 0 };
    let count = r.u32()? as usize;
    if count > 16 {
        return None;
    }
    let mut filters = Vec::with_capacity(count);
    for _ in 0..count {
        let flags = r.u32()?;
        let len = r.u32()? as usize;
        if len == 0 || len > BPF_MAXINSNS {
            return None;
        }
        let mut program = Vec::with_capacity(len);
        for _ in 0..len {
            let b = r.take::<8>()?;
            program.push(SockFilter {
                code: u16::from_le_bytes([b[0], b[1]]),
                jt: b[2],
                jf: b[3],
                k: u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
            });
        }
        filters.push(CompiledFilter { program, flags });
    }
    (r.at == bytes.len()).then_some(filters)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<CompiledFilter> {
        vec![CompiledFilter {
            program: vec![
                SockFilter {
                    code: 0x20,
                    jt: 0,
                    jf: 0,
                    k: 4,
                },
                SockFilter {
                    code: 0x06,
                    jt: 1,
                    jf: 2,
                    k: 0x7fff_0000,
                },
            ],
            flags: 2,
        }]
    }

    #[test]
    fn programs_round_trip_and_bad_files_are_misses() {
        let dir = tempfile::tempdir().unwrap();
        let k = key(b"profile");
        assert_eq!(k.len(), 64);
        assert_ne!(k, key(b"other profile"));
        assert_eq!(load(dir.path(), &k), None);
        store(dir.path(), &k, &sample());
        assert_eq!(load(dir.path(), &k), Some(sample()));
        // Truncated, trailing bytes, absurd counts: not programs.
        let bytes = encode(&sample());
        for bad in [
            &bytes[..bytes.len() - 1],
            &[bytes.as_slice(), &[0]].concat()[..],
            &[255, 0, 0, 0][..],
        ] {
            fs::write(path(dir.path(), &k), bad).unwrap();
            assert_eq!(load(dir.path(), &k), None);
        }
        // No stray temporary files.
        let names: Vec<_> = fs::read_dir(dir.path()).unwrap().flatten().collect();
        assert_eq!(names.len(), 1);
    }
}
