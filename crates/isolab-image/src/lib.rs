//! isolab images: root file systems for containers and VMs, built from Debian's packages and
//! packed for every engine the lab compares.
//!
//! Three builders make a tree in a directory:
//! - [`build_busybox`]: Debian's static busybox with its applets as symlinks (`busybox --install -s`
//!   semantics, done in Rust), `/etc/passwd`, `/etc/group`, identity files and mount points. A
//!   few MB, built in milliseconds: the image of the runtime's tests and start-up benchmarks.
//! - [`build_bench`]: Debian bookworm through `mmdebstrap` (variant `apt`) from the mirror in the
//!   host's apt sources, with sysbench, fio, stress-ng and iperf3: the image workloads run in.
//! - [`build_bench_docker`]: the same plus Debian's `docker.io`, the guest image of `vm+docker`
//!   (Docker inside a VM).
//!
//! An experiment's image is a [`Recipe`]: the bench packages plus what its workloads need.
//! [`ensure`] builds it once (the bench build, with the recipe's packages) into
//! `/var/lib/isolab/images/recipe-<hash>` ([`DEFAULT_CACHE_ROOT`], keyed by [`Recipe::hash`])
//! and returns the cached image afterwards; [`cached_recipes`] lists them. A package apt cannot
//! install is an [`ImageError::UnknownPackages`] or [`ImageError::UnmetDependencies`] naming it.
//! Manifests of Debian images list the packages whose versions differ from the host's
//! ([`Manifest::host_differences`]).
//!
//! Each build writes into a staging directory next to the target and renames it into place only on
//! success, and leaves a manifest, `.isolab-image.json` ([`Manifest`]): kind, build time, sources
//! with versions (and the sha256 of copied files), so the lab can record exactly what ran.
//! [`Image::open`] reads it back.
//!
//! An image of one's own comes from a container image: [`import`] reads an
//! [`ImageReference`] (skopeo's transports: `oci:`, `oci-archive:`, `docker-archive:`,
//! `docker-daemon:`, `containers-storage:`) with skopeo and umoci into
//! `/var/lib/isolab/images/imported-<digest>/` once per configuration digest (Docker's image
//! ID): the root file system for runtimes and VMs, and a Docker archive of the same layers
//! for Docker and Podman ([`ImportRecord`] in its manifest says where it came from).
//!
//! [`pack`] converts a tree for an engine ([`PackTarget`]):
//! - **ext4**: `mkfs.ext4 -d` into a sparse file, for the runtime's loop-device root and, later, as a
//!   raw VM disk (a whole-disk file system, no partition table: `-drive format=raw`, `root=/dev/vda`);
//! - **tar**: a reproducible archive (sorted, fixed mtime, numeric owners, no device nodes) for
//!   `docker import` / `podman import`;
//! - **oci**: a bundle (`rootfs/` copied faithfully and a default `config.json` from `oci-spec`) for
//!   `runc run` / `crun run`.
//!
//! External programs (busybox, mmdebstrap, mkfs.ext4) run through `isolab-tools`'
//! [`ToolRunner`](isolab_tools::ToolRunner) trait; [`SystemTools`] is the real one and the
//! `*_with` functions take any runner, so tests fake them.
//! Host paths the builds read ([`HostPaths`]) are parameters too. [`tree_digest`] and
//! [`sha256_file`] identify trees and files for the environment record.

mod apt;
mod apt_failure;
mod bench;
mod busybox;
mod cache;
mod dpkg;
mod error;
mod import;
mod manifest;
mod pack;
mod recipe;
mod skeleton;
mod tree;
mod user_copy;

use std::path::PathBuf;

use isolab_tools::SystemTools;

pub use apt::{host_sources, mirror_lines, AptSource};
pub use bench::{build_bench_docker_with, build_bench_with};
pub use busybox::{build_busybox_with, BUSYBOX_PACKAGE};
pub use cache::{cached, cached_recipes, ensure, ensure_with};
pub use dpkg::{installed_package, installed_packages, version_differences};
pub use error::ImageError;
pub use import::{
    cached_imports, docker_archive_of, image_digest, import, import_with, imported_rootfs,
    ImageReference, Transport, SKOPEO_PACKAGE, UMOCI_PACKAGE,
};
pub use manifest::{
    Image, ImageConfig, ImageKind, ImportRecord, Manifest, RecipeRecord, Source, VersionDifference,
    MANIFEST_FILE,
};
pub use pack::{
    default_ext4_size, default_spec, pack, pack_with, PackTarget, Packed, EXT4_LABEL, OCI_CONFIG,
    OCI_ROOTFS, TAR_MTIME,
};
pub use recipe::{
    check_package_name, Recipe, BENCH_DOCKER_PACKAGES, BENCH_PACKAGES, BENCH_SUITE,
    DEFAULT_CACHE_ROOT, RECIPE_FORMAT,
};
pub use skeleton::IMAGE_HOSTNAME;
pub use tree::{copy_tree, sha256_file, tree_digest};
pub use user_copy::{user_copy, user_copy_root, UserCopy, USER_COPY_RECORD};

/// Where and how to build an image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildOptions {
    /// The image's root directory. It must be absent or empty unless `force` is set.
    pub dir: PathBuf,
    /// Replace an existing directory (only after the new tree is complete).
    pub force: bool,
}

/// Host files the builds read; [`HostPaths::default`] is this host's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPaths {
    /// The static busybox binary (`/bin/busybox` from busybox-static).
    pub busybox: PathBuf,
    /// The host's dpkg status file, for versions of busybox-static and mmdebstrap.
    pub dpkg_status: PathBuf,
    /// The host's apt configuration directory, whose sources name the Debian mirror.
    pub apt_dir: PathBuf,
}

impl Default for HostPaths {
    fn default() -> Self {
        HostPaths {
            busybox: PathBuf::from("/bin/busybox"),
            dpkg_status: PathBuf::from("/var/lib/dpkg/status"),
            apt_dir: PathBuf::from("/etc/apt"),
        }
    }
}

/// Build a busybox root at `opts.dir` from this host's `/bin/busybox` (package busybox-static).
pub fn build_busybox(opts: &BuildOptions) -> Result<Image, ImageError> {
    build_busybox_with(opts, &HostPaths::default(), &SystemTools)
}

/// Build a Debian bookworm root with the benchmark tools at `opts.dir` through mmdebstrap, from
/// the Debian mirror in this host's apt sources. Needs root (or mmdebstrap's unshare mode set up)
/// and takes minutes: it downloads about 100 MB of packages.
pub fn build_bench(opts: &BuildOptions) -> Result<Image, ImageError> {
    build_bench_with(opts, &HostPaths::default(), &SystemTools)
}

/// Build the bench root plus Docker (`docker.io`) at `opts.dir`, as [`build_bench`] does: the
/// image a `vm+docker` guest boots, whose `dockerd` runs the experiment's container.
pub fn build_bench_docker(opts: &BuildOptions) -> Result<Image, ImageError> {
    build_bench_docker_with(opts, &HostPaths::default(), &SystemTools)
}
