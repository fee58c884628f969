//! Expanding the matrix into cells: the cartesian product of the factors' levels in
//! matrix order, without the excluded cells and the impossible ones (an error at the
//! level, or dropped with `impossible = "skip"`), with a warning for every limit a cell
//! asks for that does not apply.

use std::ops::Range;

use super::matrix::{Axes, Exclude, Factors, Level};
use super::validator::{Tables, Validator};
use super::{levels_key, neighbours, platforms, reservations, shapes, storage};
use super::{Cell, DroppedCell, Impossible};
use isolab_engines::StorageLevel;

use crate::platform::{GuestLevel, PlatformDef};
use crate::reservation::Reservation;
use crate::shape::{Placement, Shape};

/// What [`Validator::expand`] made of the matrix.
pub(super) struct Expanded {
    pub(super) cells: Vec<Cell>,
    pub(super) dropped: Vec<DroppedCell>,
    pub(super) warnings: Vec<String>,
}

/// Why a cell cannot run on this host, the level to point at, and how the error ends.
struct Impossibility {
    reason: String,
    at: Range<usize>,
    advice: &'static str,
}

/// How an error about a cell that a smaller shape would make possible ends.
const SMALLER: &str =
    ": choose a smaller shape, exclude the cell, or set `impossible = \"skip\"` in [experiment]";
/// How an error about a cell that no shape would make possible ends.
const OR_EXCLUDE: &str = "; or exclude the cell, or set `impossible = \"skip\"` in [experiment]";

impl Validator<'_> {
    /// The cells of `axes` in matrix order (the last factor varying fastest), and those
    /// left out with the reason; an impossible cell is an error unless `impossible` is
    /// [`Impossible::Skip`].
    pub(super) fn expand(
        &mut self,
        axes: &Axes,
        factors: &Factors,
        excludes: &[Exclude],
        tables: &Tables,
        impossible: Impossible,
    ) -> Expanded {
        let mut out = Expanded {
            cells: Vec::new(),
            dropped: Vec::new(),
            warnings: Vec::new(),
        };
        let sizes: Vec<usize> = axes.iter().map(|(_, ls)| ls.len()).collect();
        let total: usize = sizes.iter().product();
        for n in 0..total {
            let pick = pick(n, &sizes);
            let picked: [&Level; 13] = std::array::from_fn(|i| &axes[i].1[pick[i]]);
            let levels: Vec<(String, String)> = axes
                .iter()
                .enumerate()
                .filter(|(_, (f, _))| factors.iter().any(|(ff, _)| ff == f))
                .map(|(i, (f, _))| (f.to_string(), picked[i].0.clone()))
                .collect();
            let key = levels_key(&levels);
            if let Some((_, at)) = excludes
                .iter()
                .find(|(ex, _)| ex.iter().all(|pair| levels.contains(pair)))
            {
                out.dropped.push(DroppedCell {
                    key,
                    reason: format!("excluded by the exclude entry at line {}", at.line),
                });
                continue;
            }
            if let Some(no) = self.impossibility(&picked, tables) {
                match impossible {
                    Impossible::Skip => out.dropped.push(DroppedCell {
                        key,
                        reason: no.reason,
                    }),
                    Impossible::Error => self.err(no.at, format!("{}{}", no.reason, no.advice)),
                }
                continue;
            }
            let cell = cell(out.cells.len() as u32, levels, &picked, tables);
            for w in self.warnings(&key, &cell.platform, &cell.shape, cell.placement) {
                if !out.warnings.contains(&w) {
                    out.warnings.push(w);
                }
            }
            out.cells.push(cell);
        }
        out
    }

    /// Why the cell of `picked` levels cannot run here, if it cannot: the first of a
    /// pinned shape larger than the host, a workload the platform cannot reach, copies of
    /// a service or beside several instances, a reservation that leaves the neighbours no
    /// cpu, and a storage level the platform cannot apply.
    fn impossibility(&self, picked: &[&Level; 13], tables: &Tables) -> Option<Impossibility> {
        let (s, s_span, _) = picked[1];
        let shape = &tables.shapes[s.as_str()];
        let placement = Placement::parse(&picked[2].0).unwrap_or(Placement::Shared);
        let pool = picked[10].0.parse::<u32>().ok();
        if let Some(reason) = shapes::pinning_impossible(s, shape, placement, self.host) {
            return Some(Impossibility {
                reason,
                at: s_span.clone(),
                advice: SMALLER,
            });
        }
        if let Some(reason) = pool.and_then(|n| shapes::pool_too_small(s, shape, n)) {
            return Some(Impossibility {
                reason,
                at: picked[10].1.clone(),
                advice: SMALLER,
            });
        }
        let platform = &tables.platforms[picked[0].0.as_str()];
        let w = &picked[3].0;
        if let Some(reason) = platforms::unreachable(platform, w, &tables.workloads[w.as_str()]) {
            return Some(Impossibility {
                reason,
                at: picked[0].1.clone(),
                advice: OR_EXCLUDE,
            });
        }
        if let Some(reason) = copies_impossible(&tables.workloads[w.as_str()], picked) {
            return Some(Impossibility {
                reason,
                at: picked[8].1.clone(),
                advice: OR_EXCLUDE,
            });
        }
        let reservation = Reservation::parse(&picked[5].0).unwrap_or(Reservation::None);
        let cpus = pool.unwrap_or_else(|| self.host_cpus());
        if let Some(reason) = reservations::leaves_no_cpus(reservation, s, shape, cpus) {
            return Some(Impossibility {
                reason,
                at: picked[5].1.clone(),
                advice: SMALLER,
            });
        }
        if picked[12].0 != "-" && !platform.kind.is_vm() {
            return Some(Impossibility {
                reason: format!(
                    "guest `{}` is the guest OS of VM platforms: `{}` runs no guest",
                    picked[12].0, platform.name
                ),
                at: picked[12].1.clone(),
                advice: OR_EXCLUDE,
            });
        }
        let level = StorageLevel::parse(&picked[11].0).unwrap_or(StorageLevel::Bind);
        let striping = tables.striping;
        storage::unsupported(platform, level, striping, self.host.storage).map(|reason| {
            Impossibility {
                reason,
                // At the storage level, or at the platform when the matrix lists no storage.
                at: if picked[11].2 {
                    picked[11].1.clone()
                } else {
                    picked[0].1.clone()
                },
                advice: OR_EXCLUDE,
            }
        })
    }

    /// What is worth knowing about cell `key`: limits its platform does not apply, and a
    /// quota that cannot limit anything on this host.
    fn warnings(
        &self,
        key: &str,
        platform: &PlatformDef,
        shape: &Shape,
        placement: Placement,
    ) -> Vec<String> {
        let host_cpus = self.host_cpus();
        let mut out = Vec::new();
        let asked = crate::shape::limit_kinds(shape, placement);
        if let Some(unapplied) = platform.limits_unapplied(asked) {
            out.push(format!(
                "{key}: {unapplied}; its runs say so in their notes"
            ));
        }
        if placement == Placement::Quota && shape.cpu_count() > f64::from(host_cpus) {
            out.push(format!(
                "{key}: a quota of {} cpus on a {host_cpus}-cpu host does not limit anything",
                shape.cpu_count()
            ));
        }
        out
    }
}

