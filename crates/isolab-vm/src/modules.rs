//! Kernel modules for the initramfs: an index of a kernel's modules (from `modules.dep` when
//! depmod made one, otherwise from each `.ko` file's `.modinfo` section, which is what Debian's
//! package ships before depmod runs) and the order to `insmod` the modules the guest needs,
//! dependencies first.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::error::{IoContext, VmError};

/// One loadable module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleInfo {
    /// The module name with underscores ("virtio_pci").
    pub name: String,
    /// The `.ko` file, relative to the modules directory (`kernel/drivers/virtio/virtio_pci.ko`).
    pub path: PathBuf,
    /// Modules that must be loaded first (symbol dependencies).
    pub depends: Vec<String>,
    /// Soft pre-dependencies (`softdep=pre: …`); those that are not module names (aliases such
    /// as `crc32c`) are ignored.
    pub softdep_pre: Vec<String>,
}

/// The modules of one kernel release.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModuleIndex {
    modules: BTreeMap<String, ModuleInfo>,
    builtin: BTreeSet<String>,
}

/// A module name in canonical form: `-` becomes `_`.
pub fn canonical_name(name: &str) -> String {
    name.replace('-', "_")
}

/// The module name of a path such as `kernel/fs/9p/9p.ko` (or `9p.ko.xz`, `9p.ko.zst`:
/// compressed, as trixie's kernel ships them).
fn name_of_path(path: &str) -> Option<String> {
    let file = path.rsplit('/').next()?;
    let file = [".xz", ".zst", ".gz"]
        .iter()
        .find_map(|ext| file.strip_suffix(ext))
        .unwrap_or(file);
    let stem = file.strip_suffix(".ko")?;
    Some(canonical_name(stem))
}

/// Whether `dir` holds compressed modules (`.ko.xz`, `.ko.zst`, `.ko.gz`) anywhere below.
pub fn has_compressed_modules(dir: &Path) -> bool {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(entry.path());
            } else if [".ko.xz", ".ko.zst", ".ko.gz"]
                .iter()
                .any(|e| name.ends_with(e))
            {
                return true;
            }
        }
    }
    false
}

impl ModuleIndex {
    /// Reads the modules of `dir` (`…/lib/modules/RELEASE`): `modules.dep` when present,
    /// otherwise every `.ko` file's `.modinfo`; plus `modules.builtin` when present.
    pub fn scan(dir: &Path) -> Result<ModuleIndex, VmError> {
        let builtin_path = dir.join("modules.builtin");
        let builtin = match std::fs::read_to_string(&builtin_path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(VmError::io("read", builtin_path, e)),
        };
        let dep_path = dir.join("modules.dep");
        match std::fs::read_to_string(&dep_path) {
            Ok(text) => return ModuleIndex::from_modules_dep(&text, &builtin, &dep_path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(VmError::io("read", dep_path, e)),
        }
        let mut index = ModuleIndex::from_builtin(&builtin);
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for entry in std::fs::read_dir(&d).ctx("read directory", &d)? {
                let entry = entry.ctx("read directory", &d)?;
                let path = entry.path();
                let ft = entry.file_type().ctx("stat", &path)?;
                if ft.is_dir() {
                    stack.push(path);
                    continue;
                }
                let file_name = entry.file_name().to_string_lossy().into_owned();
                if file_name.ends_with(".ko.xz")
                    || file_name.ends_with(".ko.zst")
                    || file_name.ends_with(".ko.gz")
                {
                    return Err(VmError::ModuleFormat {
                        path,
                        reason: "compressed modules and no modules.dep: run depmod on the \
                                 kernel's tree first (isolab does for a guest kernel)"
                            .into(),
                    });
                }
                if !file_name.ends_with(".ko") {
                    continue;
                }
                let bytes = std::fs::read(&path).ctx("read", &path)?;
                let rel = path.strip_prefix(dir).unwrap_or(&path).to_path_buf();
                let info =
                    module_info_from_elf(&bytes, &rel).map_err(|reason| VmError::ModuleFormat {
                        path: path.clone(),
                        reason,
                    })?;
                index.modules.insert(info.name.clone(), info);
            }
        }
        Ok(index)
    }

