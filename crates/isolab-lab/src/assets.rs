//! Workload assets ([`isolab_workloads::AssetDef`]) built once on this host, cached
//! by the hash of everything that goes into them, and placed into each run's
//! working directory.
//!
//! The cache is `ROOT/NAME-KEY/` (`/var/lib/isolab/assets` by default), `KEY` the
//! first 16 hex digits of the SHA-256 of [`isolab_workloads::RenderedAsset::key_text`]:
//! the script, its sources and the Debian versions of the programs it runs. A
//! build runs in `ROOT/.NAME-KEY.building-PID` and is renamed into place only when
//! the script succeeded, so an interrupted build never leaves a half asset that a
//! later run would take for a whole one. A failed build says which asset, which
//! command and what it printed.

use std::path::{Path, PathBuf};

use isolab_tools::{ToolCommand, ToolRunner};
use isolab_workloads::{AssetDef, Params};
use sha2::{Digest, Sha256};

use crate::environment::ToolProbe;

/// Where assets are cached unless the caller says.
pub const DEFAULT_ASSET_ROOT: &str = "/var/lib/isolab/assets";

/// The script's file name in the build directory (removed when the build succeeds).
const SCRIPT: &str = ".isolab-build.sh";

/// The variable that gives asset scripts the host's Debian mirrors as `deb-src` lines
/// (one a line), for a script that fetches a source package.
pub const DEBIAN_SOURCES: &str = "ISOLAB_DEBIAN_SOURCES";

/// An asset in the cache.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuiltAsset {
    /// Its name (`{workdir}/NAME`).
    pub name: String,
    /// Its directory in the cache.
    pub dir: PathBuf,
    /// The cache key (16 hex digits).
    pub key: String,
    /// Total size of its files in bytes.
    pub bytes: u64,
    /// Whether this call built it (`false`: it was in the cache).
    pub built: bool,
    /// What it stands in for, when it is a stand-in.
    pub stand_in: Option<String>,
}

impl BuiltAsset {
    /// The environment entries that record it: `asset.NAME.KEY` = "N bytes, DIR" (one
    /// per build: a workload tuned to other work has another) and, for a stand-in,
    /// `asset.NAME.stand_in`.
    pub fn environment(&self) -> Vec<(String, String)> {
        let mut env = vec![(
            format!("asset.{}.{}", self.name, self.key),
            format!("{} bytes, {}", self.bytes, self.dir.display()),
        )];
        if let Some(s) = &self.stand_in {
            env.push((format!("asset.{}.stand_in", self.name), s.clone()));
        }
        env
    }
}

/// Why an asset could not be built or placed.
#[derive(Debug, thiserror::Error)]
pub enum AssetError {
    /// Its templates do not render.
    #[error("asset {name}: {message}")]
    Template {
        /// The asset.
        name: String,
        /// What the template renderer said.
        message: String,
    },
    /// A program its script needs is not on this host.
    #[error("asset {name} is built on this host with {tool}, which is missing: apt-get install {package}")]
    MissingTool {
        /// The asset.
        name: String,
        /// The program.
        tool: String,
        /// The Debian package that provides it.
        package: String,
    },
    /// A file operation failed.
    #[error("asset {name}: cannot {action} {path}: {source}")]
    Io {
        /// The asset.
        name: String,
        /// What was being done.
        action: &'static str,
        /// On which path.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The build script failed.
    #[error("asset {name}: its build failed in {dir} (kept for inspection): {source}")]
    Build {
        /// The asset.
        name: String,
        /// The build directory.
        dir: PathBuf,
        /// The script's failure, with its last output lines.
        source: isolab_tools::ToolError,
    },
}

/// Builds assets into a cache directory and places them into working directories.
pub struct AssetCache<'a> {
    root: PathBuf,
    tools: &'a dyn ToolRunner,
    versions: &'a dyn ToolProbe,
    env: Vec<(String, String)>,
}

impl<'a> AssetCache<'a> {
    /// A cache in `root`, building with `tools` and keying by `versions`.
    pub fn new(
        root: impl Into<PathBuf>,
        tools: &'a dyn ToolRunner,
        versions: &'a dyn ToolProbe,
    ) -> Self {
        AssetCache {
            root: root.into(),
            tools,
            versions,
            env: Vec::new(),
        }
    }

