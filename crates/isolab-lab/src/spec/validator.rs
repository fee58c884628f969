//! [`Validator`]: what the spec checker holds while it walks the sections (the spec's
//! source for error positions, the host's facts, the errors found, the tables of names
//! defined so far), and the helpers every section's checks use. Below the sections and
//! the walk over them (`check.rs`).

use std::collections::BTreeMap;
use std::ops::Range;

use isolab_workloads::WorkloadDef;

use super::{HostFacts, Source, SpecError};
use crate::platform::PlatformDef;
use crate::shape::Shape;

/// Checks a [`RawSpec`] section by section, collecting every error with its position.
pub(super) struct Validator<'a> {
    pub(super) source: &'a Source,
    pub(super) host: &'a HostFacts,
    pub(super) errors: Vec<SpecError>,
    /// `[workload.NAME]` tables that had errors: already reported, so the matrix's
    /// reference to them is not reported again as unknown.
    pub(super) broken_workloads: Vec<String>,
}

/// What the matrix's levels may name: the built-ins and the spec's own tables.
pub(super) struct Tables {
    pub(super) platforms: BTreeMap<String, PlatformDef>,
    pub(super) shapes: BTreeMap<String, Shape>,
    pub(super) workloads: BTreeMap<String, WorkloadDef>,
    /// What stripes a `shared` level's devices (`[storage] striping`).
    pub(super) striping: super::storage::Striping,
}

impl<'a> Validator<'a> {
    pub(super) fn new(source: &'a Source, host: &'a HostFacts) -> Self {
        Validator {
            source,
            host,
            errors: Vec::new(),
            broken_workloads: Vec::new(),
        }
    }
}

impl Validator<'_> {
    /// Records an error at `span` of the source.
    pub(super) fn err(&mut self, span: Range<usize>, message: impl Into<String>) {
        // The same error at the same place once (an impossible level is found once
        // per cell it is in).
        let e = self.source.error(Some(span), message);
        if !self.errors.contains(&e) {
            self.errors.push(e);
        }
    }

    /// The built-ins by name, then each of the spec's `raw` tables as `check` makes it
    /// (a table replaces the built-in of its name); and the names of tables with errors.
    pub(super) fn named<T, R>(
        &mut self,
        builtins: Vec<T>,
        name: impl Fn(&T) -> String,
        raw: BTreeMap<String, R>,
        check: impl Fn(&mut Self, String, R) -> Option<T>,
    ) -> (BTreeMap<String, T>, Vec<String>) {
        let mut all: BTreeMap<String, T> = builtins.into_iter().map(|b| (name(&b), b)).collect();
        let mut broken = Vec::new();
        for (table, r) in raw {
            match check(self, table.clone(), r) {
                Some(t) => {
                    all.insert(name(&t), t);
                }
                None => broken.push(table),
            }
        }
        (all, broken)
    }

    /// The cpus of the host, counted.
    pub(super) fn host_cpus(&self) -> u32 {
        self.host.cpus.len() as u32
    }
}

/// `` `a`, `b` ``: items for a message.
pub(super) fn list(items: &[String]) -> String {
    items
        .iter()
        .map(|i| format!("`{i}`"))
        .collect::<Vec<_>>()
        .join(", ")
}
