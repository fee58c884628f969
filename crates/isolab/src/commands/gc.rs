//! `isolab gc`: remove what a killed `isolab run` left behind.

use anyhow::{bail, Result};
use isolab_lab::platform::PlatformError;
use isolab_lab::Executor;

use super::Exit;
use crate::cli::GcArgs;
use crate::host;

pub fn gc(args: GcArgs) -> Result<Exit> {
    // Without root, the run cgroups below the caller's delegated cgroup.
    let cgroups = host::Cgroups::find(&[], false)?;
    // Containers of isolab-runtime killed with their runtime (cgroups, loop devices,
    // networks, state files under /run/isolab), then the host's run cgroups.
    let platform = host::platform(cgroups.hierarchy.clone(), &cgroups.base, None);
    // An engine that could not collect does not stop the storage and working
    // directories from being collected; its error is the command's, after them.
    let (mut removed, incomplete) = match platform.gc() {
        Ok(removed) => (removed, None),
        Err(PlatformError::GcIncomplete { removed, failures }) => (removed, Some(failures)),
        Err(e) => return Err(e.into()),
    };
    // The storage of killed runs (mounts, device-mapper and loop devices) before
    // their working directories.
    removed.extend(isolab_lab::storage::gc(
        &isolab_lab::storage::SystemStorageHost,
    ));
    removed.extend(isolab_lab::runner::gc_workdirs(&args.workdir)?);
    if removed.is_empty() && incomplete.is_none() {
        println!("nothing to remove");
    }
    for r in removed {
        println!("removed {r}");
    }
    if let Some(failures) = incomplete {
        bail!(
            "gc could not collect everything: {}; run `isolab gc` again once that is mended",
            failures.join("; ")
        );
    }
    Ok(Exit::Success)
}
