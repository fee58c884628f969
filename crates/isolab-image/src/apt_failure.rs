//! Why mmdebstrap could not install a root, read from apt's messages in its output: packages
//! the archive does not have (`E: Unable to locate package X`, `E: Package 'X' has no
//! installation candidate`) and packages whose dependencies cannot be met (apt's
//! `The following packages have unmet dependencies:` block, ` X : Depends: Y but …`).
//!
//! apt has no machine-readable error output; these message formats are stable across apt
//! 1.x–2.x and are matched in the C locale (mmdebstrap runs apt with `LC_ALL=C.UTF-8`).
//! Recorded outputs of real failures are in `src/testdata/`.

use crate::error::ImageError;

/// The error apt's `output` (mmdebstrap's standard error) describes, if it names packages:
/// [`ImageError::UnknownPackages`] when any package is missing from `suite`, else
/// [`ImageError::UnmetDependencies`]; `None` when neither is recognised.
pub(crate) fn explain(output: &str, suite: &str) -> Option<ImageError> {
    let mut unknown: Vec<String> = Vec::new();
    let mut unmet: Vec<String> = Vec::new();
    let mut details: Vec<String> = Vec::new();
    let mut in_unmet_block = false;
    for line in output.lines() {
        if let Some(name) = unknown_package(line) {
            unknown.push(name.to_owned());
            continue;
        }
        if line.starts_with("The following packages have unmet dependencies") {
            in_unmet_block = true;
            continue;
        }
        // ` pkg : Depends: dep but it is not installable`, then continuation lines indented
        // further (`           Conflicts: …`). The header may have been cut off the tail of
        // the output, so a line of that form opens the block too; a line not starting with a
        // space ends it.
        if !line.starts_with(' ') {
            in_unmet_block = false;
            continue;
        }
        let trimmed = line.trim();
        match trimmed.split_once(" : ") {
            Some((pkg, rest)) if is_relation(rest) => {
                in_unmet_block = true;
                let pkg = pkg.trim().to_owned();
                details.push(format!("{pkg} : {}", rest.trim()));
                if !unmet.contains(&pkg) {
                    unmet.push(pkg);
                }
            }
            _ if in_unmet_block && is_relation(trimmed) => {
                if let Some(last) = unmet.last() {
                    details.push(format!("{last} : {trimmed}"));
                }
            }
            _ => {}
        }
    }
    unknown.sort();
    unknown.dedup();
    if !unknown.is_empty() {
        return Some(ImageError::UnknownPackages {
            packages: unknown,
            suite: suite.to_owned(),
        });
    }
    if !unmet.is_empty() {
        unmet.sort();
        return Some(ImageError::UnmetDependencies {
            packages: unmet,
            suite: suite.to_owned(),
            details,
        });
    }
    None
}

/// Whether `text` starts with one of apt's relation fields (`Depends: …`).
fn is_relation(text: &str) -> bool {
    [
        "Depends:",
        "Pre-Depends:",
        "Conflicts:",
        "Breaks:",
        "Recommends:",
    ]
    .iter()
    .any(|r| text.trim_start().starts_with(r))
}

/// The package an apt "not found" line names.
fn unknown_package(line: &str) -> Option<&str> {
    let line = line.trim();
    if let Some(rest) = line.strip_prefix("E: Unable to locate package ") {
        return Some(rest.trim());
    }
    if let Some(rest) = line.strip_prefix("E: Package '") {
        if let Some((name, tail)) = rest.split_once('\'') {
            if tail.contains("has no installation candidate") {
                return Some(name);
            }
        }
    }
    let rest = line
        .strip_prefix("E: Couldn't find any package by glob '")
        .or_else(|| line.strip_prefix("E: Couldn't find any package by regex '"))?;
    rest.split_once('\'').map(|(name, _)| name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// mmdebstrap 1.3.5's standard error for `--include=sysbench,isolab-bogus-pkg` (bookworm).
    const UNKNOWN: &str = include_str!("testdata/mmdebstrap-unknown-package.txt");
    /// mmdebstrap 1.3.5's standard error for `--include=exim4-daemon-light,postfix` (bookworm):
    /// two mail transport agents conflict.
    const CONFLICT: &str = include_str!("testdata/mmdebstrap-unmet-dependencies.txt");

    #[test]
    fn unknown_package_is_named_with_what_to_do() {
        let e = explain(UNKNOWN, "bookworm").unwrap();
        match &e {
            ImageError::UnknownPackages { packages, suite } => {
                assert_eq!(packages, &["isolab-bogus-pkg"]);
                assert_eq!(suite, "bookworm");
            }
            other => panic!("{other:?}"),
        }
        let text = e.to_string();
        assert!(
            text.starts_with(
                "Debian bookworm has no package `isolab-bogus-pkg`: check the spelling"
            ),
            "{text}"
        );
        assert!(text.contains("packages = [...]"), "{text}");
    }

    #[test]
    fn unmet_dependencies_name_the_packages_and_apt_s_reasons() {
        let e = explain(CONFLICT, "bookworm").unwrap();
        let ImageError::UnmetDependencies {
            packages, details, ..
        } = &e
        else {
            panic!("{e:?}")
        };
        assert_eq!(packages, &["exim4-config", "exim4-daemon-light", "postfix"]);
        assert_eq!(
            details[0],
            "exim4-config : Conflicts: postfix but 3.7.11-0+deb12u1 is to be installed"
        );
        assert_eq!(details.len(), 3, "{details:?}");
        // ToolError keeps the last 20 lines: the header may be gone, the block is still read.
        let tail = isolab_tools::tail_lines(CONFLICT.as_bytes(), 7);
        assert!(!tail.contains("The following packages"), "{tail}");
        let Some(ImageError::UnmetDependencies { packages: p, .. }) = explain(&tail, "bookworm")
        else {
            panic!("{tail}")
        };
        assert_eq!(&p, packages);
        assert!(e.to_string().contains("unmet dependencies:\n"), "{e}");
    }

    #[test]
    fn other_apt_messages_and_several_packages() {
        let continued = "The following packages have unmet dependencies:\n foo : Depends: bar but it is not installable\n       Depends: baz (>= 2) but 1 is to be installed\nE: Unable to correct problems, you have held broken packages.\n";
        let Some(ImageError::UnmetDependencies { details, .. }) = explain(continued, "bookworm")
        else {
            panic!()
        };
        assert_eq!(
            details,
            [
                "foo : Depends: bar but it is not installable",
                "foo : Depends: baz (>= 2) but 1 is to be installed"
            ]
        );
        let out = "E: Package 'python' has no installation candidate\nE: Unable to locate package zz-b\nE: Unable to locate package zz-a\nE: Couldn't find any package by glob 'lib*zz'\n";
        let Some(ImageError::UnknownPackages { packages, .. }) = explain(out, "bookworm") else {
            panic!()
        };
        assert_eq!(packages, ["lib*zz", "python", "zz-a", "zz-b"]);
        let e = ImageError::UnknownPackages {
            packages: vec!["a".into(), "b".into(), "c".into()],
            suite: "bookworm".into(),
        };
        assert!(e
            .to_string()
            .starts_with("Debian bookworm has no package `a`, `b` and `c`:"));
        assert!(explain(
            "E: mmdebstrap failed to run\nI: network is down\n",
            "bookworm"
        )
        .is_none());
    }
}
