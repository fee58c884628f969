//! Reading the host's apt sources (`sources.list` one-line format and `sources.list.d/*.sources`
//! deb822 format) to find the Debian mirror the bench image is built from: this machine reaches
//! Debian's archive only through its configured mirror.

use std::path::Path;

use crate::error::{ImageError, IoContext};

/// One `deb` source: a URI, its suites and components.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AptSource {
    /// Archive URI (`http://deb.debian.org/debian`).
    pub uri: String,
    /// Suites ("bookworm", "bookworm-updates").
    pub suites: Vec<String>,
    /// Components ("main").
    pub components: Vec<String>,
    /// The keyring from `Signed-By` / `[signed-by=…]`, when it names a file.
    pub signed_by: Option<String>,
}

/// All enabled `deb` (binary) sources under the apt configuration directory `apt_dir`
/// (`sources.list`, then `sources.list.d/*.list` and `*.sources` in name order).
pub fn host_sources(apt_dir: &Path) -> Result<Vec<AptSource>, ImageError> {
    let mut out = Vec::new();
    let list = apt_dir.join("sources.list");
    if list.exists() {
        out.extend(parse_one_line(
            &std::fs::read_to_string(&list).ctx("read", &list)?,
        ));
    }
    let d = apt_dir.join("sources.list.d");
    if d.is_dir() {
        let mut files = Vec::new();
        for e in std::fs::read_dir(&d).ctx("list directory", &d)? {
            files.push(e.ctx("list directory", &d)?.path());
        }
        files.sort();
        for f in files {
            let ext = f.extension().and_then(|e| e.to_str());
            match ext {
                Some("list") => out.extend(parse_one_line(
                    &std::fs::read_to_string(&f).ctx("read", &f)?,
                )),
                Some("sources") => {
                    out.extend(parse_deb822(&std::fs::read_to_string(&f).ctx("read", &f)?))
                }
                _ => {}
            }
        }
    }
    Ok(out)
}

/// Debian's release codenames, oldest first: a host source of one of these suites is a
/// Debian mirror, which also serves the others.
const DEBIAN_CODENAMES: [&str; 6] = ["buster", "bullseye", "bookworm", "trixie", "forky", "duke"];

/// The mirror lines for `suite` and its `-updates`/`-security` suites, component main, as
/// `deb [signed-by=…] URI SUITE main` (the form mmdebstrap accepts as a MIRROR argument).
/// A host of another Debian release (a Debian 13 host building the Debian 12 image) has
/// no source of `suite`: its Debian sources' URIs are used for `suite` instead (Debian's
/// mirrors carry every release). Fails when no source is of `suite` or of a Debian release.
pub fn mirror_lines(apt_dir: &Path, suite: &str) -> Result<Vec<String>, ImageError> {
    let sources = host_sources(apt_dir)?;
    let own = lines_for(&sources, suite, |su| Some(su.to_owned()));
    if own.iter().any(|(base, _)| *base) {
        return Ok(own.into_iter().map(|(_, line)| line).collect());
    }
    // Another release's suites, renamed: `trixie-updates` → `SUITE-updates`.
    let derived = lines_for(&sources, suite, |su| {
        let (codename, rest) = su.split_once('-').unwrap_or((su, ""));
        DEBIAN_CODENAMES.contains(&codename).then(|| {
            if rest.is_empty() {
                suite.to_owned()
            } else {
                format!("{suite}-{rest}")
            }
        })
    });
    if derived.iter().any(|(base, _)| *base) {
        return Ok(derived.into_iter().map(|(_, line)| line).collect());
    }
    Err(ImageError::NoMirror {
        path: apt_dir.to_path_buf(),
        suite: suite.to_string(),
    })
}

/// The lines of `sources` (component main) whose suite, renamed by `rename`, is `suite` or
/// its `-updates`/`-security`, each with whether it is `suite` itself; no line twice.
fn lines_for(
    sources: &[AptSource],
    suite: &str,
    rename: impl Fn(&str) -> Option<String>,
) -> Vec<(bool, String)> {
    let mut lines: Vec<(bool, String)> = Vec::new();
    for s in sources
        .iter()
        .filter(|s| s.components.iter().any(|c| c == "main"))
    {
        for su in s.suites.iter().filter_map(|su| rename(su)) {
            let wanted = su == suite
                || su == format!("{suite}-updates")
                || su == format!("{suite}-security");
            if !wanted {
                continue;
            }
            let opts = s
                .signed_by
                .as_ref()
                .map(|k| format!("[signed-by={k}] "))
                .unwrap_or_default();
            let line = format!("deb {opts}{} {su} main", s.uri);
            if !lines.iter().any(|(_, l)| *l == line) {
                lines.push((su == suite, line));
            }
        }
    }
    lines
}

/// Parse the one-line format: `deb [opt=val …] URI SUITE COMPONENT…`.
pub(crate) fn parse_one_line(text: &str) -> Vec<AptSource> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        let Some(rest) = line
            .strip_prefix("deb ")
            .or_else(|| line.strip_prefix("deb\t"))
        else {
            continue;
        };
        let mut rest = rest.trim_start();
        let mut signed_by = None;
        if let Some(r) = rest.strip_prefix('[') {
            let Some((opts, after)) = r.split_once(']') else {
                continue;
            };
            for o in opts.split_whitespace() {
                if let Some(k) = o.strip_prefix("signed-by=") {
                    signed_by = Some(k.to_string());
                }
            }
            rest = after.trim_start();
        }
        let mut words = rest.split_whitespace();
        let (Some(uri), Some(suite)) = (words.next(), words.next()) else {
            continue;
        };
        out.push(AptSource {
            uri: uri.to_string(),
            suites: vec![suite.to_string()],
            components: words.map(str::to_string).collect(),
            signed_by,
        });
    }
    out
}