    /// Builds with `key=value` in the scripts' environment (the host's Debian mirrors
    /// in [`DEBIAN_SOURCES`]). Not part of an asset's key: it says where to fetch,
    /// not what.
    pub fn with_env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// `def` rendered with `params` in the cache: found there, or built now.
    pub fn ensure(&self, def: &AssetDef, params: &Params) -> Result<BuiltAsset, AssetError> {
        let name = &def.name;
        let rendered = def.rendered(params).map_err(|e| AssetError::Template {
            name: name.clone(),
            message: e.to_string(),
        })?;
        let mut versions = Vec::new();
        for (tool, package) in &def.tools {
            let version = self
                .versions
                .version(tool)
                .map_err(|_| AssetError::MissingTool {
                    name: name.clone(),
                    tool: tool.clone(),
                    package: package.clone(),
                })?;
            versions.push((tool.clone(), version));
        }
        let digest = Sha256::digest(rendered.key_text(name, &versions).as_bytes());
        let key: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
        let dir = self.root.join(format!("{name}-{key}"));
        let io = |action: &'static str, path: &Path| {
            let (name, path) = (name.clone(), path.to_path_buf());
            move |source| AssetError::Io {
                name,
                action,
                path,
                source,
            }
        };
        let built = !dir.is_dir();
        if built {
            let staging = self
                .root
                .join(format!(".{name}-{key}.building-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&staging);
            std::fs::create_dir_all(&staging).map_err(io("create", &staging))?;
            for (path, text) in &rendered.sources {
                let file = staging.join(path);
                std::fs::write(&file, text).map_err(io("write", &file))?;
            }
            let script = staging.join(SCRIPT);
            std::fs::write(&script, &rendered.script).map_err(io("write", &script))?;
            let mut cmd = ToolCommand::new("sh", "dash")
                .arg("-e")
                .arg(SCRIPT)
                .cwd(&staging);
            for (key, value) in &self.env {
                cmd = cmd.env(key, value);
            }
            self.tools.run(&cmd).map_err(|source| AssetError::Build {
                name: name.clone(),
                dir: staging.clone(),
                source,
            })?;
            std::fs::remove_file(&script).map_err(io("remove", &script))?;
            match std::fs::rename(&staging, &dir) {
                Ok(()) => {}
                // Another isolab built it meanwhile: keep theirs.
                Err(_) if dir.is_dir() => {
                    let _ = std::fs::remove_dir_all(&staging);
                }
                Err(e) => return Err(io("move the build into", &dir)(e)),
            }
        }
        let bytes = tree_bytes(&dir).map_err(io("read", &dir))?;
        Ok(BuiltAsset {
            name: name.clone(),
            dir,
            key,
            bytes,
            built,
            stand_in: def.stand_in.clone(),
        })
    }
}

/// The assets of an experiment's workloads, built or found once before its runs,
/// by asset name and amount of work.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PreparedAssets(std::collections::BTreeMap<(String, u64), BuiltAsset>);

impl PreparedAssets {
    /// Every asset of `workloads` (an experiment's cells' workloads) in `cache`, each
    /// built at most once; `progress` hears of each before it is looked up or built.
    pub fn prepare<'w>(
        workloads: impl IntoIterator<Item = &'w isolab_workloads::WorkloadDef>,
        cache: &AssetCache<'_>,
        progress: &mut dyn FnMut(&AssetDef, u64),
    ) -> Result<PreparedAssets, AssetError> {
        let mut out = std::collections::BTreeMap::new();
        for w in workloads {
            let work = w.work.as_ref().map_or(0, |w| w.amount);
            for def in &w.assets {
                let key = (def.name.clone(), work);
                if out.contains_key(&key) {
                    continue;
                }
                progress(def, work);
                let mut params = Params::sample([]);
                params.work = work;
                out.insert(key, cache.ensure(def, &params)?);
            }
        }
        Ok(PreparedAssets(out))
    }

    /// The asset `name` built for `work`.
    pub fn get(&self, name: &str, work: u64) -> Option<&BuiltAsset> {
        self.0.get(&(name.to_owned(), work))
    }

    /// Every prepared asset.
    pub fn iter(&self) -> impl Iterator<Item = &BuiltAsset> {
        self.0.values()
    }

    /// The environment entries of every asset ([`BuiltAsset::environment`]), each once
    /// (one program serves every amount of work; a stand-in is said once per name).
    pub fn environment(&self) -> Vec<(String, String)> {
        let mut env: Vec<(String, String)> = Vec::new();
        for entry in self.iter().flat_map(BuiltAsset::environment) {
            if !env.contains(&entry) {
                env.push(entry);
            }
        }
        env
    }
}

