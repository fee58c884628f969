//! `[workload.NAME]` tables that tune a built-in: `from = "BUILTIN"` (or the built-in's own
//! name) with another amount of `work`, under the table's name.

use std::ops::Range;

use isolab_workloads::WorkloadDef;
use toml::Spanned;

use crate::spec::raw::RawWorkload;
use crate::spec::validator::Validator;

impl Validator<'_> {
    /// `[workload.NAME]` with `from = "BUILTIN"` (or named as a built-in) and `work`:
    /// the built-in with another amount of work, under the table's name.
    pub(super) fn tuned_builtin(
        &mut self,
        name: String,
        span: Range<usize>,
        raw: RawWorkload,
    ) -> Option<WorkloadDef> {
        let before = self.errors.len();
        let from = raw
            .from
            .as_ref()
            .map_or(name.as_str(), |f| f.get_ref().as_str());
        let Some(mut def) = isolab_workloads::builtin(from) else {
            let at = raw.from.as_ref().map_or(span.clone(), |f| f.span());
            self.err(at, format!("unknown built-in workload `{from}` in workload.{name}.from: see `isolab list --workloads`"));
            return None;
        };
        let others = [
            raw.command.as_ref().map(|c| (c.span(), "command")),
            raw.stack.as_ref().map(|c| (c.span(), "stack")),
            raw.parser.as_ref().map(|c| (c.span(), "parser")),
            raw.primary.as_ref().map(|c| (c.span(), "primary")),
            raw.prepare.as_ref().map(|c| (c.span(), "prepare")),
            raw.cleanup.as_ref().map(|c| (c.span(), "cleanup")),
            raw.server.as_ref().map(|c| (c.span(), "server")),
            raw.load.as_ref().map(|c| (c.span(), "load")),
        ];
        for (at, key) in others.into_iter().flatten() {
            self.err(at, format!("workload.{name} tunes the built-in `{from}`, which takes only `from`, `work`, `keep_data` and `description`: remove `{key}` (or `from`, to define a workload of your own)"));
        }
        if let Some(k) = &raw.keep_data {
            match def.stack.as_mut().filter(|s| !s.data_paths.is_empty()) {
                Some(stack) => stack.keep_data = *k.get_ref(),
                None => self.err(k.span(), format!("the built-in `{from}` has no data load to keep: keep_data is for the database workloads (`isolab list --workloads`)")),
            }
        }
        match (&raw.work, def.work.as_mut()) {
            (Some(w), Some(work)) => {
                if let Some(amount) = self.work_amount(&name, w) {
                    work.amount = amount;
                }
            }
            (Some(w), None) => {
                let fixed: Vec<String> = isolab_workloads::catalog()
                    .into_iter()
                    .filter(|b| b.work.is_some())
                    .map(|b| b.name)
                    .collect();
                self.err(w.span(), format!("the built-in `{from}` has no amount of work to set (it runs for `duration`); these do: {}", fixed.join(", ")));
            }
            (None, _) if raw.keep_data.is_some() => {}
            (None, _) => self.err(span, format!("workload.{name} names the built-in `{from}` but changes nothing: give `work = N` (or `keep_data` for a database workload), or remove the table")),
        }
        def.name = name;
        if let Some(d) = raw.description {
            def.description = d;
        }
        (self.errors.len() == before).then_some(def)
    }

    /// `work = N` of workload `name`: a positive whole number.
    pub(super) fn work_amount(&mut self, name: &str, w: &Spanned<i64>) -> Option<u64> {
        match u64::try_from(*w.get_ref()) {
            Ok(n) if n > 0 => Some(n),
            _ => {
                self.err(
                    w.span(),
                    format!(
                        "workload.{name}.work must be a positive whole number, not {}",
                        w.get_ref()
                    ),
                );
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::spec::tests::{errors, parse};
    use isolab_workloads::ParserKind;

    #[test]
    fn a_built_in_s_work_is_tuned_under_its_own_name_or_another() {
        let spec = parse("[experiment]\nname = \"x\"\n[matrix]\nworkload = [\"mpi-prime\", \"short-video\"]\n[workload.mpi-prime]\nwork = 1000\n[workload.short-video]\nfrom = \"ffmpeg-transcode\"\nwork = 2\n").unwrap();
        let work = |name: &str| {
            let c = spec.cells.iter().find(|c| c.workload.name == name).unwrap();
            c.workload.work.clone().unwrap()
        };
        assert_eq!(work("mpi-prime").amount, 1000);
        assert_eq!(work("short-video").amount, 2);
        assert_eq!(work("short-video").unit, "frames of video (30 a second)");
        let video = &spec
            .cells
            .iter()
            .find(|c| c.workload.name == "short-video")
            .unwrap()
            .workload;
        assert_eq!(video.assets[0].name, "video");
        assert_eq!(video.parser, ParserKind::Ffmpeg);
    }

    #[test]
    fn tuning_a_built_in_wrongly_is_an_error_at_the_key() {
        let errs = errors("[experiment]\nname = \"x\"\n[matrix]\nworkload = [\"a\", \"sysbench-cpu\", \"c\", \"d\"]\n[workload.a]\nfrom = \"nope\"\nwork = 1\n[workload.sysbench-cpu]\nwork = 5\n[workload.c]\nfrom = \"mpi-search\"\nwork = 0\n[workload.d]\nfrom = \"mpi-search\"\nwork = 3\nparser = \"json\"\n");
        let all = errs.join("\n");
        assert!(
            all.contains("unknown built-in workload `nope` in workload.a.from"),
            "{all}"
        );
        assert!(
            all.contains("the built-in `sysbench-cpu` has no amount of work to set"),
            "{all}"
        );
        assert!(
            all.contains("workload.c.work must be a positive whole number, not 0"),
            "{all}"
        );
        assert!(all.contains("workload.d tunes the built-in `mpi-search`, which takes only `from`, `work`, `keep_data` and `description`: remove `parser`"), "{all}");
        assert!(errs.iter().all(|e| e.starts_with("exp.toml:")), "{all}");
    }

    #[test]
    fn a_database_workload_keeps_its_data_only_when_asked() {
        let text = "[experiment]\nname = \"x\"\n[matrix]\nworkload = [\"pgbench-oltp\", \"sysbench-pgsql-insert\"]\n[workload.pgbench-oltp]\nkeep_data = true\n";
        let spec = parse(text).unwrap();
        let stack = |name: &str| {
            let c = spec.cells.iter().find(|c| c.workload.name == name).unwrap();
            c.workload.stack.clone().unwrap()
        };
        assert!(stack("pgbench-oltp").keep_data);
        assert_eq!(
            stack("pgbench-oltp").data_paths,
            ["db/data", "data-set.json"]
        );
        assert!(!stack("sysbench-pgsql-insert").keep_data);
        let errs = errors(&text.replace("pgbench-oltp", "sysbench-cpu")).join("\n");
        assert!(
            errs.contains("the built-in `sysbench-cpu` has no data load to keep"),
            "{errs}"
        );
    }
}