/// The level index of every factor in cell `n` of a matrix of factors of `sizes` levels,
/// the last factor varying fastest.
fn pick(n: usize, sizes: &[usize]) -> [usize; 13] {
    let mut pick = [0usize; 13];
    let mut rest = n;
    for i in (0..sizes.len()).rev() {
        pick[i] = rest % sizes[i];
        rest /= sizes[i];
    }
    pick
}

/// The cell at `index` with `levels` (of the varied factors) and `picked` levels.
fn cell(index: u32, levels: Vec<(String, String)>, picked: &[&Level; 13], tables: &Tables) -> Cell {
    Cell {
        index,
        levels,
        platform: PlatformDef {
            // The guest's image is the recipe's, filled in once the recipe is known.
            guest: isolab_vm::GuestOs::parse(&picked[12].0).map(|os| GuestLevel {
                os,
                image: std::path::PathBuf::new(),
            }),
            ..tables.platforms[picked[0].0.as_str()].clone()
        },
        shape: tables.shapes[picked[1].0.as_str()].clone(),
        placement: Placement::parse(&picked[2].0).unwrap_or(Placement::Shared),
        workload: tables.workloads[picked[3].0.as_str()].clone(),
        neighbour: neighbours::neighbour(&picked[4].0),
        reservation: Reservation::parse(&picked[5].0).unwrap_or(Reservation::None),
        threads: picked[6].0.parse().ok(),
        instances: picked[7].0.parse().unwrap_or(1),
        copies: picked[8].0.parse().unwrap_or(1),
        host_cpus: picked[10].0.parse().ok(),
        storage: StorageLevel::parse(&picked[11].0).unwrap_or(StorageLevel::Bind),
    }
}

/// Why the `copies` level of `picked` cannot run workload `w`, if it is above 1 and
/// cannot: copies start a command N times in one instance, so neither a service stack
/// nor a workload with a server of its own, and not in a cell of several instances.
fn copies_impossible(w: &isolab_workloads::WorkloadDef, picked: &[&Level; 13]) -> Option<String> {
    let copies: u32 = picked[8].0.parse().unwrap_or(1);
    if copies <= 1 {
        return None;
    }
    if w.stack.is_some() || w.server.is_some() {
        return Some(format!(
            "copies = {copies}: copies start the workload's command {copies} times in one instance, and `{}` is a service (a stack or a server of its own)",
            w.name
        ));
    }
    let instances: u32 = picked[7].0.parse().unwrap_or(1);
    (instances > 1).then(|| {
        format!("copies = {copies} with instances = {instances}: a cell has several copies in one instance or several instances, not both")
    })
}

#[cfg(test)]
mod tests {
    use super::super::tests::{errors, parse};

    #[test]
    fn cells_run_in_matrix_order_the_last_factor_fastest() {
        let spec = parse("[experiment]\nname = \"x\"\n[matrix]\nplacement = [\"shared\", \"quota\"]\nworkload = [\"sysbench-cpu\", \"fio-randread\"]\n").unwrap();
        let keys: Vec<String> = spec.cells.iter().map(|c| c.key()).collect();
        assert_eq!(
            keys,
            [
                "placement=shared workload=sysbench-cpu",
                "placement=shared workload=fio-randread",
                "placement=quota workload=sysbench-cpu",
                "placement=quota workload=fio-randread",
            ]
        );
        assert_eq!(spec.cells[3].index, 3);
    }

    #[test]
    fn a_matrix_with_every_cell_excluded_is_an_error_at_the_matrix() {
        let errs = errors("[experiment]\nname = \"x\"\n[matrix]\nplacement = [\"shared\", \"quota\"]\nworkload = [\"sysbench-cpu\"]\nexclude = [{ workload = \"sysbench-cpu\" }]\n");
        assert_eq!(
            errs,
            ["exp.toml:3:1: every cell of the matrix is excluded or impossible: nothing to run"]
        );
    }
}
