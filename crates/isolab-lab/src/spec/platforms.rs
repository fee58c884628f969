//! `[platform.NAME]` tables over the built-in platforms, the matrix's `platform` levels,
//! and the cells a platform makes impossible: a service stack or a server workload where
//! the platform's network cannot reach it.

use std::collections::BTreeMap;

use isolab_workloads::WorkloadDef;
use toml::Spanned;

use super::matrix::{Level, Levels};
use super::raw::RawPlatform;
use super::validator::{list, Validator};
use crate::platform::{Accel, GuestShape, Network, PlatformDef, PlatformKind, StackGuests};
use crate::shape::Shape;

impl Validator<'_> {
    /// The built-in platforms, then the spec's own.
    pub(super) fn platforms(
        &mut self,
        raw: BTreeMap<String, Spanned<RawPlatform>>,
        shapes: &BTreeMap<String, Shape>,
    ) -> BTreeMap<String, PlatformDef> {
        let builtins = PlatformDef::builtins();
        self.named(
            builtins,
            |p| p.name.clone(),
            raw,
            |v, name, raw| v.platform(name, raw, shapes),
        )
        .0
    }

    fn platform(
        &mut self,
        name: String,
        raw: Spanned<RawPlatform>,
        shapes: &BTreeMap<String, Shape>,
    ) -> Option<PlatformDef> {
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
        if let Some(g) = &raw.stack_guests {
            def.stack_guests = Some(self.stack_guests(&name, kind, g)?);
        }
        if let Some(g) = &raw.guest_shape {
            def.guest_shape = Some(self.guest_shape(&name, &def, g, shapes)?);
        }
        if let Some(c) = &raw.disk_cache {
            def.disk_cache = Some(self.disk_cache(&name, kind, c)?);
        }
        Some(def)
    }

    /// `disk_cache` of platform `name`, a VM engine's. `None` when it is wrong (and
    /// reported).
    fn disk_cache(
        &mut self,
        name: &str,
        kind: PlatformKind,
        c: &Spanned<String>,
    ) -> Option<isolab_vm::DiskCache> {
        let cache = match c.get_ref().parse::<isolab_vm::DiskCache>() {
            Ok(cache) => cache,
            Err(e) => {
                self.err(c.span(), format!("platform.{name}: {e}"));
                return None;
            }
        };
        if !kind.is_vm() {
            self.err(
                c.span(),
                format!("platform.{name}: `disk_cache` applies to the vm engines only, not `{kind}` (a container's disk is the host's)"),
            );
            return None;
        }
        Some(cache)
    }

    /// `stack_guests` of platform `name`: `shared` for a container engine in a VM,
    /// `per-component` for any VM. `None` when it is wrong (and reported).
    fn stack_guests(
        &mut self,
        name: &str,
        kind: PlatformKind,
        g: &Spanned<String>,
    ) -> Option<StackGuests> {
        let Some(guests) = StackGuests::parse(g.get_ref()) else {
            self.err(
                g.span(),
                format!(
                    "unknown stack_guests `{}`: expected `shared` (the stack's components as containers in one guest) or `per-component` (a guest each)",
                    g.get_ref()
                ),
            );
            return None;
        };
        let why = if !kind.is_vm() {
            Some(format!(
                "`stack_guests` applies to the vm engines only, not `{kind}`"
            ))
        } else if guests == StackGuests::Shared && kind == PlatformKind::VM {
            Some("a plain `vm` runs no containers, so its components cannot share a guest as containers: use `vm+isolab` or `vm+docker`, or `per-component`".to_owned())
        } else {
            None
        };
        if let Some(why) = why {
            self.err(g.span(), format!("platform.{name}: {why}"));
            return None;
        }
        Some(guests)
    }

    /// `guest_shape` of platform `name`: a shape that sizes the shared guest.
    fn guest_shape(
        &mut self,
        name: &str,
        def: &PlatformDef,
        g: &Spanned<String>,
        shapes: &BTreeMap<String, Shape>,
    ) -> Option<GuestShape> {
        if def.stack_guests != Some(StackGuests::Shared) {
            self.err(
                g.span(),
                format!("platform.{name}: `guest_shape` sizes the guest a stack's components share: it needs a `vm+isolab` or `vm+docker` engine with `stack_guests = \"shared\"` (the default)"),
            );
            return None;
        }
        let Some(shape) = shapes.get(g.get_ref()) else {
            let known: Vec<&str> = shapes.keys().map(String::as_str).collect();
            self.err(
                g.span(),
                format!(
                    "platform.{name}: unknown guest_shape `{}`: expected one of {}",
                    g.get_ref(),
                    known.join(", ")
                ),
            );
            return None;
        };
        Some(GuestShape {
            shape: shape.name.clone(),
            vcpus: shape.millicpus.div_ceil(1000).max(1),
            memory: shape.memory,
        })
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

#[cfg(test)]
mod tests {
    use super::super::tests::{errors, host, parse};
    use crate::platform::{Network, PlatformKind};
    use crate::spec::{ExperimentSpec, Source};
    use std::path::PathBuf;

    #[test]
    fn platform_tables_define_levels_with_engine_and_network() {
        let spec = parse("[experiment]\nname = \"x\"\nimage = \"images/bench\"\n[platform.iso-host-net]\nengine = \"isolab\"\nnetwork = \"host\"\n[matrix]\nplatform = [\"host\", \"isolab-bridge\", \"iso-host-net\"]\nworkload = [\"iperf3-tcp\"]\n").unwrap();
        let platforms: Vec<_> = spec.cells.iter().map(|c| c.platform.clone()).collect();
        assert_eq!(platforms[0].network, Network::Host);
        assert_eq!(platforms[1].kind, PlatformKind::ISOLAB);
        assert_eq!(platforms[1].network, Network::Bridge);
        assert_eq!(platforms[2].name, "iso-host-net");
        assert_eq!(platforms[2].network, Network::Host);
        // Relative to the spec's directory (here the current one).
        assert_eq!(spec.image, PathBuf::from("images/bench"));
        let nested = ExperimentSpec::parse(
            Source::new("specs/exp.toml", "[experiment]\nname = \"x\"\nimage = \"img\"\n[matrix]\nworkload = [\"sysbench-cpu\"]\n"),
            &host("0-1"),
        )
        .unwrap();
        assert_eq!(nested.image, PathBuf::from("specs/img"));
    }

    #[test]
    fn bad_platform_tables_point_at_the_value() {
        let errs = errors("[experiment]\nname = \"x\"\n[platform.a]\nengine = \"dockr\"\n[platform.b]\nengine = \"host\"\nnetwork = \"bridge\"\n[platform.c]\nengine = \"isolab\"\nnetwork = \"wifi\"\n[matrix]\nworkload = [\"sysbench-cpu\"]\n");
        assert_eq!(errs.len(), 3, "{errs:?}");
        assert!(
            errs[0].starts_with("exp.toml:4:10: platform.a.engine: unknown engine `dockr`"),
            "{errs:?}"
        );
        assert!(
            errs[1].starts_with(
                "exp.toml:7:11: platform.b: engine `host` offers network host only, not `bridge`"
            ),
            "{errs:?}"
        );
        assert!(
            errs[2].starts_with("exp.toml:10:11: unknown network `wifi`"),
            "{errs:?}"
        );
    }

    #[test]
    fn a_server_workload_cannot_run_without_a_network() {
        let text = "[experiment]\nname = \"x\"\n[matrix]\nplatform = [\"host\", \"isolab\"]\nworkload = [\"iperf3-tcp\", \"sysbench-cpu\"]\n";
        let errs = errors(text);
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(
            errs[0].starts_with("exp.toml:4:21: workload `iperf3-tcp` needs a server: platform `isolab` has network `none`"),
            "{errs:?}"
        );
        let skipped =
            parse(&text.replace("name = \"x\"", "name = \"x\"\nimpossible = \"skip\"")).unwrap();
        assert_eq!(skipped.cells.len(), 3);
        assert_eq!(
            skipped.dropped[0].key,
            "platform=isolab workload=iperf3-tcp"
        );
    }

    #[test]
    fn a_stacks_components_share_one_guest_in_vm_engines_unless_the_level_says_otherwise() {
        use crate::platform::StackGuests;
        let spec = parse("[experiment]\nname = \"x\"\n[shape.host]\ncpus = 2\nmemory = \"3GiB\"\n[platform.each]\nengine = \"vm+docker\"\naccel = \"tcg\"\nstack_guests = \"per-component\"\n[platform.big]\nengine = \"vm+isolab\"\naccel = \"tcg\"\nguest_shape = \"host\"\n[matrix]\nplatform = [\"vm(tcg)+docker\", \"vm(tcg)\", \"each\", \"big\", \"host\"]\nworkload = [\"sysbench-cpu\"]\n").unwrap();
        let p: Vec<_> = spec.cells.iter().map(|c| c.platform.clone()).collect();
        assert_eq!(p[0].stack_guests, Some(StackGuests::Shared));
        assert_eq!(p[1].stack_guests, Some(StackGuests::PerComponent));
        assert_eq!(p[2].stack_guests, Some(StackGuests::PerComponent));
        assert_eq!(p[3].stack_guests, Some(StackGuests::Shared));
        let shape = p[3].guest_shape.as_ref().unwrap();
        assert_eq!((shape.shape.as_str(), shape.vcpus), ("host", 2));
        assert_eq!(shape.memory, Some(isolab_cgroups::Bytes::gib(3)));
        assert_eq!(p[4].stack_guests, None);
        assert_eq!(p[2].disk_cache, None);
        let errs = errors("[experiment]\nname = \"x\"\n[platform.a]\nengine = \"vm\"\naccel = \"tcg\"\nstack_guests = \"shared\"\n[platform.b]\nengine = \"docker\"\nstack_guests = \"per-component\"\n[platform.c]\nengine = \"vm+docker\"\naccel = \"tcg\"\nstack_guests = \"one\"\n[platform.d]\nengine = \"vm+docker\"\naccel = \"tcg\"\nstack_guests = \"per-component\"\nguest_shape = \"large\"\n[platform.e]\nengine = \"vm+docker\"\naccel = \"tcg\"\nguest_shape = \"huge\"\n[matrix]\nworkload = [\"sysbench-cpu\"]\n");
        assert_eq!(errs.len(), 5, "{errs:#?}");
        assert!(
            errs[0].starts_with("exp.toml:6:16: platform.a: a plain `vm` runs no containers"),
            "{errs:?}"
        );
        assert!(
            errs[1].starts_with(
                "exp.toml:9:16: platform.b: `stack_guests` applies to the vm engines only"
            ),
            "{errs:?}"
        );
        assert!(
            errs[2].starts_with("exp.toml:13:16: unknown stack_guests `one`"),
            "{errs:?}"
        );
        assert!(
            errs[3]
                .contains("platform.d: `guest_shape` sizes the guest a stack's components share"),
            "{errs:?}"
        );
        assert!(
            errs[4].contains("platform.e: unknown guest_shape `huge`: expected one of"),
            "{errs:?}"
        );
    }

    #[test]
    fn a_vm_level_may_take_its_disks_without_the_hosts_page_cache() {
        let spec = parse("[experiment]\nname = \"x\"\n[platform.direct]\nengine = \"vm\"\naccel = \"tcg\"\ndisk_cache = \"none\"\n[matrix]\nplatform = [\"direct\", \"vm(tcg)\"]\nworkload = [\"sysbench-cpu\"]\n").unwrap();
        let caches: Vec<_> = spec.cells.iter().map(|c| c.platform.disk_cache).collect();
        assert_eq!(caches, [Some(isolab_vm::DiskCache::None), None]);
        let errs = errors("[experiment]\nname = \"x\"\n[platform.a]\nengine = \"vm\"\naccel = \"tcg\"\ndisk_cache = \"unsafe\"\n[platform.b]\nengine = \"docker\"\ndisk_cache = \"none\"\n[matrix]\nworkload = [\"sysbench-cpu\"]\n");
        assert_eq!(errs.len(), 2, "{errs:#?}");
        assert!(
            errs[0].starts_with("exp.toml:6:14: platform.a: unknown disk_cache `unsafe`"),
            "{errs:?}"
        );
        assert!(
            errs[1].starts_with(
                "exp.toml:9:14: platform.b: `disk_cache` applies to the vm engines only"
            ),
            "{errs:?}"
        );
    }

    #[test]
    fn the_guest_factor_names_a_vm_cells_os_and_builds_its_image_from_the_recipe() {
        let spec = parse("[experiment]\nname = \"x\"\nimpossible = \"skip\"\n[matrix]\nplatform = [\"vm(tcg)\", \"host\"]\nworkload = [\"sysbench-cpu\"]\nguest = [\"bookworm\", \"bookworm-backports\", \"trixie\"]\n").unwrap();
        assert_eq!(spec.cells.len(), 3, "{:#?}", spec.dropped);
        assert_eq!(spec.dropped.len(), 3);
        assert!(spec.dropped[0]
            .reason
            .contains("guest `bookworm` is the guest OS of VM platforms: `host` runs no guest"));
        let images: Vec<_> = spec
            .cells
            .iter()
            .map(|c| c.platform.guest.as_ref().unwrap().image.clone())
            .collect();
        // bookworm and bookworm-backports share Debian 12's image; trixie has its own.
        assert_eq!(images[0], images[1]);
        assert_ne!(images[0], images[2]);
        let suites: Vec<&str> = spec.guest_recipes.iter().map(|r| r.suite()).collect();
        assert_eq!(suites, ["bookworm", "trixie"]);
        assert_eq!(spec.image_of(&spec.cells[2].platform), images[2]);
        assert_eq!(
            spec.guest_recipes[1].packages(),
            spec.recipe.as_ref().unwrap().packages()
        );
        let errs = errors("[experiment]\nname = \"x\"\n[matrix]\nplatform = [\"vm(tcg)\"]\nworkload = [\"sysbench-cpu\"]\nguest = [\"sid\"]\n");
        assert!(
            errs[0].contains(
                "unknown guest `sid`: expected one of bookworm, bookworm-backports, trixie"
            ),
            "{errs:?}"
        );
        let errs = errors("[experiment]\nname = \"x\"\nimage = \"/var/lib/isolab/images/bench\"\n[matrix]\nplatform = [\"vm(tcg)\"]\nworkload = [\"sysbench-cpu\"]\nguest = [\"trixie\"]\n");
        assert!(
            errs[0].contains("builds each guest's root image from the experiment's recipe"),
            "{errs:?}"
        );
    }

    #[test]
    fn every_vm_platform_needs_its_accelerator_in_the_name() {
        for (level, kvm, tcg) in [
            ("vm", "vm(kvm)", "vm(tcg)"),
            ("vm+isolab", "vm(kvm)+isolab", "vm(tcg)+isolab"),
            ("vm+docker", "vm(kvm)+docker", "vm(tcg)+docker"),
        ] {
            let errs = errors(&format!("[experiment]\nname = \"x\"\n[matrix]\nplatform = [\"{level}\"]\nworkload = [\"sysbench-cpu\"]\n"));
            assert!(
                errs[0].contains(&format!(
                    "platform `{level}` needs its accelerator in the name: `{kvm}` (KVM) or `{tcg}`"
                )),
                "{errs:?}"
            );
            let spec = parse(&format!("[experiment]\nname = \"x\"\n[matrix]\nplatform = [\"{tcg}\"]\nworkload = [\"sysbench-cpu\"]\n")).unwrap();
            assert_eq!(spec.cells[0].platform.kind.as_str(), level);
        }
    }

    #[test]
    fn the_checker_explains_cells_from_the_platforms_capabilities() {
        // isolab offers a bridge: the error names the built-in level that has one.
        let errs = errors("[experiment]\nname = \"x\"\n[matrix]\nplatform = [\"isolab\"]\nworkload = [\"iperf3-tcp\"]\n");
        assert!(
            errs[0].contains("use `isolab-bridge` or a [platform.NAME] with engine = \"isolab\" and network = \"bridge\" or \"host\""),
            "{errs:?}"
        );
        // A VM is on isolab's bridge: its command reaches the server at the gateway.
        parse("[experiment]\nname = \"x\"\n[matrix]\nplatform = [\"vm(tcg)\"]\nworkload = [\"iperf3-tcp\"]\n").unwrap();
        // A plain VM does not apply a pids limit: a warning, the runs carry a note.
        let spec = parse("[experiment]\nname = \"x\"\nbaseline = { platform = \"vm(tcg)\" }\n[shape.small]\ncpus = 1\npids = 64\n[matrix]\nplatform = [\"vm(tcg)\", \"vm(tcg)+isolab\"]\nshape = [\"small\"]\nworkload = [\"sysbench-cpu\"]\n").unwrap();
        assert_eq!(spec.warnings.len(), 1, "{:?}", spec.warnings);
        assert!(
            spec.warnings[0].contains("platform `vm(tcg)` does not apply pids limits (it applies cpu-quota, cpuset, memory, io)"),
            "{:?}",
            spec.warnings
        );
    }

    #[test]
    fn unknown_platforms_list_the_levels_and_networks_must_be_offered() {
        let errs = errors("[experiment]\nname = \"x\"\n[matrix]\nplatform = [\"host\", \"xen\"]\nworkload = [\"sysbench-cpu\"]\n");
        assert!(
            errs[0].starts_with("exp.toml:4:21: unknown platform `xen`: expected one of"),
            "{errs:?}"
        );
        assert!(errs[0].contains("docker-bridge"), "{errs:?}");
        let errs = errors("[experiment]\nname = \"x\"\n[platform.r]\nengine = \"runc\"\nnetwork = \"bridge\"\n[matrix]\nplatform = [\"r\"]\nworkload = [\"sysbench-cpu\"]\n");
        assert!(
            errs[0].contains("engine `runc` offers network none, host only, not `bridge`"),
            "{errs:?}"
        );
    }

    #[test]
    fn vm_levels_name_their_accelerator() {
        let spec = parse("[experiment]\nname = \"x\"\n[platform.guest]\nengine = \"vm\"\naccel = \"tcg\"\n[matrix]\nplatform = [\"host\", \"vm(tcg)\", \"vm(kvm)+isolab\", \"guest\"]\nworkload = [\"sysbench-cpu\"]\n").unwrap();
        let platforms: Vec<_> = spec.cells.iter().map(|c| c.platform.clone()).collect();
        assert_eq!(platforms[1].kind, PlatformKind::VM);
        assert_eq!(platforms[1].accel, Some(crate::platform::Accel::Tcg));
        assert_eq!(platforms[2].kind, PlatformKind::VM_ISOLAB);
        assert_eq!(platforms[2].accel, Some(crate::platform::Accel::Kvm));
        assert_eq!(platforms[3].accel, Some(crate::platform::Accel::Tcg));
        let errs = errors("[experiment]\nname = \"x\"\n[matrix]\nplatform = [\"vm\"]\nworkload = [\"sysbench-cpu\"]\n");
        assert!(
            errs[0].contains("`vm(kvm)` (KVM) or `vm(tcg)` (QEMU's software emulation)"),
            "{errs:?}"
        );
        let errs = errors("[experiment]\nname = \"x\"\n[platform.g]\nengine = \"vm\"\n[platform.d]\nengine = \"docker\"\naccel = \"kvm\"\n[matrix]\nworkload = [\"sysbench-cpu\"]\n");
        assert!(
            errs[0].contains("needs `accel = \"kvm\"` or `accel = \"tcg\"`"),
            "{errs:?}"
        );
        assert!(
            errs[1].contains("applies to the vm engines only"),
            "{errs:?}"
        );
    }
}
