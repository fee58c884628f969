//! Guest operating systems by Debian suite (seed 003's container-host OS, RQ 1b): each a
//! root image built from its suite by recipe and a kernel from its suite's archive, fetched
//! through a private apt configuration (the host's apt is never changed).
//!
//! | level | image | kernel |
//! |---|---|---|
//! | `bookworm` | Debian 12 | bookworm's `linux-image-amd64` (6.1) |
//! | `bookworm-backports` | Debian 12 | bookworm-backports' `linux-image-amd64` |
//! | `trixie` | Debian 13 | trixie's `linux-image-amd64` (6.12) |

use std::path::Path;

use crate::error::VmError;
use crate::kernel::{KernelFiles, KernelOptions, SuiteApt};
use isolab_tools::ToolRunner;

/// A guest OS level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum GuestOs {
    /// Debian 12 with its own kernel.
    Bookworm,
    /// Debian 12 with the backports kernel.
    BookwormBackports,
    /// Debian 13 with its own kernel.
    Trixie,
}

impl GuestOs {
    /// Every level, in release order.
    pub const ALL: [GuestOs; 3] = [
        GuestOs::Bookworm,
        GuestOs::BookwormBackports,
        GuestOs::Trixie,
    ];

    /// Parses a level's name.
    pub fn parse(s: &str) -> Option<GuestOs> {
        GuestOs::ALL.into_iter().find(|g| g.as_str() == s)
    }

    /// Its name.
    pub fn as_str(self) -> &'static str {
        match self {
            GuestOs::Bookworm => "bookworm",
            GuestOs::BookwormBackports => "bookworm-backports",
            GuestOs::Trixie => "trixie",
        }
    }

    /// The Debian suite of its root image.
    pub fn image_suite(self) -> &'static str {
        match self {
            GuestOs::Bookworm | GuestOs::BookwormBackports => "bookworm",
            GuestOs::Trixie => "trixie",
        }
    }

    /// The suite its kernel comes from.
    pub fn kernel_suite(self) -> &'static str {
        self.as_str()
    }

    /// The apt source lines of its kernel's suite, from the host's sources in `apt_dir` (the
    /// host's mirror, named for the suite).
    pub fn kernel_sources(self, apt_dir: &Path) -> Result<Vec<String>, VmError> {
        let lines = isolab_image::mirror_lines(apt_dir, self.image_suite()).map_err(|e| {
            VmError::KernelResolve {
                metapackage: format!("the kernel of guest {}", self.as_str()),
                detail: e.to_string(),
            }
        })?;
        let base = format!(" {} main", self.image_suite());
        Ok(lines
            .into_iter()
            .filter(|l| l.ends_with(&base))
            .map(|l| match self {
                GuestOs::BookwormBackports => {
                    format!(
                        "{} {} main",
                        &l[..l.len() - base.len()],
                        self.kernel_suite()
                    )
                }
                _ => l,
            })
            .collect())
    }

    /// Its kernel, prepared under `cache` (`cache/kernel-LEVEL/…`, its apt under
    /// `cache/apt-LEVEL`), from the host's mirror in `apt_dir`.
    pub fn prepare_kernel(
        self,
        cache: &Path,
        apt_dir: &Path,
        runner: &dyn ToolRunner,
    ) -> Result<KernelFiles, VmError> {
        let opts = KernelOptions {
            apt: Some(SuiteApt {
                name: self.as_str().to_owned(),
                dir: cache.join(format!("apt-{}", self.as_str())),
                sources: self.kernel_sources(apt_dir)?,
            }),
            ..KernelOptions::default()
        };
        crate::kernel::prepare_kernel_with(cache, &opts, runner)
    }
}

impl std::fmt::Display for GuestOs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `PRETTY_NAME` of the image root `root` (`etc/os-release`), when it has one.
pub fn os_release(root: &Path) -> Option<String> {
    let text = std::fs::read_to_string(root.join("etc/os-release"))
        .or_else(|_| std::fs::read_to_string(root.join("usr/lib/os-release")))
        .ok()?;
    text.lines().find_map(|l| {
        l.strip_prefix("PRETTY_NAME=")
            .map(|v| v.trim_matches('"').to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_name_their_image_and_kernel_suites() {
        for g in GuestOs::ALL {
            assert_eq!(GuestOs::parse(g.as_str()), Some(g));
        }
        assert_eq!(GuestOs::parse("sid"), None);
        assert_eq!(GuestOs::BookwormBackports.image_suite(), "bookworm");
        assert_eq!(
            GuestOs::BookwormBackports.kernel_suite(),
            "bookworm-backports"
        );
        assert_eq!(GuestOs::Trixie.image_suite(), "trixie");
    }

    #[test]
    fn the_kernel_comes_from_the_hosts_mirror_named_for_the_suite() {
        let apt = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(apt.path().join("sources.list.d")).unwrap();
        std::fs::write(
            apt.path().join("sources.list.d/debian.sources"),
            "Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm bookworm-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n",
        )
        .unwrap();
        let k = "[signed-by=/usr/share/keyrings/debian-archive-keyring.gpg]";
        assert_eq!(
            GuestOs::Trixie.kernel_sources(apt.path()).unwrap(),
            [format!("deb {k} http://deb.debian.org/debian trixie main")]
        );
        assert_eq!(
            GuestOs::BookwormBackports
                .kernel_sources(apt.path())
                .unwrap(),
            [format!(
                "deb {k} http://deb.debian.org/debian bookworm-backports main"
            )]
        );
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("etc")).unwrap();
        std::fs::write(
            root.path().join("etc/os-release"),
            "PRETTY_NAME=\"Debian GNU/Linux 13 (trixie)\"\nNAME=\"Debian GNU/Linux\"\n",
        )
        .unwrap();
        assert_eq!(
            os_release(root.path()).as_deref(),
            Some("Debian GNU/Linux 13 (trixie)")
        );
    }
}
