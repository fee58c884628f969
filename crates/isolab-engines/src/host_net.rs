//! The host's network state that an engine's daemon changes (netfilter rules,
//! `ip_forward`, its bridge), recorded before the daemon starts ([`HostNetSnapshot`])
//! and restored after it stopped; and the address arithmetic of an engine's bridge
//! subnet (`first_host`). Used by the Docker and Podman drivers.

use std::collections::BTreeMap;
use std::path::Path;

use crate::tool::{argv, require, run_ok, Tools};
use crate::EngineError;

/// What isolab recorded before starting a daemon, to undo its network changes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HostNetSnapshot {
    /// `iptables-save` output; `None` when the tool is missing or failed. An empty
    /// string is a host with no rules at all (a fresh nf_tables host): everything
    /// the engine adds is then undone.
    pub iptables: Option<String>,
    /// `ip6tables-save` output, as `iptables`.
    pub ip6tables: Option<String>,
    /// The content of `/proc/sys/net/ipv4/ip_forward` (`0` or `1`).
    pub ip_forward: String,
    /// The bridge the engine uses (`docker0`, `cni-podman0`).
    pub bridge: String,
    /// Whether that bridge existed.
    pub bridge_existed: bool,
    /// Text that marks a rule or chain as the engine's (`DOCKER`, `docker0`, the
    /// bridge's subnet): only added rules and chains that contain one are deleted.
    pub markers: Vec<String>,
}

impl HostNetSnapshot {
    /// Records the host's netfilter rules, `ip_forward` and whether `bridge` exists.
    pub fn take(
        tools: &dyn Tools,
        proc: &Path,
        sys: &Path,
        bridge: &str,
        markers: &[&str],
    ) -> HostNetSnapshot {
        HostNetSnapshot {
            iptables: save_rules(tools, "iptables-save"),
            ip6tables: save_rules(tools, "ip6tables-save"),
            ip_forward: std::fs::read_to_string(proc.join("sys/net/ipv4/ip_forward"))
                .map(|s| s.trim().to_owned())
                .unwrap_or_default(),
            bridge: bridge.to_owned(),
            bridge_existed: sys.join("class/net").join(bridge).exists(),
            markers: markers.iter().map(|m| (*m).to_owned()).collect(),
        }
    }

    /// Undoes what happened since [`HostNetSnapshot::take`] and belongs to the engine
    /// (see the module documentation); `scratch` is a directory for the restore
    /// scripts. Returns one line per thing undone.
    pub fn restore(
        &self,
        engine: &'static str,
        tools: &dyn Tools,
        proc: &Path,
        sys: &Path,
        scratch: &Path,
    ) -> Result<Vec<String>, EngineError> {
        let mut done = Vec::new();
        let markers: Vec<&str> = self.markers.iter().map(String::as_str).collect();
        for (save, restore, family, before) in [
            ("iptables-save", "iptables-restore", "ip", &self.iptables),
            (
                "ip6tables-save",
                "ip6tables-restore",
                "ip6",
                &self.ip6tables,
            ),
        ] {
            let Some(before) = before else {
                continue;
            };
            let now = save_rules(tools, save).unwrap_or_default();
            let plan = undo_plan(before, &now, &markers);
            if !plan.script.is_empty() {
                let file = scratch.join(format!("{restore}.rules"));
                std::fs::write(&file, &plan.script).map_err(|source| EngineError::Io {
                    engine,
                    action: "write a restore script to",
                    path: file.clone(),
                    source,
                })?;
                let restore_bin = tools.which(restore).unwrap_or_else(|| restore.into());
                run_ok(
                    tools,
                    engine,
                    &argv([
                        restore_bin.display().to_string(),
                        "--noflush".into(),
                        file.display().to_string(),
                    ]),
                )?;
                // Best effort: the script is only a record of what was done.
                let _ = std::fs::remove_file(&file);
                done.push(format!("{save}: {}", plan.summary));
            }
            if is_nf_tables(&now) {
                if let Some(nft) = tools.which("nft") {
                    for table in &plan.new_tables {
                        let after = save_rules(tools, save).unwrap_or_default();
                        if table_is_default(&after, table) {
                            run_ok(
                                tools,
                                engine,
                                &argv([
                                    nft.display().to_string(),
                                    "delete".into(),
                                    "table".into(),
                                    family.into(),
                                    table.clone(),
                                ]),
                            )?;
                            done.push(format!("deleted the {family} table {table}"));
                        }
                    }
                }
            }
        }
        let forward = proc.join("sys/net/ipv4/ip_forward");
        if !self.ip_forward.is_empty() {
            let current = std::fs::read_to_string(&forward).unwrap_or_default();
            if current.trim() != self.ip_forward {
                std::fs::write(&forward, format!("{}\n", self.ip_forward)).map_err(|source| {
                    EngineError::Io {
                        engine,
                        action: "restore",
                        path: forward.clone(),
                        source,
                    }
                })?;
                done.push(format!("ip_forward set back to {}", self.ip_forward));
            }
        }
        if !self.bridge_existed && sys.join("class/net").join(&self.bridge).exists() {
            let ip = require(tools, engine, "ip", "iproute2")?;
            run_ok(
                tools,
                engine,
                &argv([
                    ip.display().to_string(),
                    "link".into(),
                    "delete".into(),
                    self.bridge.clone(),
                ]),
            )?;
            done.push(format!("deleted the bridge {}", self.bridge));
        }
        Ok(done)
    }
}

