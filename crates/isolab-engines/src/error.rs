//! Errors of the engine drivers.

use std::path::PathBuf;

/// What went wrong driving an engine.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// A program of the engine is not installed.
    #[error("{engine}: {missing}, or choose another platform")]
    Missing {
        /// The engine.
        engine: &'static str,
        /// The program looked for and the Debian package that provides it.
        missing: isolab_tools::NotInstalled,
    },
    /// A command of the engine failed.
    #[error("{engine}: `{command}` failed ({status}): {stderr}")]
    Command {
        /// The engine.
        engine: &'static str,
        /// The command line.
        command: String,
        /// Its exit status, as text.
        status: String,
        /// The end of its standard error.
        stderr: String,
    },
    /// A file operation failed.
    #[error("{engine}: cannot {action} {path}: {source}")]
    Io {
        /// The engine.
        engine: &'static str,
        /// What was attempted.
        action: &'static str,
        /// On which path.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Reading the image failed (the error names the file).
    #[error("{engine}: cannot {action} {path}: {source}")]
    Image {
        /// The engine.
        engine: &'static str,
        /// What was attempted.
        action: &'static str,
        /// On which path.
        path: PathBuf,
        /// Why (boxed: an image error is large).
        #[source]
        source: Box<isolab_image::ImageError>,
    },
    /// Creating, limiting or removing a cgroup failed (the error names the path).
    #[error("{engine}: cannot {action}: {source}")]
    Cgroup {
        /// The engine.
        engine: &'static str,
        /// What was attempted.
        action: &'static str,
        /// Why, with the cgroup's path.
        #[source]
        source: isolab_cgroups::Error,
    },
    /// The engine answered something isolab cannot use.
    #[error("{engine}: unexpected answer from `{command}`: {detail}")]
    Unexpected {
        /// The engine.
        engine: &'static str,
        /// The command.
        command: String,
        /// What was wrong.
        detail: String,
    },
    /// The request asks for something this engine cannot do on this host.
    #[error("{engine}: {detail}")]
    Unsupported {
        /// The engine.
        engine: &'static str,
        /// What and why, and what to do instead.
        detail: String,
    },
    /// The daemon did not become ready.
    #[error("{engine}: the daemon did not answer on {socket} within {waited_s} s; its log: {log}")]
    DaemonNotReady {
        /// The engine.
        engine: &'static str,
        /// Where isolab waited.
        socket: PathBuf,
        /// How long.
        waited_s: u64,
        /// The end of its log.
        log: String,
    },
    /// A container id lacks [`crate::ID_PREFIX`], by which [`crate::Engine::gc`]
    /// finds the containers isolab made.
    #[error("{engine}: container id {id} does not start with `{prefix}`, so `isolab gc` would not find it after a crash; name it {prefix}…")]
    MissingIdPrefix {
        /// The engine.
        engine: &'static str,
        /// The id.
        id: isolab_runtime::ContainerId,
        /// The prefix it needs.
        prefix: &'static str,
    },
}

impl EngineError {
    /// A closure turning an I/O error of `action` on `path` into [`EngineError::Io`].
    pub(crate) fn io(
        engine: &'static str,
        action: &'static str,
        path: &std::path::Path,
    ) -> impl FnOnce(std::io::Error) -> EngineError {
        let path = path.to_path_buf();
        move |source| EngineError::Io {
            engine,
            action,
            path,
            source,
        }
    }
}
