//! `[matrix]`: the levels of every factor (platforms, shapes, workloads, neighbours and
//! reservations are checked by their own sections, storage by `storage.rs`; placements,
//! threads, instances and replicas here), which factors the matrix varies, its `exclude` entries, and
//! `[experiment] baseline`, which like `exclude` names levels of the matrix.

use std::collections::BTreeMap;
use std::ops::Range;

use toml::Spanned;

use super::experiment::RawBaseline;
use super::raw::{RawLevel, RawMatrix};
use super::validator::{list, Tables, Validator};
use super::{Location, MAX_COPIES, MAX_INSTANCES};
use crate::shape::Placement;

/// A factor's levels as written.
pub(super) type Levels = Option<Spanned<Vec<Spanned<RawLevel>>>>;
/// A validated level: its text, its span, and whether the spec listed it.
pub(super) type Level = (String, Range<usize>, bool);
/// Every factor with its levels, in [`super::FACTORS`] order.
pub(super) type Axes = [(&'static str, Vec<Level>); 13];
/// The factors the matrix varies, with their levels.
pub(super) type Factors = Vec<(String, Vec<String>)>;
/// An `exclude` entry's (factor, level) pairs and where it is.
pub(super) type Exclude = (Vec<(String, String)>, Location);

impl Validator<'_> {
    /// The levels of every factor of `raw` (whose `exclude` the caller has taken),
    /// checked against `tables`; `span` is the `[matrix]` table's.
    pub(super) fn axes(&mut self, raw: RawMatrix, span: Range<usize>, tables: &Tables) -> Axes {
        let platforms = self.platform_levels(raw.platform, &tables.platforms);
        let shapes = self.shape_levels(raw.shape, &tables.shapes);
        let placements = self.levels("placement", raw.placement, &["shared"], |l| {
            Placement::parse(l).map(|_| ()).ok_or_else(|| {
                format!("unknown placement `{l}`: expected `shared`, `quota`, `pinned` or `pinned-spread`")
            })
        });
        let workloads = self.workload_levels(raw.workload, span, &tables.workloads);
        let neighbours = self.neighbour_levels(raw.neighbour);
        let reservations = self.reservation_levels(raw.reservation);
        let count = |what: &str, max: u32, l: &str| match l.parse::<u32>() {
            Ok(n) if (1..=max).contains(&n) => Ok(()),
            _ => Err(format!(
                "{what} must be a whole number from 1 to {max}, got `{l}`"
            )),
        };
        let threads = self.levels("threads", raw.threads, &["-"], |l| {
            count("threads", 4096, l)
        });
        let instances = self.levels("instances", raw.instances, &["1"], |l| {
            count("instances", MAX_INSTANCES, l)
        });
        let copies = self.levels("copies", raw.copies, &["1"], |l| {
            count("copies", MAX_COPIES, l)
        });
        // `replica` only labels repeated copies of the same configuration (an A/A design).
        let replicas = self.levels("replica", raw.replica, &["1"], |_| Ok(()));
        let host = self.host_cpus();
        let pools = self.levels("host_cpus", raw.host_cpus, &["all"], |l| {
            if l == "all" {
                return Ok(());
            }
            match l.parse::<u32>() {
                Ok(n) if (1..=host).contains(&n) => Ok(()),
                _ => Err(format!(
                    "host_cpus `{l}` is not a cpu pool of this host: expected `all` or a whole number from 1 to {host}, the cpus isolab may use ({})",
                    self.host.cpus
                )),
            }
        });
        let storage = self.storage_levels(raw.storage);
        let guests = self.levels("guest", raw.guest, &["-"], |l| {
            isolab_vm::GuestOs::parse(l).map(|_| ()).ok_or_else(|| {
                let all: Vec<&str> = isolab_vm::GuestOs::ALL.iter().map(|g| g.as_str()).collect();
                format!("unknown guest `{l}`: expected one of {} (the guest OS of VM platforms, by Debian suite)", all.join(", "))
            })
        });
        [
            ("platform", platforms),
            ("shape", shapes),
            ("placement", placements),
            ("workload", workloads),
            ("neighbour", neighbours),
            ("reservation", reservations),
            ("threads", threads),
            ("instances", instances),
            ("copies", copies),
            ("replica", replicas),
            ("host_cpus", pools),
            ("storage", storage),
            ("guest", guests),
        ]
    }

    /// Levels of a factor with their spans; `explicit` says whether the spec listed them.
    pub(super) fn levels(
        &mut self,
        factor: &str,
        raw: Levels,
        default: &[&str],
        check: impl Fn(&str) -> Result<(), String>,
    ) -> Vec<Level> {
        let Some(raw) = raw else {
            return default
                .iter()
                .map(|d| (d.to_string(), 0..0, false))
                .collect();
        };
        if raw.get_ref().is_empty() {
            self.err(
                raw.span(),
                format!("matrix.{factor} is empty: list at least one level or leave it out"),
            );
        }
        let mut out: Vec<Level> = Vec::new();
        for level in raw.into_inner() {
            let texts = match sweep(&level.get_ref().text()) {
                Ok(texts) => texts,
                Err(message) => {
                    self.err(level.span(), format!("{factor}: {message}"));
                    continue;
                }
            };
            for text in texts {
                if let Err(message) = check(&text) {
                    self.err(level.span(), message);
                } else if out.iter().any(|(l, _, _)| *l == text) {
                    self.err(level.span(), format!("{factor} `{text}` is listed twice"));
                } else {
                    out.push((text, level.span(), true));
                }
            }
        }
        out
    }

    /// `exclude`: every key a varied factor, every value one of its levels or a sweep of
    /// them (`{ neighbour = "memory*{4,16}", reservation = "io" }` excludes both cells).
    pub(super) fn excludes(
        &mut self,
        raw: &[Spanned<BTreeMap<String, Spanned<RawLevel>>>],
        factors: &Factors,
    ) -> Vec<Exclude> {
        let mut excludes = Vec::new();
        for ex in raw {
            let at = self.source.locate(ex.span().start);
            // Each value's sweep, then every combination of them.
            let mut combinations: Vec<BTreeMap<String, Spanned<RawLevel>>> = vec![BTreeMap::new()];
            for (k, v) in ex.get_ref() {
                let texts = sweep(&v.get_ref().text()).unwrap_or_else(|message| {
                    self.err(v.span(), format!("exclude {k}: {message}"));
                    Vec::new()
                });
                combinations = combinations
                    .into_iter()
                    .flat_map(|c| {
                        texts.iter().map(move |t| {
                            let mut c = c.clone();
                            let level = RawLevel::Text(t.clone());
                            c.insert(k.clone(), Spanned::new(v.span(), level));
                            c
                        })
                    })
                    .collect();
            }
            for c in combinations {
                let pairs = self.named_levels("exclude", &c, factors, |k, v| {
                    format!("exclude names {k} `{v}`, which is not a level of the matrix")
                });
                excludes.push((pairs, at));
            }
        }
        excludes
    }

    /// `[experiment] baseline`: the levels that identify baseline cells, as `exclude`
    /// names them; without it, one chosen by [`default_baseline`].
    pub(super) fn baseline(
        &mut self,
        raw: RawBaseline,
        factors: &Factors,
    ) -> Vec<(String, String)> {
        match raw {
            None => default_baseline(factors),
            Some(b) => self.named_levels("baseline", b.get_ref(), factors, |k, v| {
                format!("baseline {k} `{v}` is not a level of the matrix")
            }),
        }
    }

    /// The (factor, level) pairs of `raw`, an `exclude` entry or the baseline (`what`):
    /// a factor the matrix does not vary, or a level it does not list, is an error at
    /// the value (`not_a_level` says which level of which factor is not one).
    fn named_levels(
        &mut self,
        what: &str,
        raw: &BTreeMap<String, Spanned<RawLevel>>,
        factors: &Factors,
        not_a_level: impl Fn(&str, &str) -> String,
    ) -> Vec<(String, String)> {
        let mut pairs = Vec::new();
        for (k, v) in raw {
            let v_text = v.get_ref().text();
            match factors.iter().find(|(f, _)| f == k) {
                None => self.err(
                    v.span(),
                    format!(
                        "{what} names factor `{k}`, which the matrix does not vary: expected one of {}",
                        list(&factors.iter().map(|f| f.0.clone()).collect::<Vec<_>>())
                    ),
                ),
                Some((_, levels)) if !levels.contains(&v_text) => self.err(
                    v.span(),
                    format!("{}: expected one of {}", not_a_level(k, &v_text), list(levels)),
                ),
                Some(_) => pairs.push((k.clone(), v_text)),
            }
        }
        pairs
    }
}

/// The factors the matrix varies (those the spec lists), with their levels.
pub(super) fn varied(axes: &Axes) -> Factors {
    axes.iter()
        .filter(|(_, ls)| ls.iter().any(|(_, _, explicit)| *explicit))
        .map(|(f, ls)| {
            (
                f.to_string(),
                ls.iter().map(|(l, _, _)| l.clone()).collect(),
            )
        })
        .collect()
}

/// The warning of a spec of `cells` cells named `name` without a `baseline` (none
/// declared and none chosen by [`default_baseline`]): no comparison is decided while
/// it runs, so every cell stops on its CV alone and a comparison made later may stay
/// undecided; it shows how to declare one, and how to continue a stored experiment
/// until one comparison is decided. `None` with a baseline, or fewer than two cells.
pub(super) fn no_baseline_warning(
    name: &str,
    baseline: &[(String, String)],
    factors: &Factors,
    cells: &[super::Cell],
) -> Option<String> {
    if !baseline.is_empty() || cells.len() < 2 {
        return None;
    }
    let (factor, levels) = factors.iter().find(|(_, ls)| ls.len() > 1)?;
    // `--until-decided` selects one cell on each side: every varied factor's level, A the
    // first cell and B the first that differs from it in one factor only.
    let a = &cells[0];
    let b = cells.iter().find(|c| {
        c.levels
            .iter()
            .zip(&a.levels)
            .filter(|(x, y)| x != y)
            .count()
            == 1
    })?;
    let varied = |f: &str| factors.iter().any(|(ff, ls)| ff == f && ls.len() > 1);
    let selector = |c: &super::Cell| {
        c.levels
            .iter()
            .filter(|(f, _)| varied(f))
            .map(|(f, l)| format!("{f}={l}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    Some(format!(
        "no baseline: no comparison is decided while the experiment runs, so each cell \
         stops on the CV of its primary metric alone (once it is at most target_cv, after \
         `min` runs), and a comparison made later with `isolab compare` may stay undecided (`?`); to have \
         comparisons decided, declare the levels to compare against under [experiment], e.g. \
         `baseline = {{ {factor} = \"{}\" }}`, or continue the stored experiment until one \
         comparison is decided: `isolab run --resume {name} --until-decided --a {} \
         --b {}`",
        levels[0],
        selector(a),
        selector(b)
    ))
}

fn default_baseline(factors: &[(String, Vec<String>)]) -> Vec<(String, String)> {
    // Only a factor with more than one level can hold a baseline to compare against.
    let has = |f: &str, l: &str| {
        factors
            .iter()
            .any(|(ff, ls)| ff == f && ls.len() > 1 && ls.iter().any(|x| x == l))
    };
    if has("neighbour", "none") {
        // An isolation experiment: each cell against itself without a neighbour.
        vec![("neighbour".into(), "none".into())]
    } else if has("platform", "host") {
        vec![("platform".into(), "host".into())]
    } else if has("placement", "shared") {
        vec![("placement".into(), "shared".into())]
    } else {
        Vec::new()
    }
}

/// The levels one written level sweeps: `memory*{1,4,16,32,64}` is `memory*1`,
/// `memory*4`, … (one pair of braces, its comma-separated parts in order); a level
/// without braces is itself.
fn sweep(text: &str) -> Result<Vec<String>, String> {
    let Some(open) = text.find('{') else {
        return if text.contains('}') {
            Err(format!("`{text}` has a `}}` without its `{{`"))
        } else {
            Ok(vec![text.to_owned()])
        };
    };
    let Some(close) = text[open..].find('}').map(|c| open + c) else {
        return Err(format!(
            "`{text}` opens a sweep with `{{` and does not close it: write e.g. `memory*{{1,4,16}}`"
        ));
    };
    let (head, tail) = (&text[..open], &text[close + 1..]);
    if tail.contains(['{', '}']) {
        return Err(format!(
            "`{text}` sweeps more than one part: one `{{…}}` per level"
        ));
    }
    let parts: Vec<&str> = text[open + 1..close].split(',').map(str::trim).collect();
    if parts.iter().any(|p| p.is_empty()) {
        return Err(format!(
            "`{text}` has an empty part in its sweep: list the parts separated by commas"
        ));
    }
    Ok(parts.iter().map(|p| format!("{head}{p}{tail}")).collect())
}

#[cfg(test)]
mod tests {
    use super::super::tests::{errors, parse};
    use super::sweep;
    use crate::shape::Placement;

    #[test]
    fn unknown_levels_point_at_the_level() {
        let errs = errors("[experiment]\nname = \"x\"\n[matrix]\nworkload = [\"sysbench-cpu\", \"sysbench-cpux\"]\nplacement = [\"pined\"]\n");
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert!(
            errs[0].starts_with("exp.toml:4:29: unknown workload `sysbench-cpux`: expected one of"),
            "{}",
            errs[0]
        );
        assert!(
            errs[1].starts_with("exp.toml:5:14: unknown placement `pined`"),
            "{}",
            errs[1]
        );
        // The unknown placement is reported in file order, after the workload on line 4.
    }

    #[test]
    fn exclude_drops_matching_cells_and_checks_names() {
        let spec = parse("[experiment]\nname = \"x\"\n[matrix]\nplacement = [\"shared\", \"quota\"]\nworkload = [\"sysbench-cpu\", \"fio-randread\"]\nexclude = [{ placement = \"quota\", workload = \"fio-randread\" }]\n").unwrap();
        assert_eq!(spec.cells.len(), 3);
        assert_eq!(
            spec.dropped[0].reason,
            "excluded by the exclude entry at line 6"
        );

        let errs = errors("[experiment]\nname = \"x\"\n[matrix]\nworkload = [\"sysbench-cpu\"]\nexclude = [{ platform = \"docker\" }]\n");
        assert!(
            errs[0].contains("exclude names factor `platform`, which the matrix does not vary"),
            "{errs:?}"
        );
    }

    #[test]
    fn missing_workload_is_explained() {
        let errs = errors("[experiment]\nname = \"x\"\n[matrix]\nplacement = [\"quota\"]\n");
        assert!(
            errs[0].contains("missing `workload` in [matrix]"),
            "{errs:?}"
        );
    }

    #[test]
    fn replicas_duplicate_every_configuration() {
        let spec = parse("[experiment]\nname = \"x\"\n[matrix]\nplacement = [\"shared\", \"quota\"]\nworkload = [\"sysbench-cpu\"]\nreplica = [\"a\", \"b\"]\n").unwrap();
        assert_eq!(spec.cells.len(), 4);
        assert_eq!(
            spec.cells[1].key(),
            "placement=shared workload=sysbench-cpu replica=b"
        );
        assert_eq!(spec.cells[2].placement, Placement::Quota);
    }

    #[test]
    fn a_level_in_braces_sweeps_in_one_line() {
        let spec = parse("[experiment]\nname = \"x\"\n[matrix]\nworkload = [\"sysbench-cpu\"]\nneighbour = [\"none\", \"memory*{1,4,16,32,64}\", \"fork*{1, 4}\"]\n").unwrap();
        let levels: Vec<String> = spec
            .cells
            .iter()
            .map(|c| c.level("neighbour").unwrap().to_owned())
            .collect();
        assert_eq!(
            levels,
            [
                "none",
                "memory*1",
                "memory*4",
                "memory*16",
                "memory*32",
                "memory*64",
                "fork*1",
                "fork*4"
            ]
        );
        assert_eq!(
            sweep("cpu@{50,90,100}%").unwrap(),
            ["cpu@50%", "cpu@90%", "cpu@100%"]
        );
        // An exclude entry sweeps too: every combination of its values.
        let spec = parse("[experiment]\nname = \"x\"\n[matrix]\nshape = [\"medium\"]\nworkload = [\"sysbench-cpu\"]\nneighbour = [\"none\", \"fork*{1,4}\"]\nreservation = [\"none\", \"cpuset\", \"io\"]\nexclude = [{ neighbour = \"fork*{1,4}\", reservation = \"{cpuset,io}\" }]\n").unwrap();
        let keys: Vec<String> = spec.cells.iter().map(|c| c.key()).collect();
        assert_eq!(keys.len(), 3 + 2, "{keys:?}");
        assert!(keys
            .iter()
            .all(|k| !k.contains("fork") || k.ends_with("reservation=none")));
        let errs = errors("[experiment]\nname = \"x\"\n[matrix]\nworkload = [\"sysbench-cpu\"]\nneighbour = [\"memory*{1,4\", \"fork*{1,}\", \"cpu*{1}{2}\", \"cpu*{1,1}\", \"cpu*{0,2}\"]\n");
        assert!(
            errs.iter().any(|e| e
                .contains("neighbour: `memory*{1,4` opens a sweep with `{` and does not close it")),
            "{errs:?}"
        );
        assert!(
            errs.iter()
                .any(|e| e.contains("neighbour: `fork*{1,}` has an empty part")),
            "{errs:?}"
        );
        assert!(
            errs.iter().any(|e| e.contains("sweeps more than one part")),
            "{errs:?}"
        );
        assert!(
            errs.iter()
                .any(|e| e.contains("neighbour `cpu*1` is listed twice")),
            "{errs:?}"
        );
        assert!(
            errs.iter().any(|e| e.contains(":5:")),
            "each error at its level: {errs:?}"
        );
    }

    #[test]
    fn copies_are_a_count_of_a_command_in_one_instance() {
        let spec = parse("[experiment]\nname = \"x\"\n[matrix]\nworkload = [\"sysbench-cpu\"]\ncopies = [1, 8]\n").unwrap();
        assert_eq!(spec.cells.len(), 2);
        assert_eq!((spec.cells[0].copies, spec.cells[1].copies), (1, 8));
        assert_eq!(spec.cells[1].instances, 1);
        assert_eq!(spec.cells[1].key(), "workload=sysbench-cpu copies=8");
        let errs = errors("[experiment]\nname = \"x\"\n[matrix]\nworkload = [\"sysbench-cpu\"]\ncopies = [0, 513]\n");
        assert!(
            errs.iter()
                .any(|e| e.contains("copies must be a whole number from 1 to 512, got `0`")),
            "{errs:?}"
        );
        // Not beside several instances, and not of a service.
        let errs = errors("[experiment]\nname = \"x\"\n[matrix]\nworkload = [\"sysbench-cpu\"]\ninstances = [2]\ncopies = [4]\n");
        assert!(
            errs.iter().any(|e| e.contains("copies = 4 with instances = 2: a cell has several copies in one instance or several instances, not both")),
            "{errs:?}"
        );
        let errs = errors("[experiment]\nname = \"x\"\n[matrix]\nworkload = [\"redis-benchmark\"]\ncopies = [2]\n");
        assert!(
            errs.iter().any(|e| e.contains("copies = 2: copies start the workload's command 2 times in one instance, and `redis-benchmark` is a service")),
            "{errs:?}"
        );
    }

    #[test]
    fn threads_and_instances_are_counts() {
        let spec = parse("[experiment]\nname = \"x\"\n[matrix]\nworkload = [\"sysbench-cpu\"]\nthreads = [1, 4]\ninstances = [1, 128]\n").unwrap();
        assert_eq!(spec.cells.len(), 4);
        assert_eq!(spec.cells[3].thread_count(), 4);
        assert_eq!(spec.cells[3].instances, 128);
        assert_eq!(
            spec.cells[3].key(),
            "workload=sysbench-cpu threads=4 instances=128"
        );
        let errs = errors("[experiment]\nname = \"x\"\n[matrix]\nworkload = [\"sysbench-cpu\"]\nthreads = [0]\ninstances = [\"many\", 1000]\n");
        assert_eq!(errs.len(), 3, "{errs:?}");
        assert!(
            errs[0].contains("threads must be a whole number from 1 to 4096, got `0`"),
            "{errs:?}"
        );
        assert!(
            errs[2].contains("instances must be a whole number from 1 to 512, got `1000`"),
            "{errs:?}"
        );
    }

    #[test]
    fn a_spec_without_a_baseline_warns_that_comparisons_may_stay_undecided() {
        let spec = parse("[experiment]\nname = \"aab\"\n[matrix]\nshape = [\"medium\"]\nworkload = [\"sysbench-cpu\", \"sysbench-memory\"]\n").unwrap();
        assert!(spec.baseline.is_empty());
        let warning = spec
            .warnings
            .iter()
            .find(|w| w.starts_with("no baseline: "))
            .unwrap_or_else(|| panic!("{:?}", spec.warnings));
        assert!(
            warning.contains("each cell stops on the CV of its primary metric alone"),
            "{warning}"
        );
        assert!(
            warning.contains("`baseline = { workload = \"sysbench-cpu\" }`"),
            "{warning}"
        );
        assert!(
            warning.contains("`isolab run --resume aab --until-decided --a workload=sysbench-cpu --b workload=sysbench-memory`"),
            "{warning}"
        );
        // With two varied factors, each selector names both, so that it selects one cell.
        let two = parse("[experiment]\nname = \"aab2\"\n[matrix]\nshape = [\"medium\", \"large\"]\nworkload = [\"sysbench-cpu\", \"sysbench-memory\"]\n").unwrap();
        let warning = two
            .warnings
            .iter()
            .find(|w| w.starts_with("no baseline: "))
            .unwrap_or_else(|| panic!("{:?}", two.warnings));
        assert!(
            warning.contains("`isolab run --resume aab2 --until-decided --a shape=medium,workload=sysbench-cpu --b shape=medium,workload=sysbench-memory`"),
            "{warning}"
        );
        // The syntax shown is the syntax the checker takes.
        let declared = parse("[experiment]\nname = \"aab\"\nbaseline = { workload = \"sysbench-cpu\" }\n[matrix]\nworkload = [\"sysbench-cpu\", \"sysbench-memory\"]\n").unwrap();
        assert!(declared
            .warnings
            .iter()
            .all(|w| !w.starts_with("no baseline")));
        // A default baseline, or a single cell, compares or has nothing to compare.
        let default = parse("[experiment]\nname = \"x\"\n[matrix]\nplacement = [\"shared\", \"quota\"]\nworkload = [\"sysbench-cpu\"]\n").unwrap();
        assert!(default
            .warnings
            .iter()
            .all(|w| !w.starts_with("no baseline")));
        let one =
            parse("[experiment]\nname = \"x\"\n[matrix]\nworkload = [\"sysbench-cpu\"]\n").unwrap();
        assert!(one.warnings.is_empty(), "{:?}", one.warnings);
    }

    #[test]
    fn a_baseline_names_levels_of_the_matrix() {
        let spec = parse("[experiment]\nname = \"x\"\nbaseline = { platform = \"isolab\" }\n[matrix]\nplatform = [\"host\", \"isolab\"]\nworkload = [\"sysbench-cpu\"]\n").unwrap();
        assert_eq!(
            spec.baseline,
            [("platform".to_owned(), "isolab".to_owned())]
        );
        let errs = errors("[experiment]\nname = \"x\"\nbaseline = { platform = \"docker\" }\n[matrix]\nplatform = [\"host\", \"isolab\"]\nplacement = [\"quota\", \"quota\"]\nworkload = [\"sysbench-cpu\"]\n");
        assert_eq!(
            errs,
            [
                "exp.toml:3:25: baseline platform `docker` is not a level of the matrix: expected one of `host`, `isolab`",
                "exp.toml:6:23: placement `quota` is listed twice",
            ]
        );
    }
}