/// Places `asset` into `workdir` as `workdir/NAME`, a copy: a workload that wrote
/// into a hard link would change the cached asset under every later run.
pub fn place(asset: &BuiltAsset, workdir: &Path) -> Result<(), AssetError> {
    let target = workdir.join(&asset.name);
    copy_tree(&asset.dir, &target).map_err(|(path, source)| AssetError::Io {
        name: asset.name.clone(),
        action: "place the asset at",
        path,
        source,
    })
}

/// Copies the tree `from` to `to`: files with their modes and modification times (a
/// configured source tree must not look newer than its build files to make),
/// symbolic links as links, directories last with their times.
fn copy_tree(from: &Path, to: &Path) -> Result<(), (PathBuf, std::io::Error)> {
    std::fs::create_dir_all(to).map_err(|e| (to.to_path_buf(), e))?;
    for entry in std::fs::read_dir(from).map_err(|e| (from.to_path_buf(), e))? {
        let entry = entry.map_err(|e| (from.to_path_buf(), e))?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type().map_err(|e| (src.clone(), e))?;
        if kind.is_dir() {
            copy_tree(&src, &dst)?;
        } else if kind.is_symlink() {
            let target = std::fs::read_link(&src).map_err(|e| (src.clone(), e))?;
            std::os::unix::fs::symlink(target, &dst).map_err(|e| (dst.clone(), e))?;
        } else {
            std::fs::copy(&src, &dst).map_err(|e| (dst.clone(), e))?;
            copy_mtime(&src, &dst)?;
        }
    }
    copy_mtime(from, to)
}

fn copy_mtime(from: &Path, to: &Path) -> Result<(), (PathBuf, std::io::Error)> {
    let modified = std::fs::metadata(from)
        .and_then(|m| m.modified())
        .map_err(|e| (from.to_path_buf(), e))?;
    std::fs::File::open(to)
        .and_then(|f| f.set_modified(modified))
        .map_err(|e| (to.to_path_buf(), e))
}

