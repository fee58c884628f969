//! `isolab gc`: remove what a killed `isolab run` left behind.

use anyhow::Result;
use isolab_lab::Executor;

use super::Exit;
use crate::cli::GcArgs;
use crate::host;

pub fn gc(args: GcArgs) -> Result<Exit> {
    let hierarchy = host::hierarchy()?;
    // Containers of isolab-runtime killed with their runtime (cgroups, loop devices,
    // networks, state files under /run/isolab), then the host's run cgroups.
    let platform = host::platform(hierarchy, None);
    let mut removed = platform.gc()?;
    // The storage of killed runs (mounts, device-mapper and loop devices) before
    // their working directories.
    removed.extend(isolab_lab::storage::gc(
        &isolab_lab::storage::SystemStorageHost,
    ));
    removed.extend(isolab_lab::runner::gc_workdirs(&args.workdir)?);
    if removed.is_empty() {
        println!("nothing to remove");
    }
    for r in removed {
        println!("removed {r}");
    }
    Ok(Exit::Success)
}
