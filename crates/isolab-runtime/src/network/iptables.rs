//! The few iptables rules isolab owns itself.
//!
//! Egress NAT is one `MASQUERADE` rule per bridge (like Docker's), not the
//! bridge plugin's per-container `ipMasq` chain: plugins 1.1.1 only tear that
//! chain down when the container's namespace still exists (`cmdDel` learns the
//! address from the interface), so a container whose runtime was killed would
//! leak it forever. One rule per bridge leaks nothing per container and costs
//! one `iptables -C` per attach.
//!
//! We never parse iptables' listing output, with one exception in
//! [`NetHost::chain_rule_count`], which counts the `-A` lines of `iptables -S CHAIN`
//! (the machine-oriented rule-spec format) to see whether portmap's shared
//! chains are still in use before [`super::remove_bridge`] deletes them.

use super::config::Ipv4Subnet;
use super::NetHost;
use super::NetworkError;

/// Rule-spec of the masquerade rule for a bridge (table `nat`, chain `POSTROUTING`).
pub fn masquerade_rule(bridge: &str, subnet: Ipv4Subnet) -> Vec<String> {
    [
        "-s",
        &subnet.to_string(),
        "!",
        "-o",
        bridge,
        "-m",
        "comment",
        "--comment",
        &format!("isolab masquerade {bridge}"),
        "-j",
        "MASQUERADE",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect()
}

fn with_op(op: &str, table: &str, chain: &str, rule: &[String]) -> Vec<String> {
    let mut args = vec![
        "-t".to_owned(),
        table.to_owned(),
        op.to_owned(),
        chain.to_owned(),
    ];
    args.extend(rule.iter().cloned());
    args
}

/// Runs iptables; `Ok(false)` when it exits with 1, which is how it says
/// that the rule or chain it was asked to check, delete or flush is absent.
fn run(host: &dyn NetHost, args: &[String]) -> Result<bool, NetworkError> {
    match host.iptables(args) {
        Ok(()) => Ok(true),
        Err(NetworkError::Iptables { code: Some(1), .. }) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Adds the masquerade rule unless it is there.
pub fn ensure_masquerade(
    host: &dyn NetHost,
    bridge: &str,
    subnet: Ipv4Subnet,
) -> Result<(), NetworkError> {
    let rule = masquerade_rule(bridge, subnet);
    if !run(host, &with_op("-C", "nat", "POSTROUTING", &rule))? {
        host.iptables(&with_op("-A", "nat", "POSTROUTING", &rule))?;
    }
    Ok(())
}

/// Removes every copy of the masquerade rule; true if one was there.
pub fn remove_masquerade(
    host: &dyn NetHost,
    bridge: &str,
    subnet: Ipv4Subnet,
) -> Result<bool, NetworkError> {
    let rule = masquerade_rule(bridge, subnet);
    let mut removed = false;
    // Bounded: each successful -D removes one copy.
    for _ in 0..16 {
        if !run(host, &with_op("-D", "nat", "POSTROUTING", &rule))? {
            break;
        }
        removed = true;
    }
    Ok(removed)
}

/// portmap's shared chains in table `nat` and the jumps into them, as
/// (chain the jump lives in, rule-spec) pairs. These are what
/// `containernetworking-plugins` 1.1.1 creates on the first port mapping.
fn portmap_jumps() -> Vec<(&'static str, Vec<&'static str>)> {
    vec![
        (
            "PREROUTING",
            vec![
                "-m",
                "addrtype",
                "--dst-type",
                "LOCAL",
                "-j",
                "CNI-HOSTPORT-DNAT",
            ],
        ),
        (
            "OUTPUT",
            vec![
                "-m",
                "addrtype",
                "--dst-type",
                "LOCAL",
                "-j",
                "CNI-HOSTPORT-DNAT",
            ],
        ),
        (
            "POSTROUTING",
            vec![
                "-m",
                "comment",
                "--comment",
                "CNI portfwd requiring masquerade",
                "-j",
                "CNI-HOSTPORT-MASQ",
            ],
        ),
    ]
}

const PORTMAP_CHAINS: [&str; 3] = [
    "CNI-HOSTPORT-DNAT",
    "CNI-HOSTPORT-MASQ",
    "CNI-HOSTPORT-SETMARK",
];

/// Removes portmap's shared chains when no container anywhere (ours or
/// another CNI user's) has a port mapped, i.e. `CNI-HOSTPORT-DNAT` is empty.
/// Returns what it removed.
pub fn remove_idle_portmap_chains(host: &dyn NetHost) -> Result<Vec<String>, NetworkError> {
    match host.chain_rule_count("nat", "CNI-HOSTPORT-DNAT")? {
        None | Some(1..) => return Ok(Vec::new()),
        Some(0) => {}
    }
    let mut removed = Vec::new();
    for (chain, spec) in portmap_jumps() {
        let spec: Vec<String> = spec.into_iter().map(str::to_owned).collect();
        for _ in 0..16 {
            if !run(host, &with_op("-D", "nat", chain, &spec))? {
                break;
            }
        }
    }
    for chain in PORTMAP_CHAINS {
        let base = ["-t", "nat"].map(str::to_owned);
        if run(
            host,
            &[&base[..], &["-F".to_owned(), chain.to_owned()]].concat(),
        )? && run(
            host,
            &[&base[..], &["-X".to_owned(), chain.to_owned()]].concat(),
        )? {
            removed.push(format!("iptables chain nat/{chain}"));
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masquerade_rule_is_scoped_to_subnet_and_bridge() {
        let rule =
            masquerade_rule("isolab0", Ipv4Subnet::parse("10.213.0.0/24").unwrap()).join(" ");
        assert_eq!(
            rule,
            "-s 10.213.0.0/24 ! -o isolab0 -m comment --comment isolab masquerade isolab0 -j MASQUERADE"
        );
    }
}