    fn from_builtin(builtin: &str) -> ModuleIndex {
        ModuleIndex {
            modules: BTreeMap::new(),
            builtin: builtin
                .lines()
                .filter_map(|l| name_of_path(l.trim()))
                .collect(),
        }
    }

    /// Parses depmod's `modules.dep` (`kernel/a.ko: kernel/b.ko kernel/c.ko`) and
    /// `modules.builtin` (one path a line). `origin` names the file in errors.
    pub fn from_modules_dep(
        text: &str,
        builtin: &str,
        origin: &Path,
    ) -> Result<ModuleIndex, VmError> {
        let mut index = ModuleIndex::from_builtin(builtin);
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bad = |reason: &str| VmError::ModuleFormat {
                path: origin.to_path_buf(),
                reason: format!("line {}: {reason}: {line:?}", n + 1),
            };
            let (module, deps) = line
                .split_once(':')
                .ok_or_else(|| bad("expected `path.ko: deps…`"))?;
            let name = name_of_path(module.trim()).ok_or_else(|| bad("not a .ko path"))?;
            let depends = deps
                .split_whitespace()
                .map(|d| name_of_path(d).ok_or_else(|| bad("dependency is not a .ko path")))
                .collect::<Result<Vec<_>, _>>()?;
            index.modules.insert(
                name.clone(),
                ModuleInfo {
                    name,
                    path: PathBuf::from(module.trim()),
                    depends,
                    softdep_pre: Vec::new(),
                },
            );
        }
        Ok(index)
    }

    /// The module called `name` (either spelling), if loadable.
    pub fn get(&self, name: &str) -> Option<&ModuleInfo> {
        self.modules.get(&canonical_name(name))
    }

    /// Whether `name` is built into the kernel.
    pub fn is_builtin(&self, name: &str) -> bool {
        self.builtin.contains(&canonical_name(name))
    }

    /// The modules to load, in `insmod` order, for `wanted`: each after its dependencies, each
    /// once; built-in ones are skipped. `modules_dir` only names the directory in errors.
    pub fn load_order(
        &self,
        wanted: &[&str],
        modules_dir: &Path,
    ) -> Result<Vec<&ModuleInfo>, VmError> {
        let mut order = Vec::new();
        let mut done = BTreeSet::new();
        for w in wanted {
            let mut stack = Vec::new();
            self.visit(
                &canonical_name(w),
                "the guest",
                &mut stack,
                &mut done,
                &mut order,
                modules_dir,
            )?;
        }
        Ok(order)
    }

    fn visit<'a>(
        &'a self,
        name: &str,
        needed_by: &str,
        stack: &mut Vec<String>,
        done: &mut BTreeSet<String>,
        order: &mut Vec<&'a ModuleInfo>,
        modules_dir: &Path,
    ) -> Result<(), VmError> {
        if done.contains(name) || self.builtin.contains(name) {
            return Ok(());
        }
        if let Some(pos) = stack.iter().position(|s| s == name) {
            let mut cycle = stack[pos..].to_vec();
            cycle.push(name.to_owned());
            return Err(VmError::ModuleCycle {
                cycle: cycle.join(" -> "),
            });
        }
        let info = self
            .modules
            .get(name)
            .ok_or_else(|| VmError::ModuleMissing {
                module: name.to_owned(),
                needed_by: needed_by.to_owned(),
                dir: modules_dir.to_path_buf(),
            })?;
        stack.push(name.to_owned());
        let soft = info
            .softdep_pre
            .iter()
            .filter(|s| self.modules.contains_key(s.as_str()));
        for dep in info.depends.iter().chain(soft) {
            self.visit(dep, name, stack, done, order, modules_dir)?;
        }
        stack.pop();
        done.insert(name.to_owned());
        order.push(info);
        Ok(())
    }
}

