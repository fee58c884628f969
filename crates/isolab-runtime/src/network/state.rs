//! On-disk state: one attachment record per container and bridge (what was
//! set up, so teardown works after a crash), the host-local leases, and the
//! per-bridge lock.
//!
//! Layout under the state directory (default `/run/isolab/cni`, a tmpfs, so
//! leases vanish with the containers at reboot):
//!
//! ```text
//! attachments/<bridge>/<container-id>.json   AttachmentRecord
//! ipam/<bridge>/<ip>                          host-local lease: "<container-id>\r\n<ifname>"
//! ipam/<bridge>/lock, last_reserved_ip.0      host-local's own files
//! <bridge>.lock                               flock for the bridge's iptables rule
//! ```

use std::fs::{self, File};
use std::io;
use std::net::IpAddr;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::cni::CniResult;
use super::host::NetnsId;
use super::{NetworkError, Publish};

/// What attach did for one container, written before the first plugin runs
/// and completed with the plugin result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttachmentRecord {
    /// The container.
    pub container_id: String,
    /// Bridge (and CNI network) name.
    pub bridge: String,
    /// Subnet.
    pub subnet: String,
    /// Published ports (portmap DEL needs them).
    pub publish: Vec<Publish>,
    /// The namespace attached, to refuse touching a namespace that merely reuses its path.
    pub netns: Option<NetnsId>,
    /// The bridge plugin's ADD result, once it succeeded.
    pub result: Option<CniResult>,
}

/// The state directory.
#[derive(Debug, Clone)]
pub struct StateDir {
    root: PathBuf,
}

fn state_err<'a>(path: &'a Path, op: &'static str) -> impl FnOnce(io::Error) -> NetworkError + 'a {
    move |source| NetworkError::State {
        path: path.to_owned(),
        op,
        source,
    }
}

impl StateDir {
    /// State rooted at `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        StateDir { root: root.into() }
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// host-local's `dataDir`.
    pub fn ipam_dir(&self) -> PathBuf {
        self.root.join("ipam")
    }

    fn record_path(&self, bridge: &str, id: &str) -> PathBuf {
        self.root
            .join("attachments")
            .join(bridge)
            .join(format!("{id}.json"))
    }

    /// Writes a record atomically (temp file + rename).
    pub fn write_record(&self, rec: &AttachmentRecord) -> Result<(), NetworkError> {
        let path = self.record_path(&rec.bridge, &rec.container_id);
        let dir = path.parent().unwrap_or(&self.root);
        fs::create_dir_all(dir).map_err(state_err(dir, "create directory"))?;
        let tmp = path.with_extension("json.tmp");
        let data = serde_json::to_vec_pretty(rec)
            .map_err(|e| state_err(&tmp, "serialize")(io::Error::other(e)))?;
        fs::write(&tmp, data).map_err(state_err(&tmp, "write"))?;
        fs::rename(&tmp, &path).map_err(state_err(&path, "rename"))
    }

