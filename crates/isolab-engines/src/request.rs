//! What the OCI-style drivers (runc, crun, LXC, nspawn) check and derive from a
//! [`RunRequest`] before touching the host: [`check_request`], the container's base
//! environment and its cgroup parent as a relative path.

use std::io;
use std::path::{Component, Path, PathBuf};

use crate::{EngineError, RunRequest};

/// Default `PATH` of the container's command (the same as isolab-runtime's).
pub(crate) const DEFAULT_PATH: &str = isolab_runtime::config::DEFAULT_PATH;

pub(crate) fn path_str(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// `cgroup_parent` without a leading `/`.
pub(crate) fn parent_rel(parent: &Path) -> PathBuf {
    parent.strip_prefix("/").unwrap_or(parent).to_path_buf()
}

/// The container's environment: isolab-runtime's defaults (`PATH`, `TERM`), then the
/// request's.
pub(crate) fn base_env(request: &RunRequest) -> Vec<String> {
    let mut env = vec![DEFAULT_PATH.to_owned(), "TERM=xterm".to_owned()];
    env.extend(request.env.iter().cloned());
    env
}

fn plain_components(p: &Path) -> bool {
    p.components()
        .all(|c| matches!(c, Component::Normal(_) | Component::RootDir))
}

/// Checks what every driver needs of a request before touching the host.
pub(crate) fn check_request(engine: &'static str, request: &RunRequest) -> Result<(), EngineError> {
    let bad = |detail: String| Err(EngineError::Unsupported { engine, detail });
    if request.argv.is_empty() {
        return bad(format!("container {}: the command is empty", request.id));
    }
    let w = &request.workdir;
    if !w.is_absolute() || !plain_components(w) || w == Path::new("/") {
        return bad(format!(
            "working directory {}: expected an absolute path other than / without '.' or '..'",
            w.display()
        ));
    }
    if !w.is_dir() {
        return Err(EngineError::Io {
            engine,
            action: "use as the working directory (it is bind-mounted into the container)",
            path: w.clone(),
            source: io::Error::new(io::ErrorKind::NotFound, "not a directory"),
        });
    }
    let parent = parent_rel(&request.cgroup_parent);
    if parent.as_os_str().is_empty()
        || !parent
            .components()
            .all(|c| matches!(c, Component::Normal(_)))
    {
        return bad(format!(
            "cgroup parent {:?}: expected a path relative to the cgroup mounts without '.' or '..' (e.g. isolab/exp1/c0-r1)",
            request.cgroup_parent
        ));
    }
    if let Some(e) = request
        .env
        .iter()
        .find(|e| !e.contains('=') || e.contains('\n'))
    {
        return bad(format!(
            "environment entry {e:?}: expected NAME=value on one line"
        ));
    }
    Ok(())
}
