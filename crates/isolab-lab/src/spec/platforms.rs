//! `[platform.NAME]` tables over the built-in platforms, the matrix's `platform` levels,
//! and the cells a platform makes impossible: a service stack or a server workload where
//! the platform's network cannot reach it.

use std::collections::BTreeMap;

use isolab_workloads::WorkloadDef;
use toml::Spanned;

use super::check::{list, Validator};
use super::matrix::{Level, Levels};
use super::raw::RawPlatform;
use crate::platform::{Accel, Network, PlatformDef, PlatformKind};

impl Validator<'_> {
    /// The built-in platforms, then the spec's own.
    pub(super) fn platforms(
        &mut self,
        raw: BTreeMap<String, Spanned<RawPlatform>>,
    ) -> BTreeMap<String, PlatformDef> {
        let mut defs: BTreeMap<String, PlatformDef> = PlatformDef::builtins()
            .into_iter()
            .map(|p| (p.name.clone(), p))
            .collect();
        for (name, p) in raw {
            if let Some(p) = self.platform(name, p) {
                defs.insert(p.name.clone(), p);
            }
        }
        defs
    }

    fn platform(&mut self, name: String, raw: Spanned<RawPlatform>) -> Option<PlatformDef> {
        let raw = raw.into_inner();
        let kind = match PlatformKind::parse(raw.engine.get_ref()) {
            Ok(k) => k,
            Err(e) => {
                self.err(raw.engine.span(), format!("platform.{name}.engine: {e}"));
                return None;
            }
        };
        let mut def = PlatformDef::new(kind);
        def.name = name.clone();
        def.accel = self.platform_accel(&name, kind, &raw.engine, raw.accel.as_ref())?;
        if let Some(n) = raw.network {
            def.network = self.platform_network(&name, kind, &n)?;
        }
        Some(def)
    }

    /// `accel` of platform `name`: required by the vm engines, refused by the others.
    /// `None` when it is wrong (and reported).
    fn platform_accel(
        &mut self,
        name: &str,
        kind: PlatformKind,
        engine: &Spanned<String>,
        accel: Option<&Spanned<String>>,
    ) -> Option<Option<Accel>> {
        match (accel, kind.is_vm()) {
            (None, true) => {
                self.err(
                    engine.span(),
                    format!("platform.{name}: a `{kind}` platform needs `accel = \"kvm\"` or `accel = \"tcg\"`, so that its rows say whether they measure virtualisation or emulation (`isolab env` says which works here)"),
                );
                None
            }
            (Some(a), true) => match Accel::parse(a.get_ref()) {
                Some(accel) => Some(Some(accel)),
                None => {
                    self.err(
                        a.span(),
                        format!("unknown accel `{}`: expected `kvm` or `tcg`", a.get_ref()),
                    );
                    None
                }
            },
            (Some(a), false) => {
                self.err(
                    a.span(),
                    format!(
                        "platform.{name}: `accel` applies to the vm engines only, not `{kind}`"
                    ),
                );
                None
            }
            (None, false) => Some(None),
        }
    }

    /// `network` of platform `name`: one its engine offers. `None` when it is not (and reported).
    fn platform_network(
        &mut self,
        name: &str,
        kind: PlatformKind,
        n: &Spanned<String>,
    ) -> Option<Network> {
        match Network::parse(n.get_ref()) {
            Some(net) if !kind.networks().contains(&net) => {
                let offered: Vec<&str> = kind.networks().iter().map(|n| n.as_str()).collect();
                self.err(
                    n.span(),
                    format!(
                        "platform.{name}: engine `{kind}` offers network {} only, not `{}`",
                        offered.join(", "),
                        net.as_str()
                    ),
                );
                None
            }
            Some(net) => Some(net),
            None => {
                self.err(
                    n.span(),
                    format!(
                        "unknown network `{}`: expected `none`, `bridge` or `host`",
                        n.get_ref()
                    ),
                );
                None
            }
        }
    }

    /// `matrix.platform`: each a built-in platform or a `[platform.NAME]` table; `host`
    /// unless given. A vm level must name its accelerator.
    pub(super) fn platform_levels(
        &mut self,
        raw: Levels,
        defs: &BTreeMap<String, PlatformDef>,
    ) -> Vec<Level> {
        let platform_names: Vec<String> = defs.keys().cloned().collect();
        self.levels("platform", raw, &["host"], |l| {
            if defs.contains_key(l) {
                return Ok(());
            }
            if PlatformKind::parse(l).is_ok_and(PlatformKind::is_vm) {
                return Err(format!(
                    "platform `{l}` needs its accelerator in the name: `{}` (KVM) or `{}` (QEMU's software emulation); `isolab env` says which works on this host",
                    l.replacen("vm", "vm(kvm)", 1),
                    l.replacen("vm", "vm(tcg)", 1)
                ));
            }
            Err(format!(
                "unknown platform `{l}`: expected one of {} or a [platform.{l}] table",
                list(&platform_names)
            ))
        })
    }
}

/// Why `platform` cannot run workload `w`, if it cannot: a service stack or a server the
/// platform's network does not reach.
pub(super) fn unreachable(platform: &PlatformDef, w: &str, wl: &WorkloadDef) -> Option<String> {
    match &wl.stack {
        Some(_) => platform
            .services_unavailable()
            .map(|r| format!("workload `{w}` is a service stack: {r}")),
        None => wl
            .server
            .as_ref()
            .and_then(|_| platform.server_unreachable())
            .map(|r| format!("workload `{w}` needs a server: {r}")),
    }
}
