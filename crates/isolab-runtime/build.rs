//! Links the `isolab-runtime` binary statically when the static archives are there.
//!
//! A container's start is a few milliseconds, and a dynamically linked,
//! position-independent runtime spends ~0.5 ms of it before `main`: the loader maps
//! libseccomp, libgcc_s and libc, resolves their symbols, and applies ~15,000 relative
//! relocations, each page of them a copy-on-write fault. Linked statically at a fixed
//! address there is nothing to load or relocate (as with a static runc).
//!
//! rustc links std's system libraries (and libseccomp's) with `-Bdynamic`, which takes a
//! `libX.so` over a `libX.a` found in the same directory. A directory in `OUT_DIR` that
//! holds only the archives, searched first (for the binary only), makes the linker take
//! them; `libgcc_s`
//! becomes libgcc's static unwinder `libgcc_eh.a` (what rustc links with `crt-static`).
//! With libseccomp 2.6 (Debian 13), the libseccomp crate's pkg-config probe puts the
//! system's library directory first, so the binary is linked dynamically there.
//! The runtime uses no NSS function (no user or host name look-ups), so a static glibc
//! loses nothing. Where an archive is missing (no libseccomp-dev, another libc), the
//! binary is linked as before, at a fixed address only, and cargo says why.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The libraries rustc names for std and libseccomp on x86_64-unknown-linux-gnu.
const LIBRARIES: [&str; 8] = ["seccomp", "gcc_s", "util", "rt", "pthread", "m", "dl", "c"];

/// The sources that decide a compiled seccomp program besides its profile: the
/// built-in rule table, how rules are resolved per architecture and capability set,
/// and the BPF they become. Their digest is part of every seccomp cache key
/// (`ISOLAB_SECCOMP_SOURCE_DIGEST`), so that a rebuilt runtime never loads a program
/// an older build compiled.
const SECCOMP_SOURCES: [&str; 3] = [
    "src/security/seccomp/mod.rs",
    "src/security/seccomp/bpf.rs",
    "src/security/seccomp/oci.rs",
];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    seccomp_source_digest();
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let dir = out.join("static-libs");
    match archives(&dir) {
        Ok(()) => {
            // For the binary only (a search path would reach the test binaries too,
            // which link dynamically); the linker applies -L to every -l wherever it
            // stands, and searches it before the system's directories.
            println!("cargo:rustc-link-arg-bins=-L{}", dir.display());
            println!("cargo:rustc-link-arg-bins=-static");
        }
        Err(why) => println!(
            "cargo:warning=isolab-runtime is linked dynamically (starts ~0.3 ms slower): {why}"
        ),
    }
    // Position-dependent either way: no relative relocations to apply at start.
    println!("cargo:rustc-link-arg-bins=-no-pie");
}

/// Sets `ISOLAB_SECCOMP_SOURCE_DIGEST` to a 64-bit FNV-1a digest (hex) of
/// [`SECCOMP_SOURCES`], in order, each preceded by its length.
fn seccomp_source_digest() {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |bytes: &[u8]| {
        for &b in bytes {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    for source in SECCOMP_SOURCES {
        println!("cargo:rerun-if-changed={source}");
        let text = std::fs::read(source).unwrap_or_else(|e| panic!("reading {source}: {e}"));
        feed(&(text.len() as u64).to_le_bytes());
        feed(&text);
    }
    println!("cargo:rustc-env=ISOLAB_SECCOMP_SOURCE_DIGEST={h:016x}");
}

/// Fills `dir` with a link to each library's static archive.
fn archives(dir: &Path) -> Result<(), String> {
    if std::env::var("CARGO_CFG_TARGET_ENV").as_deref() != Ok("gnu") {
        return Err("the target is not glibc".into());
    }
    // The libseccomp crate asks pkg-config for libseccomp >= 2.6 (Debian 13 has it); when
    // found, pkg-config's search path (the system's library directory, which holds
    // libseccomp.so) goes on the command line before this script's directory, and the
    // linker's -Bdynamic then takes the .so: a static link is impossible.
    let v26 = Command::new("pkg-config")
        .args(["--atleast-version=2.6.0", "libseccomp"])
        .status()
        .is_ok_and(|s| s.success());
    if v26 && std::env::var_os("LIBSECCOMP_NO_PKG_CONFIG").is_none() {
        return Err(
            "libseccomp >= 2.6 is found by pkg-config, whose library directory the linker then searches first"
                .into(),
        );
    }
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    for lib in LIBRARIES {
        let archive = if lib == "gcc_s" {
            "libgcc_eh.a".to_owned()
        } else {
            format!("lib{lib}.a")
        };
        let found = Command::new(&cc)
            .arg(format!("-print-file-name={archive}"))
            .output()
            .map_err(|e| format!("{cc} -print-file-name: {e}"))?;
        let path = PathBuf::from(String::from_utf8_lossy(&found.stdout).trim());
        // cc prints the bare name when it finds no such file.
        if !path.is_absolute() || !path.is_file() {
            return Err(format!(
                "no {archive} (install libc6-dev and libseccomp-dev)"
            ));
        }
        std::os::unix::fs::symlink(&path, dir.join(format!("lib{lib}.a")))
            .map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    Ok(())
}