fn tree_bytes(dir: &Path) -> std::io::Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let meta = entry.metadata()?;
        total += if meta.is_dir() {
            tree_bytes(&entry.path())?
        } else {
            meta.len()
        };
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use isolab_workloads::FileTemplate;
    use std::cell::Cell;

    /// Versions from a fixed table; a tool not in it is missing.
    struct Versions(Vec<(&'static str, &'static str)>);

    impl ToolProbe for Versions {
        fn version(&self, tool: &str) -> Result<String, String> {
            self.0
                .iter()
                .find(|(t, _)| *t == tool)
                .map(|(_, v)| v.to_string())
                .ok_or_else(|| format!("{tool} not found"))
        }
    }

    /// Runs the build for real, counting the builds.
    struct Counting(Cell<usize>);

    impl ToolRunner for Counting {
        fn run(
            &self,
            cmd: &ToolCommand,
        ) -> Result<isolab_tools::ToolOutput, isolab_tools::ToolError> {
            self.0.set(self.0.get() + 1);
            isolab_tools::SystemTools.run(cmd)
        }
    }

    fn def(script: &str) -> AssetDef {
        AssetDef {
            name: "numbers".into(),
            description: "a test asset".into(),
            script: script.into(),
            sources: vec![FileTemplate {
                path: "input.txt".into(),
                contents: "up to @work@\n".into(),
            }],
            tools: vec![("seq".into(), "coreutils".into())],
            stand_in: Some("a stand-in".into()),
        }
    }

    fn params(work: u64) -> Params {
        let mut p = Params::sample([]);
        p.work = work;
        p
    }

    #[test]
    fn an_asset_is_built_once_per_key_and_placed_as_a_copy() {
        let root = tempfile::tempdir().unwrap();
        let runner = Counting(Cell::new(0));
        let versions = Versions(vec![("seq", "9.1-1")]);
        let cache = AssetCache::new(root.path(), &runner, &versions);
        let d = def("mkdir out\nseq @work@ > out/numbers.txt\nrm input.txt\n");
        let first = cache.ensure(&d, &params(3)).unwrap();
        assert!(first.built);
        assert_eq!(first.bytes, 6);
        let again = cache.ensure(&d, &params(3)).unwrap();
        assert!(!again.built);
        assert_eq!(
            (again.dir.clone(), again.key.clone()),
            (first.dir.clone(), first.key.clone())
        );
        assert_eq!(runner.0.get(), 1);
        // Another amount of work is another asset.
        let other = cache.ensure(&d, &params(4)).unwrap();
        assert!(other.built);
        assert_ne!(other.key, first.key);
        // The build script is not part of the asset; nothing is left beside the assets.
        assert!(!first.dir.join(SCRIPT).exists());
        let mut names: Vec<String> = std::fs::read_dir(root.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        let mut expected = [
            format!("numbers-{}", first.key),
            format!("numbers-{}", other.key),
        ];
        expected.sort();
        assert_eq!(names, expected);
        let work = tempfile::tempdir().unwrap();
        place(&first, work.path()).unwrap();
        let placed = work.path().join("numbers/out/numbers.txt");
        assert_eq!(std::fs::read_to_string(&placed).unwrap(), "1\n2\n3\n");
        // A copy: writing into the placed file leaves the cache as it was.
        std::fs::write(&placed, "changed").unwrap();
        assert_eq!(
            std::fs::read_to_string(first.dir.join("out/numbers.txt")).unwrap(),
            "1\n2\n3\n"
        );
        assert_eq!(
            first.environment()[1],
            ("asset.numbers.stand_in".to_owned(), "a stand-in".to_owned())
        );
    }

    #[test]
    fn the_script_sees_the_cache_s_environment_and_a_placed_tree_keeps_times_and_links() {
        let root = tempfile::tempdir().unwrap();
        let runner = Counting(Cell::new(0));
        let versions = Versions(vec![("seq", "9.1-1")]);
        let cache = AssetCache::new(root.path(), &runner, &versions)
            .with_env(DEBIAN_SOURCES, "deb-src http://mirror bookworm main");
        let d = def(
            "mkdir -p src/sub\nprintf '%s' \"$ISOLAB_DEBIAN_SOURCES\" > src/sources\n\
             touch -d 2001-02-03T04:05:06Z src/sources src/sub\nln -s sources src/link\n",
        );
        let built = cache.ensure(&d, &params(1)).unwrap();
        let work = tempfile::tempdir().unwrap();
        place(&built, work.path()).unwrap();
        let placed = work.path().join("numbers/src");
        assert_eq!(
            std::fs::read_to_string(placed.join("sources")).unwrap(),
            "deb-src http://mirror bookworm main"
        );
        // make compares modification times: the copy keeps the built tree's.
        for path in ["sources", "sub"] {
            let modified = std::fs::metadata(placed.join(path))
                .unwrap()
                .modified()
                .unwrap();
            let secs = modified
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs();
            assert_eq!(secs, 981_173_106, "{path}");
        }
        assert_eq!(
            std::fs::read_link(placed.join("link")).unwrap(),
            Path::new("sources")
        );
    }

    #[test]
    fn a_new_tool_version_builds_again() {
        let root = tempfile::tempdir().unwrap();
        let runner = Counting(Cell::new(0));
        let d = def("echo built > done\n");
        let v1 = Versions(vec![("seq", "9.1-1")]);
        let v2 = Versions(vec![("seq", "9.1-2")]);
        let a = AssetCache::new(root.path(), &runner, &v1)
            .ensure(&d, &params(1))
            .unwrap();
        let b = AssetCache::new(root.path(), &runner, &v2)
            .ensure(&d, &params(1))
            .unwrap();
        assert_ne!(a.key, b.key);
        assert_eq!(runner.0.get(), 2);
    }

    #[test]
    fn a_failed_build_names_the_asset_and_leaves_no_asset_behind() {
        let root = tempfile::tempdir().unwrap();
        let runner = Counting(Cell::new(0));
        let versions = Versions(vec![("seq", "9.1-1")]);
        let cache = AssetCache::new(root.path(), &runner, &versions);
        let e = cache
            .ensure(
                &def("echo half > part\necho 'no encoder' >&2\nexit 3\n"),
                &params(1),
            )
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("asset numbers: its build failed in "), "{e}");
        assert!(e.contains("no encoder"), "{e}");
        // Only the kept build directory, never a `numbers-KEY` a later run would take.
        for entry in std::fs::read_dir(root.path()).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            assert!(name.starts_with(".numbers-"), "{name}");
        }
        let again = cache
            .ensure(&def("echo whole > part\n"), &params(1))
            .unwrap();
        assert!(again.built);
    }

    #[test]
    fn a_missing_tool_says_which_package_to_install() {
        let root = tempfile::tempdir().unwrap();
        let runner = Counting(Cell::new(0));
        let versions = Versions(vec![]);
        let e = AssetCache::new(root.path(), &runner, &versions)
            .ensure(&def("true\n"), &params(1))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "asset numbers is built on this host with seq, which is missing: apt-get install coreutils"
        );
        assert_eq!(runner.0.get(), 0);
    }
}
