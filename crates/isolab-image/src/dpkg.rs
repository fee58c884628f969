//! Reading dpkg's status database (`var/lib/dpkg/status`) directly, for package versions of the
//! host (busybox-static, mmdebstrap) and of a built root.

use std::path::Path;

use crate::error::{ImageError, IoContext};
use crate::manifest::{Source, VersionDifference};

/// Installed packages listed in the dpkg status file at `path`, sorted by name.
pub fn installed_packages(path: &Path) -> Result<Vec<Source>, ImageError> {
    let text = std::fs::read_to_string(path).ctx("read", path)?;
    Ok(parse_status(&text))
}

/// The installed package `name` in the dpkg status file at `path`, if the file exists and lists it.
pub fn installed_package(path: &Path, name: &str) -> Option<Source> {
    installed_packages(path)
        .ok()?
        .into_iter()
        .find(|p| p.name == name)
}

/// Packages in both `image` and `host` (installed-package lists, as [`installed_packages`]
/// returns them) whose versions differ, sorted by name. A package counts as the same when its
/// name and (where both record one) its architecture are equal.
pub fn version_differences(image: &[Source], host: &[Source]) -> Vec<VersionDifference> {
    let mut out: Vec<VersionDifference> = image
        .iter()
        .filter_map(|i| {
            let h = host.iter().find(|h| {
                h.name == i.name
                    && (h.architecture.is_none()
                        || i.architecture.is_none()
                        || h.architecture == i.architecture)
            })?;
            (h.version != i.version).then(|| VersionDifference {
                package: i.name.clone(),
                image: i.version.clone(),
                host: h.version.clone(),
            })
        })
        .collect();
    out.sort_by(|a, b| a.package.cmp(&b.package));
    out.dedup_by(|a, b| a.package == b.package);
    out
}

/// Parse a dpkg status file: paragraphs separated by blank lines; a package counts when its
/// `Status` ends in `installed` (not `config-files`, `half-installed`, …).
pub(crate) fn parse_status(text: &str) -> Vec<Source> {
    let mut out = Vec::new();
    for para in text.split("\n\n") {
        let (mut name, mut version, mut arch, mut installed) = (None, None, None, false);
        for line in para.lines() {
            if line.starts_with([' ', '\t']) {
                continue;
            }
            let Some((k, v)) = line.split_once(':') else {
                continue;
            };
            let v = v.trim();
            match k {
                "Package" => name = Some(v.to_string()),
                "Version" => version = Some(v.to_string()),
                "Architecture" => arch = Some(v.to_string()),
                "Status" => installed = v.split_whitespace().last() == Some("installed"),
                _ => {}
            }
        }
        if let (Some(name), Some(version), true) = (name, version, installed) {
            out.push(Source {
                name,
                version,
                architecture: arch,
                origin: None,
                sha256: None,
            });
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATUS: &str = "Package: zlib1g\nStatus: install ok installed\nPriority: optional\nArchitecture: amd64\nVersion: 1:1.2.13.dfsg-1\nDescription: compression\n library\n\nPackage: gone\nStatus: deinstall ok config-files\nVersion: 1\n\nPackage: busybox-static\nStatus: install ok installed\nArchitecture: amd64\nVersion: 1:1.35.0-4+deb12u1+b1\nDepends: x\n";

    #[test]
    fn installed_only_sorted_with_versions() {
        let p = parse_status(STATUS);
        let names: Vec<&str> = p.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["busybox-static", "zlib1g"]);
        assert_eq!(p[0].version, "1:1.35.0-4+deb12u1+b1");
        assert_eq!(p[1].architecture.as_deref(), Some("amd64"));
    }

    #[test]
    fn differences_are_shared_packages_with_other_versions() {
        let image = parse_status(STATUS);
        let host = parse_status(
            "Package: zlib1g\nStatus: install ok installed\nArchitecture: amd64\nVersion: 1:1.2.13.dfsg-1\n\nPackage: busybox-static\nStatus: install ok installed\nArchitecture: amd64\nVersion: 1:1.36.1-6\n\nPackage: only-on-host\nStatus: install ok installed\nVersion: 1\n",
        );
        let d = version_differences(&image, &host);
        assert_eq!(
            d,
            [VersionDifference {
                package: "busybox-static".into(),
                image: "1:1.35.0-4+deb12u1+b1".into(),
                host: "1:1.36.1-6".into(),
            }]
        );
        assert_eq!(
            d[0].to_string(),
            "busybox-static: image 1:1.35.0-4+deb12u1+b1, host 1:1.36.1-6"
        );
        assert!(version_differences(&image, &image).is_empty());
    }

    #[test]
    fn host_status_lists_busybox() {
        let host = Path::new("/var/lib/dpkg/status");
        if !host.exists() {
            isolab_skip::skip("no dpkg status at /var/lib/dpkg/status: not a Debian host");
            return;
        }
        assert!(installed_packages(host).unwrap().len() > 10);
        let err = installed_packages(Path::new("/nonexistent/status")).unwrap_err();
        assert!(err.to_string().contains("/nonexistent/status"));
    }
}
