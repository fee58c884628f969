//! How isolab's tests skip.
//!
//! A test that cannot run here (not root, a program missing, a kernel facility absent) calls
//! [`skip`] with a reason a user can act on and returns. [`skip`] prints `skipped: TEST: REASON`
//! to standard error (cargo shows it with `--nocapture`) and appends `TEST\tREASON` to the file
//! named by `ISOLAB_SKIP_LOG`, so that a run can end with the list of its skips.
//!
//! With `ISOLAB_STRICT_SKIPS` naming an allow-list file, a skip whose reason matches no line of
//! that file panics instead: the test fails. Each line of the allow-list is a fragment of a
//! reason (matched as a case-sensitive substring); `#` starts a comment, blank lines are
//! ignored. CI sets both variables (`.ci/run`), so a test that quietly stops testing fails
//! there unless the missing facility is one this kind of machine is known to lack.

use std::fmt::Display;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;

/// The variable naming the allow-list file; set, it turns skips not on the list into failures.
pub const STRICT_VAR: &str = "ISOLAB_STRICT_SKIPS";
/// The variable naming the file each skip is appended to (`TEST\tREASON`).
pub const LOG_VAR: &str = "ISOLAB_SKIP_LOG";

/// The entries of an allow-list: one fragment per line, `#` comments and blank lines dropped.
pub fn allow_list(text: &str) -> Vec<&str> {
    text.lines()
        .map(|line| line.split_once('#').map_or(line, |(entry, _)| entry).trim())
        .filter(|entry| !entry.is_empty())
        .collect()
}

/// The entry of `allowed` that `reason` contains, if any.
pub fn allowed_by<'a>(allowed: &[&'a str], reason: &str) -> Option<&'a str> {
    allowed.iter().copied().find(|entry| reason.contains(entry))
}

/// The calling test's name: libtest names each test's thread after the test.
fn test_name() -> String {
    std::thread::current()
        .name()
        .filter(|name| *name != "main")
        .unwrap_or("(unnamed test)")
        .to_string()
}

/// Skips the calling test with `reason`: prints and records it, and panics under strict mode
/// when no allow-list entry covers it. The caller returns right after.
#[track_caller]
pub fn skip(reason: impl Display) {
    let test = test_name();
    // One line: a reason with a line break would split the log's record.
    let reason = reason.to_string().replace('\n', " ");
    eprintln!("skipped: {test}: {reason}");
    if let Some(log) = std::env::var_os(LOG_VAR) {
        // A log that cannot be written must not hide the skip: it was printed above.
        if let Ok(mut file) = OpenOptions::new().create(true).append(true).open(&log) {
            let _ = writeln!(file, "{test}\t{reason}");
        }
    }
    let Some(list) = std::env::var_os(STRICT_VAR) else {
        return;
    };
    let list = Path::new(&list);
    let text = match std::fs::read_to_string(list) {
        Ok(text) => text,
        Err(e) => panic!(
            "{test} skipped ({reason}), and the strict-skip allow-list {} ({STRICT_VAR}) cannot be read: {e}",
            list.display()
        ),
    };
    if allowed_by(&allow_list(&text), &reason).is_none() {
        panic!(
            "{test} skipped ({reason}), but {STRICT_VAR} is set and no entry of {} allows that \
             reason: provide what the test needs, or add a commented entry if this kind of \
             machine cannot have it",
            list.display()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_allow_list_drops_comments_and_blank_lines() {
        let text = "# why\nno bootable KVM # TCG only here\n\n   \nneeds root\n";
        assert_eq!(allow_list(text), vec!["no bootable KVM", "needs root"]);
    }

    #[test]
    fn a_reason_is_allowed_by_the_entry_it_contains() {
        let allowed = ["no bootable KVM", "cgroup v1"];
        assert_eq!(
            allowed_by(&allowed, "the guest has no bootable KVM (TCG)"),
            Some("no bootable KVM")
        );
        assert_eq!(allowed_by(&allowed, "docker missing"), None);
    }
}
