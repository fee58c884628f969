//! Applying limits to a cgroup and checking them: [`limit`], which every platform's
//! instances and the neighbours use. Below the supervisor and the neighbours.

use isolab_cgroups::{Cgroup, Limits};

use super::PlatformError;

/// Applies `limits` to `cgroup` and reads them back: what was read, or
/// [`PlatformError::LimitMismatch`] naming every limit that differs.
pub(crate) fn limit(cgroup: &Cgroup, limits: &Limits) -> Result<Limits, PlatformError> {
    cgroup.apply(limits)?;
    let applied = cgroup.read_limits()?;
    let differences = limits.differences(&applied);
    if !differences.is_empty() {
        return Err(PlatformError::LimitMismatch {
            cgroup: cgroup.rel().display().to_string(),
            detail: differences.join("; "),
        });
    }
    Ok(applied)
}
