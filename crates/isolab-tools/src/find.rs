//! Finding a program on this host, and the error that says what to install: a Debian
//! package, or the `cargo install …` command of a program Debian does not ship.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Directories searched after `PATH`: root's tools (`mkfs.ext4`, `chroot`) live in the sbin
/// directories, which a non-root `PATH` often lacks, and an unset `PATH` still finds the
/// usual programs.
const SEARCHED_AFTER_PATH: [&str; 4] = ["/usr/sbin", "/sbin", "/usr/bin", "/bin"];

/// The path of `program`: a name containing `/` is taken as it is; a bare name is looked up
/// on `PATH` as a shell would, then in `/usr/sbin`, `/sbin`, `/usr/bin` and `/bin`. Only an
/// executable regular file counts.
pub fn find_program(program: impl AsRef<Path>) -> Option<PathBuf> {
    let program = program.as_ref();
    if program.as_os_str().as_bytes().contains(&b'/') {
        return is_executable(program).then(|| program.to_path_buf());
    }
    let path_var = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path_var)
        .chain(SEARCHED_AFTER_PATH.iter().map(PathBuf::from))
        .map(|dir| dir.join(program))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// A host program and the Debian package that provides it (`mkfs.ext4` from `e2fsprogs`),
/// or the `cargo install …` command that installs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Program {
    /// The program's name, looked up by [`find_program`], or a path.
    pub name: String,
    /// The Debian package that provides it, or the command that installs it (one that
    /// begins with `cargo install `), named when it is missing.
    pub package: String,
}

impl Program {
    /// `name`, provided by `package` (a Debian package or a `cargo install …` command).
    pub fn new(name: impl Into<String>, package: impl Into<String>) -> Self {
        Program {
            name: name.into(),
            package: package.into(),
        }
    }

    /// The program's path, or [`NotInstalled`] naming its package.
    pub fn find(&self) -> Result<PathBuf, NotInstalled> {
        find_program(&self.name).ok_or_else(|| NotInstalled {
            program: self.name.clone(),
            package: self.package.clone(),
        })
    }
}

/// A program is not installed on this host.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{program}` is not installed: {} or run {}", how_to_install(.package), setup_command(.package))]
pub struct NotInstalled {
    /// The program (or path) looked for.
    pub program: String,
    /// The Debian package that provides it, or the command that installs it (one that
    /// begins with `cargo install `).
    pub package: String,
}

/// scripts/tiers.txt: the Debian packages each tier of `scripts/setup.sh` installs.
const TIERS: &str = include_str!("../../../scripts/tiers.txt");

/// The tier of `scripts/setup.sh` that installs the Debian package `package` (the first
/// tier of scripts/tiers.txt that lists it), if one does.
pub fn setup_tier(package: &str) -> Option<&'static str> {
    TIERS
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .find_map(|line| {
            let mut fields = line.split_whitespace();
            let tier = fields.next()?;
            let packages = fields.next()?;
            packages.split('|').any(|p| p == package).then_some(tier)
        })
}

/// The setup command that brings `package`: `scripts/setup.sh TIER` when a tier lists
/// it, else the script as a whole.
fn setup_command(package: &str) -> String {
    match setup_tier(package) {
        Some(tier) => format!("`scripts/setup.sh {tier}`"),
        None => "scripts/setup.sh".into(),
    }
}

/// What to do to get `package`: the `cargo install …` command as it is, otherwise the
/// Debian package and its `apt-get install`.
fn how_to_install(package: &str) -> String {
    if package.starts_with("cargo install ") {
        format!("install it with `{package}`")
    } else {
        format!("install the Debian package `{package}` (`apt-get install {package}`)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_programs_by_name_and_by_path() {
        let sh = find_program("sh").expect("sh is installed");
        assert!(sh.is_absolute(), "{}", sh.display());
        assert_eq!(find_program(&sh), Some(sh.clone()));
        assert_eq!(find_program("isolab-no-such-tool"), None);
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("not-executable");
        std::fs::write(&plain, "#!/bin/sh\n").unwrap();
        assert_eq!(find_program(&plain), None);
        assert_eq!(find_program(dir.path()), None);
    }

    #[test]
    fn a_missing_program_names_its_package() {
        assert!(Program::new("sh", "dash").find().is_ok());
        let err = Program::new("isolab-no-such-tool", "isolab-pkg")
            .find()
            .unwrap_err();
        assert_eq!(
            err,
            NotInstalled {
                program: "isolab-no-such-tool".into(),
                package: "isolab-pkg".into()
            }
        );
        assert_eq!(
            err.to_string(),
            "`isolab-no-such-tool` is not installed: install the Debian package `isolab-pkg` \
             (`apt-get install isolab-pkg`) or run scripts/setup.sh"
        );
    }

    #[test]
    fn a_package_of_a_setup_tier_names_the_tier() {
        assert_eq!(setup_tier("sysbench"), Some("quickstart"));
        assert_eq!(setup_tier("qemu-utils"), Some("vm"));
        assert_eq!(setup_tier("docker.io"), Some("engines"));
        assert_eq!(setup_tier("chromium"), Some("test"));
        assert_eq!(setup_tier("isolab-pkg"), None);
        let err = Program::new("isolab-no-such-tool", "fio")
            .find()
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "`isolab-no-such-tool` is not installed: install the Debian package `fio` \
             (`apt-get install fio`) or run `scripts/setup.sh workloads`"
        );
    }

    #[test]
    fn a_program_cargo_installs_names_the_command() {
        let err = Program::new("isolab-no-such-tool", "cargo install isolab-tool --locked")
            .find()
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "`isolab-no-such-tool` is not installed: install it with \
             `cargo install isolab-tool --locked` or run scripts/setup.sh"
        );
    }
}
