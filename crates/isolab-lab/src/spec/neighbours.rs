//! The matrix's `neighbour` levels: `none`, or a co-located stressor such as `cpu@90%` or
//! `fork*2` ([`NeighbourLevel`]), and the neighbour a cell's level stands for.

use super::matrix::{Level, Levels};
use super::validator::Validator;
use crate::neighbour::NeighbourLevel;

impl Validator<'_> {
    /// `matrix.neighbour`: each `none` or a [`NeighbourLevel`]; `none` unless given.
    pub(super) fn neighbour_levels(&mut self, raw: Levels) -> Vec<Level> {
        self.levels("neighbour", raw, &["none"], |l| {
            if l == "none" {
                return Ok(());
            }
            l.parse::<NeighbourLevel>()
                .map(|_| ())
                .map_err(|e| e.to_string())
        })
    }
}

/// The neighbour of a checked level: `None` for `none`.
pub(super) fn neighbour(level: &str) -> Option<NeighbourLevel> {
    match level {
        "none" => None,
        l => l.parse::<NeighbourLevel>().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{errors, parse};
    use crate::reservation::Reservation;

    #[test]
    fn neighbour_and_reservation_factors_expand_and_default_the_baseline() {
        let spec = parse("[experiment]\nname = \"x\"\n[matrix]\nshape = [\"medium\"]\nworkload = [\"sysbench-cpu\"]\nneighbour = [\"none\", \"cpu@90%\", \"fork*2\"]\nreservation = [\"none\", \"cpuset\"]\n").unwrap();
        assert_eq!(spec.cells.len(), 6);
        assert_eq!(
            spec.baseline,
            vec![("neighbour".to_string(), "none".to_string())]
        );
        let c = &spec.cells[3];
        assert_eq!(
            c.key(),
            "shape=medium workload=sysbench-cpu neighbour=cpu@90% reservation=cpuset"
        );
        assert_eq!(
            c.neighbour.as_ref().map(ToString::to_string).as_deref(),
            Some("cpu@90%")
        );
        assert_eq!(c.reservation, Reservation::Cpuset);
        assert!(spec.cells[0].neighbour.is_none());
    }

    #[test]
    fn an_unknown_neighbour_kind_is_an_error_at_the_level() {
        let errs = errors("[experiment]\nname = \"x\"\n[matrix]\nworkload = [\"sysbench-cpu\"]\nneighbour = [\"none\", \"gpu@50%\"]\n");
        assert_eq!(
            errs,
            ["exp.toml:5:22: unknown neighbour kind `gpu` in `gpu@50%`: expected KIND, KIND*N or KIND@P% (e.g. `cpu`, `disk*2`, `cpu@90%`) with KIND one of cpu, memory, fork, disk, network, cache (`network-tx`, `network-rx`: which way the network neighbours' traffic flows)"]
        );
    }

    #[test]
    fn a_stack_takes_every_neighbour_level_and_reservation_also_in_a_vm() {
        let spec = parse("[experiment]\nname = \"x\"\nimpossible = \"skip\"\n[matrix]\nplatform = [\"host\", \"vm(tcg)\"]\nshape = [\"medium\"]\nworkload = [\"pgbench-oltp\"]\nneighbour = [\"none\", \"cpu\", \"cpu@90%\"]\nreservation = [\"none\", \"cpuset\", \"io\"]\n").unwrap();
        let kept: Vec<String> = spec.cells.iter().map(|c| c.key()).collect();
        // Every neighbour level under every reservation (a utilisation target and
        // `io` are sized against the stack run alone), on the host and in VMs (whose
        // neighbours are VMs of their own).
        assert_eq!(kept.len(), 9 + 9, "{kept:#?}");
        for platform in ["host", "vm(tcg)"] {
            assert!(kept.contains(&format!(
                "platform={platform} shape=medium workload=pgbench-oltp neighbour=cpu@90% reservation=io"
            )));
        }
        assert!(spec.dropped.is_empty(), "{:#?}", spec.dropped);
        // Without `skip`, on host, the checker takes a utilisation target.
        let spec = parse("[experiment]\nname = \"x\"\n[matrix]\nshape = [\"medium\"]\nworkload = [\"pgbench-oltp\"]\nneighbour = [\"cpu@90%\"]\nreservation = [\"cpuset\", \"io\", \"net\"]\n").unwrap();
        assert_eq!(spec.cells.len(), 3);
    }
}
