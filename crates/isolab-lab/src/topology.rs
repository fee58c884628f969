//! The host's cpu topology (packages, NUMA nodes, cores and their SMT siblings, from
//! sysfs) and the cpusets the pinned placements take from it:
//!
//! - `pinned` packs: whole cores first (SMT siblings together), inside one NUMA node
//!   when the cpus fit in one, else inside one package, else over the host; among
//!   equals the highest-numbered cpus, so that cpu 0, which usually serves most
//!   interrupts and housekeeping, is the last to be taken;
//! - `pinned-spread` spreads: one thread per core, round-robin over the packages
//!   (and their nodes), before any core's second thread.
//!
//! A host whose sysfs says nothing (a container without `/sys/devices/system`) is
//! read as [`Topology::flat`]: every cpu a core of its own on one node.

use std::collections::BTreeMap;
use std::path::Path;

use isolab_cgroups::IdSet;

/// One logical cpu and where it sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Cpu {
    /// Its number (as in `cpuset.cpus`).
    pub id: u32,
    /// Its package (socket), `physical_package_id`.
    pub package: u32,
    /// Its core within the package, `core_id`.
    pub core: u32,
    /// Its NUMA node.
    pub node: u32,
}

/// The cpus of a host with their packages, cores and nodes.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct Topology {
    /// Every cpu sysfs lists, by number.
    pub cpus: Vec<Cpu>,
}

/// Where a pinned instance landed: its cpus, their memory nodes and cores.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Placed {
    /// The cpus.
    pub cpus: IdSet,
    /// Their NUMA nodes (the instance's `cpuset.mems` on a host of several).
    pub nodes: IdSet,
    /// Their packages.
    pub packages: IdSet,
    /// How many cores the cpus are on.
    pub cores: usize,
    /// How many of those cores lend the instance only some of their threads, so that
    /// something else may run on a sibling.
    pub split_cores: usize,
}