/// The output of `save` (`iptables-save`), `None` when it is missing or fails.
fn save_rules(tools: &dyn Tools, save: &str) -> Option<String> {
    let bin = tools.which(save)?;
    match tools.run(&[bin.display().to_string()]) {
        Ok(out) if out.status == 0 => Some(out.stdout),
        _ => None,
    }
}

fn is_nf_tables(save_output: &str) -> bool {
    save_output
        .lines()
        .any(|l| l.starts_with('#') && l.contains("(nf_tables)"))
}

/// One table of `iptables-save` output without counters and comments.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Table {
    /// Chain name → policy (`-` for user chains), in order.
    pub chains: Vec<(String, String)>,
    /// `-A …` lines, in order.
    pub rules: Vec<String>,
}

const BUILTIN_CHAINS: [&str; 5] = ["PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"];

/// Parses `iptables-save` output into tables (comments and counters dropped).
pub(crate) fn parse_save(text: &str) -> BTreeMap<String, Table> {
    let mut tables = BTreeMap::new();
    let mut current: Option<(String, Table)> = None;
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(name) = line.strip_prefix('*') {
            if let Some((n, t)) = current.take() {
                tables.insert(n, t);
            }
            current = Some((name.to_owned(), Table::default()));
        } else if line == "COMMIT" {
            if let Some((n, t)) = current.take() {
                tables.insert(n, t);
            }
        } else if let Some((_, t)) = current.as_mut() {
            if let Some(chain) = line.strip_prefix(':') {
                let mut parts = chain.split_whitespace();
                let name = parts.next().unwrap_or_default().to_owned();
                let policy = parts.next().unwrap_or("-").to_owned();
                t.chains.push((name, policy));
            } else if line.starts_with("-A ") {
                t.rules.push(line.to_owned());
            }
        }
    }
    if let Some((n, t)) = current.take() {
        tables.insert(n, t);
    }
    tables
}

/// `iptables-save` output with comments and counters dropped, for comparisons.
pub fn normalized_rules(text: &str) -> String {
    let mut out = String::new();
    for (name, table) in parse_save(text) {
        out.push_str(&format!("*{name}\n"));
        for (chain, policy) in &table.chains {
            out.push_str(&format!(":{chain} {policy}\n"));
        }
        for rule in &table.rules {
            out.push_str(rule);
            out.push('\n');
        }
        out.push_str("COMMIT\n");
    }
    out
}