/// The `key=value` strings of a module's `.modinfo` ELF section.
pub fn modinfo_strings(elf: &[u8]) -> Result<Vec<String>, String> {
    let section = elf_section(elf, ".modinfo")?.ok_or("no .modinfo section")?;
    Ok(section
        .split(|&b| b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect())
}

fn module_info_from_elf(elf: &[u8], rel: &Path) -> Result<ModuleInfo, String> {
    let strings = modinfo_strings(elf)?;
    fn field<'a>(strings: &'a [String], key: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        strings
            .iter()
            .filter_map(move |s| s.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
    }
    let from_path = rel
        .file_name()
        .and_then(|f| f.to_str())
        .and_then(name_of_path)
        .ok_or("file name does not end in .ko")?;
    let name = field(&strings, "name")
        .next()
        .map(canonical_name)
        .unwrap_or(from_path);
    let depends = field(&strings, "depends")
        .flat_map(|d| d.split(','))
        .filter(|d| !d.is_empty())
        .map(canonical_name)
        .collect();
    // "softdep=pre: crc32c post: foo"
    let mut softdep_pre = Vec::new();
    for spec in field(&strings, "softdep") {
        let mut in_pre = false;
        for word in spec.split_whitespace() {
            match word {
                "pre:" => in_pre = true,
                w if w.ends_with(':') => in_pre = false,
                w if in_pre => softdep_pre.push(canonical_name(w)),
                _ => {}
            }
        }
    }
    Ok(ModuleInfo {
        name,
        path: rel.to_path_buf(),
        depends,
        softdep_pre,
    })
}

fn read_u16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn read_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn read_u64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// The contents of section `wanted` of a little-endian ELF64 file.
fn elf_section<'a>(elf: &'a [u8], wanted: &str) -> Result<Option<&'a [u8]>, String> {
    if elf.get(..4) != Some(b"\x7fELF".as_slice()) {
        return Err("not an ELF file".into());
    }
    if elf.get(4) != Some(&2) || elf.get(5) != Some(&1) {
        return Err("not a little-endian 64-bit ELF file".into());
    }
    let truncated = || "truncated ELF header".to_string();
    let shoff =
        usize::try_from(read_u64(elf, 0x28).ok_or_else(truncated)?).map_err(|_| truncated())?;
    let shentsize = usize::from(read_u16(elf, 0x3A).ok_or_else(truncated)?);
    let shnum = usize::from(read_u16(elf, 0x3C).ok_or_else(truncated)?);
    let shstrndx = usize::from(read_u16(elf, 0x3E).ok_or_else(truncated)?);
    if shentsize < 40 {
        return Err(format!("section header size {shentsize} is too small"));
    }
    let section = |i: usize| -> Result<(u32, &'a [u8]), String> {
        let h = shoff + i * shentsize;
        let bad = || format!("section header {i} is out of bounds");
        let name = read_u32(elf, h).ok_or_else(bad)?;
        let off = usize::try_from(read_u64(elf, h + 24).ok_or_else(bad)?).map_err(|_| bad())?;
        let size = usize::try_from(read_u64(elf, h + 32).ok_or_else(bad)?).map_err(|_| bad())?;
        let data = elf
            .get(off..off.checked_add(size).ok_or_else(bad)?)
            .ok_or_else(|| format!("section {i} lies outside the file"))?;
        Ok((name, data))
    };
    let (_, strtab) = section(shstrndx)?;
    for i in 0..shnum {
        let (name_off, data) = section(i)?;
        let name = strtab
            .get(name_off as usize..)
            .and_then(|s| s.split(|&b| b == 0).next())
            .unwrap_or_default();
        if name == wanted.as_bytes() {
            return Ok(Some(data));
        }
    }
    Ok(None)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    const DEP: &str = "\
kernel/drivers/virtio/virtio_ring.ko:
kernel/drivers/virtio/virtio.ko: kernel/drivers/virtio/virtio_ring.ko
kernel/drivers/virtio/virtio_pci.ko: kernel/drivers/virtio/virtio_pci_modern_dev.ko kernel/drivers/virtio/virtio_pci_legacy_dev.ko kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko
kernel/drivers/virtio/virtio_pci_modern_dev.ko:
kernel/drivers/virtio/virtio_pci_legacy_dev.ko:
kernel/drivers/block/virtio_blk.ko: kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko
kernel/fs/ext4/ext4.ko: kernel/fs/jbd2/jbd2.ko kernel/fs/mbcache.ko kernel/lib/crc16.ko
kernel/fs/jbd2/jbd2.ko:
kernel/fs/mbcache.ko:
kernel/lib/crc16.ko:
kernel/net/9p/9pnet.ko:
kernel/net/9p/9pnet_virtio.ko: kernel/drivers/virtio/virtio.ko kernel/net/9p/9pnet.ko kernel/drivers/virtio/virtio_ring.ko
kernel/fs/9p/9p.ko: kernel/net/9p/9pnet.ko kernel/fs/fscache/fscache.ko kernel/fs/netfs/netfs.ko
kernel/fs/fscache/fscache.ko: kernel/fs/netfs/netfs.ko
kernel/fs/netfs/netfs.ko:
";

    fn names(order: &[&ModuleInfo]) -> Vec<String> {
        order.iter().map(|m| m.name.clone()).collect()
    }

    fn before(order: &[String], a: &str, b: &str) -> bool {
        let pa = order.iter().position(|n| n == a).unwrap();
        let pb = order.iter().position(|n| n == b).unwrap();
        pa < pb
    }

    #[test]
    fn modules_dep_order_puts_dependencies_first_once() {
        let idx =
            ModuleIndex::from_modules_dep(DEP, "kernel/fs/overlayfs/overlay.ko\n", "m".as_ref())
                .unwrap();
        let order = idx
            .load_order(
                &[
                    "virtio_pci",
                    "virtio-blk",
                    "ext4",
                    "9pnet_virtio",
                    "9p",
                    "overlay",
                ],
                "d".as_ref(),
            )
            .unwrap();
        let order = names(&order);
        assert_eq!(
            order,
            [
                "virtio_pci_modern_dev",
                "virtio_pci_legacy_dev",
                "virtio_ring",
                "virtio",
                "virtio_pci",
                "virtio_blk",
                "jbd2",
                "mbcache",
                "crc16",
                "ext4",
                "9pnet",
                "9pnet_virtio",
                "netfs",
                "fscache",
                "9p"
            ]
        );
        assert!(before(&order, "netfs", "fscache"));
        assert!(
            !order.contains(&"overlay".to_string()),
            "built-in is skipped"
        );
        assert_eq!(
            idx.get("virtio-pci").unwrap().path,
            Path::new("kernel/drivers/virtio/virtio_pci.ko")
        );
    }

    #[test]
    fn missing_and_cyclic_modules_are_errors() {
        let idx = ModuleIndex::from_modules_dep(DEP, "", "m".as_ref()).unwrap();
        let e = idx
            .load_order(&["vsock"], "/lib/modules/x".as_ref())
            .unwrap_err();
        assert!(e.to_string().contains("vsock (needed by the guest)"), "{e}");
        let cyclic = "a.ko: b.ko\nb.ko: a.ko\n";
        let idx = ModuleIndex::from_modules_dep(cyclic, "", "m".as_ref()).unwrap();
        let e = idx.load_order(&["a"], "d".as_ref()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "kernel modules depend on each other in a cycle: a -> b -> a"
        );
        let e = ModuleIndex::from_modules_dep("nonsense\n", "", "m.dep".as_ref()).unwrap_err();
        assert!(e.to_string().contains("m.dep: line 1"), "{e}");
    }

    /// A minimal ELF64 file with a `.modinfo` section holding `strings`.
    pub(crate) fn fake_ko(strings: &[&str]) -> Vec<u8> {
        let mut modinfo = Vec::new();
        for s in strings {
            modinfo.extend_from_slice(s.as_bytes());
            modinfo.push(0);
        }
        let shstrtab = b"\0.modinfo\0.shstrtab\0".to_vec();
        let mut elf = vec![0u8; 64];
        elf[..4].copy_from_slice(b"\x7fELF");
        elf[4] = 2;
        elf[5] = 1;
        let modinfo_off = elf.len();
        elf.extend_from_slice(&modinfo);
        let shstr_off = elf.len();
        elf.extend_from_slice(&shstrtab);
        while elf.len() % 8 != 0 {
            elf.push(0);
        }
        let shoff = elf.len();
        let mut header = |name: u32, off: usize, size: usize| {
            let mut h = vec![0u8; 64];
            h[..4].copy_from_slice(&name.to_le_bytes());
            h[24..32].copy_from_slice(&(off as u64).to_le_bytes());
            h[32..40].copy_from_slice(&(size as u64).to_le_bytes());
            elf.extend_from_slice(&h);
        };
        header(0, 0, 0);
        header(1, modinfo_off, modinfo.len());
        header(10, shstr_off, shstrtab.len());
        elf[0x28..0x30].copy_from_slice(&(shoff as u64).to_le_bytes());
        elf[0x3A..0x3C].copy_from_slice(&64u16.to_le_bytes());
        elf[0x3C..0x3E].copy_from_slice(&3u16.to_le_bytes());
        elf[0x3E..0x40].copy_from_slice(&2u16.to_le_bytes());
        elf
    }

    #[test]
    fn modinfo_is_read_from_the_elf_section() {
        let ko = fake_ko(&[
            "license=GPL",
            "softdep=pre: crc32c post: foo",
            "depends=jbd2,mbcache,crc16",
            "name=ext4",
        ]);
        let info = module_info_from_elf(&ko, Path::new("kernel/fs/ext4/ext4.ko")).unwrap();
        assert_eq!(info.name, "ext4");
        assert_eq!(info.depends, ["jbd2", "mbcache", "crc16"]);
        assert_eq!(info.softdep_pre, ["crc32c"]);
        assert!(module_info_from_elf(b"not elf", Path::new("x.ko")).is_err());
        let mut truncated = ko.clone();
        truncated.truncate(100);
        assert!(modinfo_strings(&truncated).is_err());
    }

    #[test]
    fn scan_reads_a_tree_without_modules_dep() {
        let dir = tempfile::tempdir().unwrap();
        let k = dir.path().join("kernel/fs");
        std::fs::create_dir_all(&k).unwrap();
        std::fs::write(k.join("jbd2.ko"), fake_ko(&["depends=", "name=jbd2"])).unwrap();
        std::fs::write(
            k.join("ext4.ko"),
            fake_ko(&["depends=jbd2", "softdep=pre: crc32c", "name=ext4"]),
        )
        .unwrap();
        std::fs::write(k.join("crc32c-generic.ko"), fake_ko(&["depends="])).unwrap();
        std::fs::write(dir.path().join("modules.builtin"), "kernel/fs/mbcache.ko\n").unwrap();
        let idx = ModuleIndex::scan(dir.path()).unwrap();
        assert!(idx.is_builtin("mbcache"));
        let order = idx
            .load_order(&["crc32c_generic", "ext4"], dir.path())
            .unwrap();
        assert_eq!(names(&order), ["crc32c_generic", "jbd2", "ext4"]);
        assert_eq!(order[2].path, Path::new("kernel/fs/ext4.ko"));
    }
}