impl Topology {
    /// Reads the topology of `cpus` from the sysfs tree under `sys` (`/sys`):
    /// `devices/system/cpu/cpuN/topology/{physical_package_id,core_id}` and
    /// `devices/system/node/nodeN/cpulist`. What sysfs lacks is filled in flat: a
    /// cpu without topology files is a core of its own in package 0, a host
    /// without node directories one node 0.
    pub fn read(sys: &Path, cpus: &IdSet) -> Topology {
        let cpu_dir = sys.join("devices/system/cpu");
        let number = |path: &Path| -> Option<u32> {
            std::fs::read_to_string(path)
                .ok()?
                .trim()
                .parse::<i64>()
                .ok()
                .and_then(|v| u32::try_from(v).ok())
        };
        let mut node_of: BTreeMap<u32, u32> = BTreeMap::new();
        if let Ok(entries) = std::fs::read_dir(sys.join("devices/system/node")) {
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                let Some(node) = name
                    .strip_prefix("node")
                    .and_then(|n| n.parse::<u32>().ok())
                else {
                    continue;
                };
                let Ok(list) = std::fs::read_to_string(entry.path().join("cpulist")) else {
                    continue;
                };
                if let Ok(set) = list.trim().parse::<IdSet>() {
                    for cpu in set.iter() {
                        node_of.insert(*cpu, node);
                    }
                }
            }
        }
        let cpus = cpus
            .iter()
            .map(|&id| {
                let topo = cpu_dir.join(format!("cpu{id}/topology"));
                Cpu {
                    id,
                    package: number(&topo.join("physical_package_id")).unwrap_or(0),
                    // Without a core id the cpu is a core of its own: a number no
                    // real core id of package 0 shares.
                    core: number(&topo.join("core_id")).unwrap_or(u32::MAX - id),
                    node: node_of.get(&id).copied().unwrap_or(0),
                }
            })
            .collect();
        Topology { cpus }
    }

    /// Every cpu of `cpus` a core of its own, in package 0 and node 0.
    pub fn flat(cpus: &IdSet) -> Topology {
        Topology {
            cpus: cpus
                .iter()
                .map(|&id| Cpu {
                    id,
                    package: 0,
                    core: id,
                    node: 0,
                })
                .collect(),
        }
    }

    /// How many NUMA nodes its cpus are on.
    pub fn node_count(&self) -> usize {
        self.cpus
            .iter()
            .map(|c| c.node)
            .collect::<std::collections::BTreeSet<_>>()
            .len()
    }

    fn cpu(&self, id: u32) -> Cpu {
        self.cpus
            .iter()
            .find(|c| c.id == id)
            .copied()
            .unwrap_or(Cpu {
                id,
                package: 0,
                core: u32::MAX - id,
                node: 0,
            })
    }

    /// `count` cpus of `available` for a pinned instance: packed by
    /// `spread = false`, spread by `spread = true` (see the module). `None` when
    /// `available` has fewer.
    pub fn pick(&self, available: &IdSet, count: u32, spread: bool) -> Option<IdSet> {
        let count = count as usize;
        if available.len() < count {
            return None;
        }
        let cpus: Vec<Cpu> = available.iter().map(|&id| self.cpu(id)).collect();
        let picked = if spread {
            spread_pick(&cpus, count)
        } else {
            // The smallest domain that holds them: a node, a package, the host; of
            // several, the one with the highest-numbered cpus.
            let domains = [
                group(&cpus, |c| u64::from(c.node)),
                group(&cpus, |c| u64::from(c.package)),
                vec![cpus.clone()],
            ];
            let domain = domains
                .iter()
                .find_map(|groups| {
                    groups
                        .iter()
                        .filter(|g| g.len() >= count)
                        .max_by_key(|g| fit_key(g, count))
                })
                .cloned()
                .unwrap_or(cpus);
            pack_pick(&domain, count)
        };
        Some(picked.into_iter().collect())
    }

    /// Where cpus `set` sit: their nodes, packages and cores, and how many of the
    /// cores lend only some of their threads (in `available`, the cpus isolab
    /// may use).
    pub fn describe(&self, set: &IdSet, available: &IdSet) -> Placed {
        let cpus: Vec<Cpu> = set.iter().map(|&id| self.cpu(id)).collect();
        let cores = group(&cpus, core_key);
        let split_cores = cores
            .iter()
            .filter(|core| {
                let key = core_key(&core[0]);
                available
                    .iter()
                    .map(|&id| self.cpu(id))
                    .filter(|c| core_key(c) == key)
                    .count()
                    > core.len()
            })
            .count();
        Placed {
            cpus: set.clone(),
            nodes: cpus.iter().map(|c| c.node).collect(),
            packages: cpus.iter().map(|c| c.package).collect(),
            cores: cores.len(),
            split_cores,
        }
    }

    /// The cpus of `a` that share a core with a cpu of `b` (SMT siblings, or the
    /// same cpu), e.g. a subject's cpus that a neighbour's or a load generator's
    /// threads run beside.
    pub fn shared_cores(&self, a: &IdSet, b: &IdSet) -> IdSet {
        let b_cores: Vec<u64> = b.iter().map(|&id| core_key(&self.cpu(id))).collect();
        a.iter()
            .copied()
            .filter(|&id| b_cores.contains(&core_key(&self.cpu(id))))
            .collect()
    }

    /// The memory nodes of `set`.
    pub fn nodes_of(&self, set: &IdSet) -> IdSet {
        set.iter().map(|&id| self.cpu(id).node).collect()
    }
}

/// A core's identity: its package and core id.
fn core_key(c: &Cpu) -> u64 {
    (u64::from(c.package) << 32) | u64::from(c.core)
}

/// `cpus` grouped by `key`, each group in cpu order.
fn group(cpus: &[Cpu], key: impl Fn(&Cpu) -> u64) -> Vec<Vec<Cpu>> {
    let mut groups: BTreeMap<u64, Vec<Cpu>> = BTreeMap::new();
    for c in cpus {
        groups.entry(key(c)).or_default().push(*c);
    }
    groups.into_values().collect()
}

/// How well a domain holds `count` cpus: more whole cores it can give, then its
/// highest cpu.
fn fit_key(domain: &[Cpu], count: usize) -> (usize, u32) {
    let whole = pack_pick(domain, count);
    let picked: Vec<Cpu> = domain
        .iter()
        .filter(|c| whole.contains(&c.id))
        .copied()
        .collect();
    let split = group(&picked, core_key)
        .iter()
        .filter(|core| {
            domain
                .iter()
                .filter(|c| core_key(c) == core_key(&core[0]))
                .count()
                > core.len()
        })
        .count();
    (
        usize::MAX - split,
        domain.iter().map(|c| c.id).max().unwrap_or(0),
    )
}