    /// Reads a record; `None` when there is none.
    pub fn read_record(
        &self,
        bridge: &str,
        id: &str,
    ) -> Result<Option<AttachmentRecord>, NetworkError> {
        let path = self.record_path(bridge, id);
        match fs::read(&path) {
            Ok(data) => serde_json::from_slice(&data)
                .map(Some)
                .map_err(|source| NetworkError::StateFormat { path, source }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(state_err(&path, "read")(e)),
        }
    }

    /// Removes a record (absent is fine).
    pub fn remove_record(&self, bridge: &str, id: &str) -> Result<(), NetworkError> {
        let path = self.record_path(bridge, id);
        match fs::remove_file(&path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(state_err(&path, "remove")(e)),
            _ => Ok(()),
        }
    }

    /// All recorded attachments as (bridge, container id).
    pub fn records(&self) -> Result<Vec<(String, String)>, NetworkError> {
        let mut out = Vec::new();
        let base = self.root.join("attachments");
        for bridge in read_dir_names(&base)? {
            for file in read_dir_names(&base.join(&bridge))? {
                if let Some(id) = file.strip_suffix(".json") {
                    out.push((bridge.clone(), id.to_owned()));
                }
            }
        }
        out.sort();
        Ok(out)
    }

    /// Leases host-local holds in `bridge`'s network, as (ip, container id).
    pub fn leases(&self, bridge: &str) -> Result<Vec<(IpAddr, String)>, NetworkError> {
        let dir = self.ipam_dir().join(bridge);
        let mut out = Vec::new();
        for name in read_dir_names(&dir)? {
            let Ok(ip) = name.parse::<IpAddr>() else {
                continue;
            };
            let path = dir.join(&name);
            let data = match fs::read_to_string(&path) {
                Ok(d) => d,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(state_err(&path, "read")(e)),
            };
            let owner = data.lines().next().unwrap_or("").trim().to_owned();
            out.push((ip, owner));
        }
        out.sort();
        Ok(out)
    }

    /// Removes what the state holds for a bridge (after its last container).
    pub fn remove_bridge_state(&self, bridge: &str) -> Result<Vec<String>, NetworkError> {
        let mut removed = Vec::new();
        for dir in [
            self.ipam_dir().join(bridge),
            self.root.join("attachments").join(bridge),
        ] {
            match fs::remove_dir_all(&dir) {
                Ok(()) => removed.push(format!("state directory {}", dir.display())),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(state_err(&dir, "remove")(e)),
            }
        }
        Ok(removed)
    }

    /// Takes the bridge's exclusive lock until the guard drops.
    pub fn lock_bridge(&self, bridge: &str) -> Result<BridgeLock, NetworkError> {
        fs::create_dir_all(&self.root).map_err(state_err(&self.root, "create directory"))?;
        let path = self.root.join(format!("{bridge}.lock"));
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(state_err(&path, "open lock"))?;
        // SAFETY: flock(2) on a descriptor we own; released when `file` closes.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } < 0 {
            return Err(state_err(&path, "lock")(io::Error::last_os_error()));
        }
        Ok(BridgeLock { _file: file })
    }
}

/// Holds a bridge lock; dropping it releases the lock.
#[derive(Debug)]
pub struct BridgeLock {
    _file: File,
}

fn read_dir_names(dir: &Path) -> Result<Vec<String>, NetworkError> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(state_err(dir, "list")(e)),
    };
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(state_err(dir, "list"))?;
        names.push(entry.file_name().to_string_lossy().into_owned());
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_list() {
        let tmp = tempfile::tempdir().unwrap();
        let st = StateDir::new(tmp.path());
        assert!(st.read_record("br0", "c1").unwrap().is_none());
        let rec = AttachmentRecord {
            container_id: "c1".into(),
            bridge: "br0".into(),
            subnet: "10.213.0.0/24".into(),
            publish: vec!["8080:80".parse().unwrap()],
            netns: Some(NetnsId {
                dev: 4,
                ino: 4026531840,
            }),
            result: None,
        };
        st.write_record(&rec).unwrap();
        assert_eq!(st.read_record("br0", "c1").unwrap(), Some(rec));
        assert_eq!(
            st.records().unwrap(),
            vec![("br0".to_owned(), "c1".to_owned())]
        );
        st.remove_record("br0", "c1").unwrap();
        st.remove_record("br0", "c1").unwrap();
        assert!(st.records().unwrap().is_empty());
    }

    #[test]
    fn corrupt_record_names_the_file() {
        let tmp = tempfile::tempdir().unwrap();
        let st = StateDir::new(tmp.path());
        let dir = tmp.path().join("attachments/br0");
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("c1.json"), "{").unwrap();
        let e = st.read_record("br0", "c1").unwrap_err();
        assert!(e.to_string().contains("c1.json"), "{e}");
    }

    #[test]
    fn reads_host_local_leases() {
        let tmp = tempfile::tempdir().unwrap();
        let st = StateDir::new(tmp.path());
        let dir = st.ipam_dir().join("br0");
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("10.213.0.2"), "c1\r\neth0").unwrap();
        fs::write(dir.join("last_reserved_ip.0"), "10.213.0.2").unwrap();
        fs::write(dir.join("lock"), "").unwrap();
        let leases = st.leases("br0").unwrap();
        assert_eq!(
            leases,
            vec![("10.213.0.2".parse().unwrap(), "c1".to_owned())]
        );
        assert_eq!(st.remove_bridge_state("br0").unwrap().len(), 1);
        assert!(st.leases("br0").unwrap().is_empty());
    }
}
