//! The guests of the VM platforms: a service stack's components' arrangement
//! ([`StackGuests`]), the shared guest's shape ([`GuestShape`]), a component job's place
//! in its stack run ([`StackPlace`]), and the guest OS of a cell ([`GuestLevel`]).

use isolab_cgroups::Limits;

use super::PlatformKind;

/// How the components of a service stack run on a VM platform.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum StackGuests {
    /// Every component a container of the level's engine in one guest, the container
    /// host (seed 003): they reach each other inside it. The default of `vm+ENGINE`.
    Shared,
    /// Each component in a guest of its own; their traffic crosses isolab's bridge.
    /// The only arrangement of a plain `vm` (its components are no containers).
    PerComponent,
}

impl StackGuests {
    /// Parses `shared` or `per-component`.
    pub fn parse(s: &str) -> Option<StackGuests> {
        match s {
            "shared" => Some(StackGuests::Shared),
            "per-component" => Some(StackGuests::PerComponent),
            _ => None,
        }
    }

    /// Its name in specs and stored runs.
    pub fn as_str(self) -> &'static str {
        match self {
            StackGuests::Shared => "shared",
            StackGuests::PerComponent => "per-component",
        }
    }

    /// The arrangement of `kind` when the spec names none: `shared` for a container
    /// engine in a VM, `per-component` for a plain VM, `None` for the other engines.
    pub fn default_for(kind: PlatformKind) -> Option<StackGuests> {
        if !kind.is_vm() {
            None
        } else if kind == PlatformKind::VM {
            Some(StackGuests::PerComponent)
        } else {
            Some(StackGuests::Shared)
        }
    }
}

/// The size of a shared guest (`guest_shape`): a shape's cpus as vCPUs and its memory
/// as the guest's RAM.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct GuestShape {
    /// The shape's name.
    pub shape: String,
    /// vCPUs: the shape's cpus, rounded up.
    pub vcpus: u32,
    /// The guest's RAM; `None` sizes it from the components' memory.
    pub memory: Option<isolab_cgroups::Bytes>,
}

/// Where a component's job belongs: its stack run and its name there, which a VM
/// platform whose components share one guest uses to find (or boot) that guest.
#[derive(Debug, Clone, PartialEq)]
pub struct StackPlace {
    /// The stack run (the subject's job name, `exp3-pid42/c0-r1`): its components share
    /// one guest.
    pub run: String,
    /// The component's name in the stack (`web`, `db`).
    pub component: String,
    /// The limits of all the stack's components together (a shared guest's size when
    /// the level gives no `guest_shape`).
    pub total: Limits,
}

/// A cell's guest OS (the `guest` factor): its level and the root image built for it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct GuestLevel {
    /// The level.
    pub os: isolab_vm::GuestOs,
    /// Its root image (the experiment's recipe from the level's suite).
    pub image: std::path::PathBuf,
}