/// `count` cpus of `domain`, whole cores first (the fullest, then the
/// highest-numbered), then threads of split cores (highest first).
fn pack_pick(domain: &[Cpu], count: usize) -> Vec<u32> {
    let mut cores = group(domain, core_key);
    cores.sort_by_key(|core| {
        std::cmp::Reverse((core.len(), core.iter().map(|c| c.id).max().unwrap_or(0)))
    });
    let mut picked: Vec<u32> = Vec::new();
    let mut left: Vec<Cpu> = Vec::new();
    for core in &cores {
        if picked.len() + core.len() <= count {
            picked.extend(core.iter().map(|c| c.id));
        } else {
            left.extend(core.iter().copied());
        }
    }
    left.sort_by_key(|c| std::cmp::Reverse(c.id));
    picked.extend(left.iter().take(count - picked.len()).map(|c| c.id));
    picked.sort_unstable();
    picked
}

/// `count` cpus of `cpus`, one thread per core round-robin over packages and nodes
/// (their highest cores first), then the cores' further threads likewise.
fn spread_pick(cpus: &[Cpu], count: usize) -> Vec<u32> {
    // Rounds of threads: round k holds the k-th thread (highest first) of every core.
    let mut by_domain: BTreeMap<(u32, u32), Vec<Vec<Cpu>>> = BTreeMap::new();
    for core in group(cpus, core_key) {
        let mut core = core;
        core.sort_by_key(|c| std::cmp::Reverse(c.id));
        by_domain
            .entry((core[0].package, core[0].node))
            .or_default()
            .push(core);
    }
    for cores in by_domain.values_mut() {
        cores.sort_by_key(|core| std::cmp::Reverse(core[0].id));
    }
    let mut domains: Vec<Vec<Vec<Cpu>>> = by_domain.into_values().collect();
    // The domain with the highest cpus first.
    domains.sort_by_key(|d| std::cmp::Reverse(d.first().map_or(0, |core| core[0].id)));
    let deepest = cpus.len();
    let widest = domains.iter().map(Vec::len).max().unwrap_or(0);
    let mut picked = Vec::new();
    'rounds: for thread in 0..deepest {
        for core_rank in 0..widest {
            for domain in &domains {
                if let Some(c) = domain.get(core_rank).and_then(|core| core.get(thread)) {
                    picked.push(c.id);
                    if picked.len() == count {
                        break 'rounds;
                    }
                }
            }
        }
    }
    picked.sort_unstable();
    picked
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(s: &str) -> IdSet {
        s.parse().unwrap()
    }

    /// A fake sysfs tree of `packages` sockets × `cores` cores × `threads` threads,
    /// one NUMA node per socket, numbered as Linux numbers them: the first thread of
    /// every core, socket by socket, then the second threads.
    fn fake_sysfs(packages: u32, cores: u32, threads: u32) -> (tempfile::TempDir, IdSet) {
        let dir = tempfile::tempdir().unwrap();
        let per_thread = packages * cores;
        let mut node_cpus: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        for t in 0..threads {
            for p in 0..packages {
                for c in 0..cores {
                    let id = t * per_thread + p * cores + c;
                    let topo = dir
                        .path()
                        .join(format!("devices/system/cpu/cpu{id}/topology"));
                    std::fs::create_dir_all(&topo).unwrap();
                    std::fs::write(topo.join("physical_package_id"), format!("{p}\n")).unwrap();
                    std::fs::write(topo.join("core_id"), format!("{c}\n")).unwrap();
                    node_cpus.entry(p).or_default().push(id);
                }
            }
        }
        for (node, cpus) in node_cpus {
            let d = dir.path().join(format!("devices/system/node/node{node}"));
            std::fs::create_dir_all(&d).unwrap();
            let list: IdSet = cpus.into_iter().collect();
            std::fs::write(d.join("cpulist"), format!("{list}\n")).unwrap();
        }
        let all = (0..packages * cores * threads).collect();
        (dir, all)
    }

    #[test]
    fn reads_packages_cores_and_nodes_from_sysfs() {
        let (sys, all) = fake_sysfs(2, 4, 2);
        let t = Topology::read(sys.path(), &all);
        assert_eq!(t.cpus.len(), 16);
        assert_eq!(t.node_count(), 2);
        assert_eq!(
            t.cpu(5),
            Cpu {
                id: 5,
                package: 1,
                core: 1,
                node: 1
            }
        );
        assert_eq!(
            t.cpu(13),
            Cpu {
                id: 13,
                package: 1,
                core: 1,
                node: 1
            }
        );
    }

    #[test]
    fn pinned_packs_whole_cores_on_one_socket() {
        let (sys, all) = fake_sysfs(2, 4, 2);
        let t = Topology::read(sys.path(), &all);
        // 4 cpus: two whole cores of socket 1 (the highest), siblings together.
        let four = t.pick(&all, 4, false).unwrap();
        assert_eq!(four, set("6-7,14-15"));
        let placed = t.describe(&four, &all);
        assert_eq!((placed.nodes, placed.packages), (set("1"), set("1")));
        assert_eq!((placed.cores, placed.split_cores), (2, 0));
        // 8 cpus fill socket 1; 3 cpus take one whole core and one thread.
        assert_eq!(t.pick(&all, 8, false).unwrap(), set("4-7,12-15"));
        let three = t.pick(&all, 3, false).unwrap();
        assert_eq!(t.describe(&three, &all).split_cores, 1);
        assert_eq!(t.nodes_of(&three), set("1"));
        // 10 cpus need both sockets.
        assert_eq!(t.nodes_of(&t.pick(&all, 10, false).unwrap()), set("0-1"));
        assert_eq!(t.pick(&all, 17, false), None);
    }

    #[test]
    fn pinned_takes_whole_cores_of_what_is_left() {
        let (sys, all) = fake_sysfs(2, 4, 2);
        let t = Topology::read(sys.path(), &all);
        // Of socket 1 only cpu 6 (core 2's first thread) and core 3 (7 and 15) are
        // left: 2 cpus take core 3 whole rather than the two highest, 6 and 7.
        let available = set("0-3,6-11,15");
        let two = t.pick(&available, 2, false).unwrap();
        assert_eq!(t.describe(&two, &available).split_cores, 0);
        assert_eq!(two, set("7,15"));
    }

    #[test]
    fn pinned_spread_spreads_over_sockets_and_cores() {
        let (sys, all) = fake_sysfs(2, 4, 2);
        let t = Topology::read(sys.path(), &all);
        let four = t.pick(&all, 4, true).unwrap();
        let placed = t.describe(&four, &all);
        assert_eq!(placed.packages, set("0-1"));
        assert_eq!(placed.cores, 4, "one thread per core: {four}");
        assert_eq!(placed.split_cores, 4);
        // Beyond one thread per core it takes the second threads.
        let ten = t.pick(&all, 10, true).unwrap();
        assert_eq!(t.describe(&ten, &all).cores, 8);
    }

    #[test]
    fn a_one_node_vm_without_smt_pins_the_highest_cpus() {
        // A guest's sysfs: 2 vCPUs, each a core of one socket, one node.
        let (sys, all) = fake_sysfs(1, 2, 1);
        let t = Topology::read(sys.path(), &all);
        assert_eq!(t.node_count(), 1);
        assert_eq!(t.pick(&all, 1, false), Some(set("1")));
        assert_eq!(t.pick(&all, 1, true), Some(set("1")));
        assert_eq!(t.pick(&all, 2, false), Some(set("0-1")));
    }

    #[test]
    fn a_sysfs_without_topology_reads_flat() {
        let empty = tempfile::tempdir().unwrap();
        let t = Topology::read(empty.path(), &set("0-3"));
        assert_eq!(t.node_count(), 1);
        assert_eq!(t.pick(&set("0-3"), 2, false), Some(set("2-3")));
        assert_eq!(t.pick(&set("0,2,5"), 1, false), Some(set("5")));
        assert_eq!(
            Topology::flat(&set("0-3")).pick(&set("0-3"), 2, true),
            Some(set("2-3"))
        );
    }

    #[test]
    fn shared_cores_finds_siblings_of_another_set() {
        let (sys, all) = fake_sysfs(2, 4, 2);
        let t = Topology::read(sys.path(), &all);
        // cpu 6's sibling is 14; 7 shares nothing with {14, 0}.
        assert_eq!(t.shared_cores(&set("6-7"), &set("0,14")), set("6"));
        assert_eq!(t.shared_cores(&set("6-7"), &set("6")), set("6"));
    }
}