/// Parse the deb822 format: paragraphs of `Types`, `URIs`, `Suites`, `Components`, `Signed-By`,
/// `Enabled`; comments start with `#`. An inline (multi-line) key in `Signed-By` is not a file
/// and is left out.
pub(crate) fn parse_deb822(text: &str) -> Vec<AptSource> {
    let mut out = Vec::new();
    let mut para: Vec<(String, String)> = Vec::new();
    let flush = |para: &mut Vec<(String, String)>, out: &mut Vec<AptSource>| {
        let get = |k: &str| {
            para.iter()
                .find(|(key, _)| key.eq_ignore_ascii_case(k))
                .map(|(_, v)| v.as_str())
        };
        let words = |k: &str| -> Vec<String> {
            get(k)
                .unwrap_or("")
                .split_whitespace()
                .map(str::to_string)
                .collect()
        };
        let enabled = get("Enabled").map(|v| v.trim() != "no").unwrap_or(true);
        if enabled && words("Types").iter().any(|t| t == "deb") {
            let signed_by = get("Signed-By")
                .map(str::trim)
                .filter(|v| v.starts_with('/') && !v.contains('\n'))
                .map(str::to_string);
            for uri in words("URIs") {
                out.push(AptSource {
                    uri,
                    suites: words("Suites"),
                    components: words("Components"),
                    signed_by: signed_by.clone(),
                });
            }
        }
        para.clear();
    };
    for line in text.lines() {
        if line.trim_start().starts_with('#') {
            continue;
        }
        if line.trim().is_empty() {
            flush(&mut para, &mut out);
            continue;
        }
        if line.starts_with([' ', '\t']) {
            if let Some(last) = para.last_mut() {
                last.1.push('\n');
                last.1.push_str(line.trim());
            }
            continue;
        }
        if let Some((k, v)) = line.split_once(':') {
            para.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    flush(&mut para, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEB822: &str = "Types: deb\n# http://snapshot.debian.org/archive/debian/20250520T000000Z\nURIs: http://deb.debian.org/debian\nSuites: bookworm bookworm-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\nTypes: deb\nURIs: http://deb.debian.org/debian-security\nSuites: bookworm-security\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\nTypes: deb-src\nURIs: http://src\nSuites: bookworm\nComponents: main\n\nTypes: deb\nEnabled: no\nURIs: http://off\nSuites: bookworm\nComponents: main\n";

    #[test]
    fn deb822_paragraphs() {
        let s = parse_deb822(DEB822);
        assert_eq!(s.len(), 2, "{s:?}");
        assert_eq!(s[0].uri, "http://deb.debian.org/debian");
        assert_eq!(s[0].suites, ["bookworm", "bookworm-updates"]);
        assert_eq!(
            s[1].signed_by.as_deref(),
            Some("/usr/share/keyrings/debian-archive-keyring.gpg")
        );
    }

    #[test]
    fn one_line_with_options_and_comments() {
        let s = parse_one_line(
            "# comment\ndeb [arch=amd64 signed-by=/k.gpg] http://m/debian bookworm main contrib # x\ndeb-src http://m bookworm main\ndeb http://m2 bookworm-updates main\n",
        );
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].signed_by.as_deref(), Some("/k.gpg"));
        assert_eq!(s[0].components, ["main", "contrib"]);
        assert_eq!(s[1].uri, "http://m2");
    }

    #[test]
    fn mirror_lines_from_a_fake_apt_dir() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("sources.list.d")).unwrap();
        std::fs::write(d.path().join("sources.list.d/debian.sources"), DEB822).unwrap();
        std::fs::write(
            d.path().join("sources.list.d/other.list.disabled-by-farm"),
            "deb http://nope bookworm main\n",
        )
        .unwrap();
        let lines = mirror_lines(d.path(), "bookworm").unwrap();
        let k = "[signed-by=/usr/share/keyrings/debian-archive-keyring.gpg]";
        assert_eq!(
            lines,
            [
                format!("deb {k} http://deb.debian.org/debian bookworm main"),
                format!("deb {k} http://deb.debian.org/debian bookworm-updates main"),
                format!("deb {k} http://deb.debian.org/debian-security bookworm-security main"),
            ]
        );
        // Another release's image on this host (a Debian 13 image here, or the Debian 12
        // bench image on a Debian 13 host): the same mirrors, that release's suites.
        assert_eq!(
            mirror_lines(d.path(), "trixie").unwrap(),
            [
                format!("deb {k} http://deb.debian.org/debian trixie main"),
                format!("deb {k} http://deb.debian.org/debian trixie-updates main"),
                format!("deb {k} http://deb.debian.org/debian-security trixie-security main"),
            ]
        );
    }

    #[test]
    fn no_debian_source_at_all_is_no_mirror() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            d.path().join("sources.list"),
            "deb http://example.org/repo myrepo main\n",
        )
        .unwrap();
        let err = mirror_lines(d.path(), "bookworm").unwrap_err();
        assert!(matches!(err, ImageError::NoMirror { .. }), "{err}");
        assert!(err
            .to_string()
            .contains("deb http://deb.debian.org/debian bookworm main"));
    }
}