/// What [`undo_plan`] found to undo.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct UndoPlan {
    /// An `iptables-restore --noflush` script (empty when nothing is to be done).
    pub script: String,
    /// Tables that did not exist before (delete them when default again).
    pub new_tables: Vec<String>,
    /// One line saying what the script does.
    pub summary: String,
}

/// The restore script that deletes rules and chains present in `now` but not in
/// `before` whose text contains one of `markers`, and sets changed built-in chain
/// policies back.
pub(crate) fn undo_plan(before: &str, now: &str, markers: &[&str]) -> UndoPlan {
    let before = parse_save(before);
    let now = parse_save(now);
    let owned = |s: &str| markers.iter().any(|m| !m.is_empty() && s.contains(m));
    let mut plan = UndoPlan::default();
    let (mut n_rules, mut n_chains, mut n_policies) = (0, 0, 0);
    for (name, table) in &now {
        let empty = Table::default();
        let old = match before.get(name) {
            Some(t) => t,
            None => {
                plan.new_tables.push(name.clone());
                &empty
            }
        };
        let mut lines = Vec::new();
        for (chain, policy) in &table.chains {
            if !BUILTIN_CHAINS.contains(&chain.as_str()) {
                continue;
            }
            let old_policy = old
                .chains
                .iter()
                .find(|(c, _)| c == chain)
                .map(|(_, p)| p.as_str())
                .unwrap_or("ACCEPT");
            if old_policy != policy {
                lines.push(format!("-P {chain} {old_policy}"));
                n_policies += 1;
            }
        }
        // Multiset difference: a rule present k times before and n times now was
        // added n − k times; delete the last ones first.
        let mut remaining: BTreeMap<&str, usize> = BTreeMap::new();
        for r in &old.rules {
            *remaining.entry(r.as_str()).or_default() += 1;
        }
        let mut added = Vec::new();
        for r in &table.rules {
            match remaining.get_mut(r.as_str()) {
                Some(k) if *k > 0 => *k -= 1,
                _ => added.push(r.as_str()),
            }
        }
        let new_chains: Vec<&str> = table
            .chains
            .iter()
            .map(|(c, _)| c.as_str())
            .filter(|c| !BUILTIN_CHAINS.contains(c) && !old.chains.iter().any(|(o, _)| o == c))
            .filter(|c| owned(c))
            .collect();
        for r in added.iter().rev() {
            let chain = r.split_whitespace().nth(1).unwrap_or_default();
            if owned(r) || new_chains.contains(&chain) {
                lines.push(format!("-D {}", &r[3..]));
                n_rules += 1;
            }
        }
        for c in &new_chains {
            lines.push(format!("-F {c}"));
        }
        for c in &new_chains {
            lines.push(format!("-X {c}"));
            n_chains += 1;
        }
        if !lines.is_empty() {
            plan.script.push_str(&format!("*{name}\n"));
            for l in lines {
                plan.script.push_str(&l);
                plan.script.push('\n');
            }
            plan.script.push_str("COMMIT\n");
        }
    }
    plan.summary =
        format!("deleted {n_rules} rules and {n_chains} chains, restored {n_policies} policies");
    plan
}

/// Whether `table` in `save_output` holds only built-in chains with policy ACCEPT
/// and no rule (or is absent).
pub(crate) fn table_is_default(save_output: &str, table: &str) -> bool {
    match parse_save(save_output).get(table) {
        None => true,
        Some(t) => {
            t.rules.is_empty()
                && t.chains
                    .iter()
                    .all(|(c, p)| BUILTIN_CHAINS.contains(&c.as_str()) && p == "ACCEPT")
        }
    }
}

