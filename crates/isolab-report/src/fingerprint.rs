//! The host fingerprint: the keys of an experiment's captured environment that change
//! results and are set outside the workload (the kernel and its command line, cpu
//! vulnerability mitigations, microcode, SMT, transparent huge pages, NUMA balancing,
//! the clocksource, swappiness, the cpu governor and boost, irqbalance, the tools',
//! engines' and runtimes' versions, the image's digest), and the drift between two
//! fingerprints. Experiments whose fingerprints differ are not measurements of the same
//! thing: `compare` says so, `gate` refuses them unless the drift is allowed.

use std::collections::BTreeMap;

/// Environment keys of the fingerprint, as the lab's environment capture names them.
pub const KEYS: &[&str] = &[
    "hostname",
    "isolab_version",
    "kernel",
    "kernel_build",
    "kernel_cmdline",
    "os",
    "cpu_model",
    "cpu_microcode",
    "cpu_threads",
    "cpus_online",
    "smt",
    "cpu_governor",
    "cpu_boost",
    "memory_total",
    "cgroup",
    "virtualization",
    "thp",
    "thp_defrag",
    "numa_balancing",
    "clocksource",
    "swappiness",
    "irqbalance",
    "image.digest",
    "image.recipe.hash",
    "image.manifest_sha256",
];

/// Key prefixes of the fingerprint: mitigations, tool, runtime and image-tool versions,
/// generated assets (their key holds their content hash).
pub const PREFIXES: &[&str] = &["mitigation.", "tool.", "runtime.", "image.tool.", "asset."];

/// Whether `key` belongs to the fingerprint: a [`KEYS`] key, a [`PREFIXES`] prefix, or an
/// engine's image digest (`engine.docker.image_digest`).
pub fn is_fingerprint_key(key: &str) -> bool {
    KEYS.contains(&key)
        || PREFIXES.iter().any(|p| key.starts_with(p))
        || (key.starts_with("engine.") && key.ends_with(".image_digest"))
}

/// The fingerprint of a captured environment.
pub fn fingerprint(environment: &[(String, String)]) -> BTreeMap<String, String> {
    environment
        .iter()
        .filter(|(k, _)| is_fingerprint_key(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// One key whose value differs between two fingerprints (`None`: not captured on that
/// side).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Drift {
    /// The environment key.
    pub key: String,
    /// Its value on the reference's side.
    pub before: Option<String>,
    /// Its value on the candidate's side.
    pub after: Option<String>,
}

/// The keys whose values differ from `before` to `after`. A key only one side
/// captured counts when it names a tool, runtime, image tool, asset or engine image
/// (every key outside [`KEYS`] and the mitigations): experiments of the same spec use
/// the same ones, so a missing one means the other side ran something else. A host key
/// or a mitigation comes and goes with isolab versions and kernels and is ignored when
/// absent.
pub fn drift(before: &BTreeMap<String, String>, after: &BTreeMap<String, String>) -> Vec<Drift> {
    let mut keys: Vec<&String> = before.keys().chain(after.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter_map(|k| {
            let (b, a) = (before.get(k), after.get(k));
            let differs = match (b, a) {
                (Some(b), Some(a)) => b != a,
                (None, None) => false,
                _ => !KEYS.contains(&k.as_str()) && !k.starts_with("mitigation."),
            };
            differs.then(|| Drift {
                key: k.clone(),
                before: b.cloned(),
                after: a.cloned(),
            })
        })
        .collect()
}

/// The drift in one line: `thp madvise → never; kernel 6.1.0 → 6.12.0`, values shortened
/// to 40 characters.
pub fn describe(drift: &[Drift]) -> String {
    let short = |v: &Option<String>| match v {
        None => "(none)".to_owned(),
        Some(v) if v.chars().count() > 40 => {
            format!("{}…", v.chars().take(39).collect::<String>())
        }
        Some(v) => v.clone(),
    };
    drift
        .iter()
        .map(|d| format!("{} {} → {}", d.key, short(&d.before), short(&d.after)))
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn the_fingerprint_keeps_what_is_set_outside_the_workload() {
        let f = fingerprint(&env(&[
            ("kernel", "6.1.0"),
            ("thp", "madvise"),
            ("mitigation.spectre_v2", "Mitigation: Retpolines"),
            ("tool.sysbench", "sysbench 1.0.20+ds-5 (Debian)"),
            ("engine.docker.image_digest", "sha256:ab"),
            ("engine.isolab.image", "/var/lib/isolab/images/recipe-1"),
            ("image.created", "2026-11-29T12:22:14Z"),
            (
                "image.host_differs.bash",
                "image 5.2.15-2+b13, host 5.2.15-2+b8",
            ),
            ("cpu_cores", "2"),
        ]));
        let keys: Vec<&str> = f.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "engine.docker.image_digest",
                "kernel",
                "mitigation.spectre_v2",
                "thp",
                "tool.sysbench"
            ]
        );
    }

    #[test]
    fn drift_names_the_keys_that_differ() {
        let a = fingerprint(&env(&[
            ("thp", "madvise"),
            ("kernel", "6.1.0"),
            ("tool.runc", "runc 1.1.5"),
            ("swappiness", "60"),
        ]));
        let b = fingerprint(&env(&[
            ("thp", "never"),
            ("kernel", "6.1.0"),
            ("tool.crun", "crun 1.8.1"),
            ("cpu_boost", "on"),
        ]));
        let d = drift(&a, &b);
        let keys: Vec<&str> = d.iter().map(|d| d.key.as_str()).collect();
        // swappiness and cpu_boost were captured on one side only (an older isolab):
        // not drift; a tool one side ran and the other did not is.
        assert_eq!(keys, ["thp", "tool.crun", "tool.runc"]);
        assert_eq!(
            describe(&d),
            "thp madvise → never; tool.crun (none) → crun 1.8.1; tool.runc runc 1.1.5 → (none)"
        );
        assert!(drift(&a, &a).is_empty());
    }
}
