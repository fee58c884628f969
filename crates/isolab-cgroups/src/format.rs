//! Parsers for the formats of cgroup interface files, as named in the kernel's
//! `Documentation/admin-guide/cgroup-v2.rst` ("Interface Files: Format"). Pure
//! functions on text; the callers attach the path to any error.

/// What a malformed file should have looked like (becomes [`crate::Error::Parse`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Expected(pub &'static str);

/// A single number, e.g. `cpuacct.usage`, `memory.current`, `pids.current`.
pub(crate) fn single_u64(text: &str) -> Result<u64, Expected> {
    text.trim()
        .parse()
        .map_err(|_| Expected("a single non-negative integer"))
}

/// A single number or `max` (`pids.max`, `memory.max`, `memory.swap.max`);
/// `max` is `None`.
pub(crate) fn max_or_u64(text: &str) -> Result<Option<u64>, Expected> {
    match text.trim() {
        "max" => Ok(None),
        t => t
            .parse()
            .map(Some)
            .map_err(|_| Expected("a non-negative integer or \"max\"")),
    }
}

/// A single signed number where negative means unlimited (v1 `cpu.cfs_quota_us`).
pub(crate) fn signed_or_unlimited(text: &str) -> Result<Option<u64>, Expected> {
    let v: i64 = text
        .trim()
        .parse()
        .map_err(|_| Expected("an integer (-1 for unlimited)"))?;
    Ok(u64::try_from(v).ok())
}

/// Flat keyed: one `KEY VALUE` per line (`cpu.stat`, `cpuacct.stat`, `memory.stat`).
pub(crate) fn flat_keyed(text: &str) -> Result<Vec<(&str, u64)>, Expected> {
    const EXPECTED: Expected = Expected("lines of \"KEY INTEGER\"");
    let mut pairs = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let mut words = line.split_whitespace();
        let (Some(key), Some(value), None) = (words.next(), words.next(), words.next()) else {
            return Err(EXPECTED);
        };
        pairs.push((key, value.parse().map_err(|_| EXPECTED)?));
    }
    Ok(pairs)
}

/// The value of `key` in a flat keyed file, `None` when the key is absent.
pub(crate) fn flat_get(pairs: &[(&str, u64)], key: &str) -> Option<u64> {
    pairs.iter().find(|(k, _)| *k == key).map(|&(_, v)| v)
}

/// One line of a nested keyed file: a name and its `KEY=VALUE` pairs.
pub(crate) type NestedLine<'a> = (&'a str, Vec<(&'a str, &'a str)>);

/// Nested keyed: `NAME KEY=VALUE KEY=VALUE …` per line (`io.stat`, `io.max`, PSI).
pub(crate) fn nested_keyed(text: &str) -> Result<Vec<NestedLine<'_>>, Expected> {
    let mut lines = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let mut words = line.split_whitespace();
        let name = words.next().ok_or(Expected("a name"))?;
        let mut pairs = Vec::new();
        for word in words {
            let pair = word
                .split_once('=')
                .ok_or(Expected("lines of \"NAME KEY=VALUE KEY=VALUE ...\""))?;
            pairs.push(pair);
        }
        lines.push((name, pairs));
    }
    Ok(lines)
}

/// Newline-separated process ids (`cgroup.procs`).
pub(crate) fn pid_list(text: &str) -> Result<Vec<u32>, Expected> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| l.parse().map_err(|_| Expected("one process id per line")))
        .collect()
}

/// Space-separated words (`cgroup.controllers`, `cgroup.subtree_control`).
pub(crate) fn words(text: &str) -> Vec<&str> {
    text.split_whitespace().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_values() {
        assert_eq!(single_u64("42\n"), Ok(42));
        assert!(single_u64("max").is_err());
        assert_eq!(max_or_u64("max\n"), Ok(None));
        assert_eq!(max_or_u64("64\n"), Ok(Some(64)));
        assert!(max_or_u64("-1").is_err());
        assert_eq!(signed_or_unlimited("-1\n"), Ok(None));
        assert_eq!(signed_or_unlimited("50000\n"), Ok(Some(50000)));
        assert!(signed_or_unlimited("x").is_err());
    }

    #[test]
    fn flat_keyed_files() {
        let pairs = flat_keyed("nr_periods 10\nnr_throttled 3\n\nthrottled_time 999\n").unwrap();
        assert_eq!(flat_get(&pairs, "nr_throttled"), Some(3));
        assert_eq!(flat_get(&pairs, "throttled_time"), Some(999));
        assert_eq!(flat_get(&pairs, "nr_bursts"), None);
        assert!(flat_keyed("user x\n").is_err());
        assert!(flat_keyed("user 1 2\n").is_err());
        assert!(flat_keyed("user\n").is_err());
        assert_eq!(flat_keyed(""), Ok(vec![]));
    }

    #[test]
    fn nested_keyed_files() {
        let lines = nested_keyed("8:0 rbytes=1 wbytes=2\n254:0 rbytes=3\n").unwrap();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0], ("8:0", vec![("rbytes", "1"), ("wbytes", "2")]));
        assert_eq!(lines[1], ("254:0", vec![("rbytes", "3")]));
        assert!(nested_keyed("8:0 rbytes\n").is_err());
    }

    #[test]
    fn pid_lists() {
        assert_eq!(pid_list("1\n22\n333\n"), Ok(vec![1, 22, 333]));
        assert_eq!(pid_list(""), Ok(vec![]));
        assert!(pid_list("1\nx\n").is_err());
        assert_eq!(words("cpu io  memory\n"), vec!["cpu", "io", "memory"]);
    }
}
