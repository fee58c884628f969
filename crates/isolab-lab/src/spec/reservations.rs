//! The matrix's `reservation` levels ([`Reservation`]), and the cell a reservation makes
//! impossible: one that leaves none of the host's cpus to the neighbours.

use super::matrix::{Level, Levels};
use super::validator::{list, Validator};
use crate::reservation::Reservation;
use crate::shape::Shape;

impl Validator<'_> {
    /// `matrix.reservation`: each a [`Reservation`]; `none` unless given.
    pub(super) fn reservation_levels(&mut self, raw: Levels) -> Vec<Level> {
        self.levels("reservation", raw, &["none"], |l| {
            Reservation::parse(l).map(|_| ()).ok_or_else(|| {
                format!(
                    "unknown reservation `{l}`: expected one of {}",
                    list(&Reservation::ALL.map(|r| r.as_str().to_owned()))
                )
            })
        })
    }
}

/// Why `reservation` cannot protect shape `s` on a host of `host_cpus`, if it cannot:
/// binding or limiting the subject to all of the host's cpus leaves none to the neighbours.
pub(super) fn leaves_no_cpus(
    reservation: Reservation,
    s: &str,
    shape: &Shape,
    host_cpus: u32,
) -> Option<String> {
    (matches!(reservation, Reservation::Cpuset | Reservation::Quota) && shape.cpus() >= host_cpus)
        .then(|| {
            format!(
                "reservation `{reservation}` with shape `{s}` ({} cpus) leaves none of this host's {host_cpus} cpus to the neighbours",
                shape.cpus()
            )
        })
}

#[cfg(test)]
mod tests {
    use super::super::tests::{errors, parse};

    #[test]
    fn bad_neighbours_and_reservations_point_at_the_level() {
        let errs = errors("[experiment]\nname = \"x\"\n[matrix]\nworkload = [\"sysbench-cpu\"]\nneighbour = [\"none\", \"gpu@50%\"]\nreservation = [\"blkio\"]\n");
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert!(errs[0].starts_with("exp.toml:5:22:"), "{errs:?}");
        assert!(
            errs[1].starts_with("exp.toml:6:16: unknown reservation `blkio`"),
            "{errs:?}"
        );
    }

    #[test]
    fn a_reservation_needs_cpus_left_for_the_neighbours() {
        let text = "[experiment]\nname = \"x\"\n[matrix]\nshape = [\"large\"]\nworkload = [\"sysbench-cpu\"]\nneighbour = [\"none\", \"cpu\"]\nreservation = [\"none\", \"cpuset\"]\n";
        let errs = errors(text);
        assert!(
            errs.iter()
                .any(|e| e.contains("reservation `cpuset` with shape `large` (2 cpus) leaves none")),
            "{errs:?}"
        );
        let skipped =
            parse(&text.replace("name = \"x\"", "name = \"x\"\nimpossible = \"skip\"")).unwrap();
        assert_eq!(skipped.cells.len(), 2);
    }
}