/// The first usable host address of an IPv4 `a.b.c.d/n` subnet (its gateway by
/// convention).
pub(crate) fn first_host(subnet: &str) -> Option<String> {
    let (addr, len) = subnet.split_once('/')?;
    let addr: std::net::Ipv4Addr = addr.parse().ok()?;
    let len: u32 = len.parse().ok()?;
    if len >= 31 {
        return None;
    }
    let mask = u32::MAX.checked_shl(32 - len).unwrap_or(0);
    Some(std::net::Ipv4Addr::from((u32::from(addr) & mask) + 1).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fakes::{lock, Fake};

    const ENGINE: &str = "docker";

    const BEFORE: &str = "# Generated by iptables-save v1.8.9 (nf_tables) on Sun\n\
        *nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n\
        -A POSTROUTING -s 10.9.0.0/24 -j MASQUERADE\nCOMMIT\n";

    const AFTER: &str = "# Generated by iptables-save v1.8.9 (nf_tables) on Sun\n\
        *filter\n:INPUT ACCEPT [0:0]\n:FORWARD DROP [3:180]\n:OUTPUT ACCEPT [0:0]\n:DOCKER - [0:0]\n\
        :DOCKER-USER - [0:0]\n:OTHER - [0:0]\n\
        -A FORWARD -j DOCKER-USER\n-A FORWARD -o docker0 -j DOCKER\n-A FORWARD -i eth9 -j OTHER\n\
        -A DOCKER-USER -j RETURN\nCOMMIT\n\
        *nat\n:PREROUTING ACCEPT [5:300]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n\
        :DOCKER - [0:0]\n-A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER\n\
        -A POSTROUTING -s 10.9.0.0/24 -j MASQUERADE\n\
        -A POSTROUTING -s 172.17.0.0/16 ! -o docker0 -j MASQUERADE\n\
        -A POSTROUTING -m comment --comment \"someone else\" -j ACCEPT\n\
        -A DOCKER -i docker0 -j RETURN\nCOMMIT\n";

    #[test]
    fn undo_deletes_only_what_docker_added() {
        let plan = undo_plan(BEFORE, AFTER, &["DOCKER", "docker0", "172.17."]);
        assert_eq!(plan.new_tables, vec!["filter".to_string()]);
        assert_eq!(
            plan.script,
            "*filter\n-P FORWARD ACCEPT\n-D DOCKER-USER -j RETURN\n-D FORWARD -o docker0 -j DOCKER\n\
             -D FORWARD -j DOCKER-USER\n-F DOCKER\n-F DOCKER-USER\n-X DOCKER\n-X DOCKER-USER\nCOMMIT\n\
             *nat\n-D DOCKER -i docker0 -j RETURN\n\
             -D POSTROUTING -s 172.17.0.0/16 ! -o docker0 -j MASQUERADE\n\
             -D PREROUTING -m addrtype --dst-type LOCAL -j DOCKER\n-F DOCKER\n-X DOCKER\nCOMMIT\n"
        );
        assert_eq!(
            plan.summary,
            "deleted 6 rules and 3 chains, restored 1 policies"
        );
        // Nothing changed: nothing to do.
        assert!(undo_plan(AFTER, AFTER, &["DOCKER"]).script.is_empty());
        assert_eq!(
            normalized_rules(BEFORE),
            "*nat\n:PREROUTING ACCEPT\n:INPUT ACCEPT\n:OUTPUT ACCEPT\n:POSTROUTING ACCEPT\n\
             -A POSTROUTING -s 10.9.0.0/24 -j MASQUERADE\nCOMMIT\n"
        );
        assert!(is_nf_tables(BEFORE));
        assert!(table_is_default(
            "*filter\n:INPUT ACCEPT [1:2]\n:FORWARD ACCEPT [0:0]\nCOMMIT\n",
            "filter"
        ));
        assert!(!table_is_default(AFTER, "filter"));
    }

    #[test]
    fn restore_runs_the_script_deletes_new_tables_and_the_bridge() {
        let dir = tempfile::tempdir().unwrap();
        let proc = dir.path().join("proc");
        let sys = dir.path().join("sys");
        std::fs::create_dir_all(proc.join("sys/net/ipv4")).unwrap();
        std::fs::write(proc.join("sys/net/ipv4/ip_forward"), "0\n").unwrap();
        std::fs::create_dir_all(sys.join("class/net")).unwrap();
        let fake = Fake::default();
        fake.reply("/usr/bin/iptables-save", 0, BEFORE, "");
        let snap = HostNetSnapshot::take(&fake, &proc, &sys, "docker0", &["DOCKER", "docker0"]);
        assert_eq!(snap.ip_forward, "0");
        assert!(!snap.bridge_existed);
        // The daemon ran: rules added, forwarding on, a bridge.
        std::fs::write(proc.join("sys/net/ipv4/ip_forward"), "1\n").unwrap();
        std::fs::create_dir_all(sys.join("class/net/docker0")).unwrap();
        lock(&fake.replies).clear();
        // After the restore the filter table is default again.
        fake.reply("/usr/bin/iptables-save", 0, AFTER, "");
        let done = snap
            .restore(ENGINE, &fake, &proc, &sys, dir.path())
            .unwrap();
        let calls = fake.calls();
        assert!(calls
            .iter()
            .any(|c| c.starts_with("/usr/bin/iptables-restore --noflush ")));
        assert!(calls.iter().any(|c| c == "/usr/bin/ip link delete docker0"));
        assert_eq!(
            std::fs::read_to_string(proc.join("sys/net/ipv4/ip_forward")).unwrap(),
            "0\n"
        );
        assert!(
            done.iter().any(|d| d.contains("ip_forward set back to 0")),
            "{done:?}"
        );
        // The filter table still has OTHER (not Docker's): it is not deleted.
        assert!(!calls.iter().any(|c| c.contains("nft delete table")));
    }

    #[test]
    fn a_host_without_any_rule_gets_every_rule_of_docker_undone() {
        // A fresh nf_tables host: iptables-save prints nothing at all. That is a
        // snapshot of "no rules", not "no iptables".
        let dir = tempfile::tempdir().unwrap();
        let (proc, sys) = (dir.path().join("proc"), dir.path().join("sys"));
        std::fs::create_dir_all(proc.join("sys/net/ipv4")).unwrap();
        std::fs::write(proc.join("sys/net/ipv4/ip_forward"), "0\n").unwrap();
        std::fs::create_dir_all(sys.join("class/net")).unwrap();
        let fake = Fake::default();
        fake.reply("/usr/bin/iptables-save", 0, "", "");
        let snap = HostNetSnapshot::take(&fake, &proc, &sys, "docker0", &["DOCKER", "docker0"]);
        assert_eq!(snap.iptables.as_deref(), Some(""));
        lock(&fake.replies).clear();
        fake.reply("/usr/bin/iptables-save", 0, AFTER, "");
        let done = snap
            .restore(ENGINE, &fake, &proc, &sys, dir.path())
            .unwrap();
        assert!(
            fake.calls()
                .iter()
                .any(|c| c.starts_with("/usr/bin/iptables-restore --noflush ")),
            "{done:?}"
        );
        assert!(done.iter().any(|d| d.starts_with("iptables-save: deleted")));

        // No iptables-save at all: nothing is recorded and nothing is touched.
        let missing = Fake {
            missing: vec!["iptables-save".into(), "ip6tables-save".into()],
            ..Fake::default()
        };
        let snap = HostNetSnapshot::take(&missing, &proc, &sys, "docker0", &["DOCKER"]);
        assert_eq!(snap.iptables, None);
        snap.restore(ENGINE, &missing, &proc, &sys, dir.path())
            .unwrap();
        assert!(!missing
            .calls()
            .iter()
            .any(|c| c.contains("iptables-restore")));
    }
}
