//! v1 `freezer` controller: stops every task of a cgroup so that a fork bomb cannot
//! outrun `kill_all`.

use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use crate::error::Error;
use crate::file;

/// Asks the kernel to freeze `dir` and waits up to `wait` for `FROZEN`. Returns
/// whether the cgroup is frozen.
pub(crate) fn freeze(dir: &Path, wait: Duration) -> Result<bool, Error> {
    let state = dir.join("freezer.state");
    file::write(&state, "FROZEN")?;
    let deadline = Instant::now() + wait;
    loop {
        if file::read(&state)?.trim() == "FROZEN" {
            return Ok(true);
        }
        if Instant::now() >= deadline {
            return Ok(false);
        }
        thread::sleep(Duration::from_millis(5));
    }
}

/// Thaws `dir` (killed tasks of a frozen v1 cgroup only die once thawed).
pub(crate) fn thaw(dir: &Path) -> Result<(), Error> {
    file::write(&dir.join("freezer.state"), "THAWED")
}
