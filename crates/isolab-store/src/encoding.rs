//! How values that SQL has no type for are stored. Every backend uses the same encodings,
//! so a store can be copied from one to another column by column.
//!
//! | value | stored as |
//! |---|---|
//! | `SystemTime` | INTEGER milliseconds since the Unix epoch, UTC (negative before 1970) |
//! | `Duration` | INTEGER nanoseconds (saturating at about 292 years) |
//! | `u64` seed | TEXT, decimal (an SQL INTEGER is signed 64-bit) |
//! | `bool` | INTEGER 0 or 1 |
//! | `f64` metric | REAL; NaN, which SQL cannot hold, is stored as NULL |
//! | a run's telemetry values | BLOB: each value an IEEE-754 `f64`, little-endian (8 bytes a value, NaN kept), in recorded order; the names they are recorded under are their layout's |
//! | a telemetry layout's names | TEXT, a JSON array of the stored names in recorded order; its `digest` INTEGER the 64-bit FNV-1a hash of that text's UTF-8 bytes, as a signed integer |
//! | `Option<f64>` load interval field | REAL; `None` and NaN as NULL, read back as `None` |
//! | `u64` count (load interval requests, failures) | INTEGER, saturating at 2^63 − 1 |
//! | series points | BLOB: for each point, time then value, each an IEEE-754 `f64`, little-endian (16 bytes a point) |
//! | limits | TEXT, JSON |

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Bytes one series point takes in its BLOB.
const POINT_BYTES: usize = 16;

/// Bytes one telemetry value takes in its BLOB.
const VALUE_BYTES: usize = 8;

/// Milliseconds since the Unix epoch, truncated; saturates far outside ±292 million years.
pub(crate) fn time_to_millis(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_millis()).unwrap_or(i64::MAX),
        Err(before) => i64::try_from(before.duration().as_millis())
            .map(|ms| -ms)
            .unwrap_or(i64::MIN),
    }
}

/// The time `ms` milliseconds after the epoch, or `None` if the platform cannot represent it.
pub(crate) fn millis_to_time(ms: i64) -> Option<SystemTime> {
    let magnitude = Duration::from_millis(ms.unsigned_abs());
    if ms >= 0 {
        UNIX_EPOCH.checked_add(magnitude)
    } else {
        UNIX_EPOCH.checked_sub(magnitude)
    }
}

/// Nanoseconds, saturating at `i64::MAX` (about 292 years).
pub(crate) fn duration_to_nanos(d: Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

/// The duration of `ns` nanoseconds, or `None` when negative.
pub(crate) fn nanos_to_duration(ns: i64) -> Option<Duration> {
    u64::try_from(ns).ok().map(Duration::from_nanos)
}

/// A real for an SQL REAL column: NaN becomes NULL (SQL has no NaN).
pub(crate) fn real_to_sql(v: f64) -> Option<f64> {
    (!v.is_nan()).then_some(v)
}

/// The real read from an SQL REAL column: NULL is NaN.
pub(crate) fn sql_to_real(v: Option<f64>) -> f64 {
    v.unwrap_or(f64::NAN)
}

/// An optional real for an SQL REAL column: `None` and NaN become NULL.
pub(crate) fn optional_real_to_sql(v: Option<f64>) -> Option<f64> {
    v.and_then(real_to_sql)
}

/// A count for an SQL INTEGER column (signed 64-bit), saturating at `i64::MAX`.
pub(crate) fn count_to_sql(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Series points as a BLOB (see the module table).
pub(crate) fn encode_points(points: &[(f64, f64)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(points.len() * POINT_BYTES);
    for (t, v) in points {
        out.extend_from_slice(&t.to_le_bytes());
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

/// Series points from a BLOB, or `None` when its length is not a whole number of points.
pub(crate) fn decode_points(blob: &[u8]) -> Option<Vec<(f64, f64)>> {
    let points = blob.chunks_exact(POINT_BYTES);
    if !points.remainder().is_empty() {
        return None;
    }
    points
        .map(|point| {
            let (t, v) = point.split_at(POINT_BYTES / 2);
            Some((
                f64::from_le_bytes(t.try_into().ok()?),
                f64::from_le_bytes(v.try_into().ok()?),
            ))
        })
        .collect()
}

/// A run's telemetry values as a BLOB (see the module table).
pub(crate) fn encode_values(values: &[f64]) -> Vec<u8> {
    let mut out = Vec::with_capacity(values.len() * VALUE_BYTES);
    for v in values {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

/// Telemetry values from a BLOB, or `None` when its length is not a whole number of
/// values.
pub(crate) fn decode_values(blob: &[u8]) -> Option<Vec<f64>> {
    let values = blob.chunks_exact(VALUE_BYTES);
    if !values.remainder().is_empty() {
        return None;
    }
    // Sized once: a collect through `Option` knows no length and grows the list.
    let mut out = Vec::with_capacity(blob.len() / VALUE_BYTES);
    for v in values {
        out.push(f64::from_le_bytes(v.try_into().ok()?));
    }
    Some(out)
}

/// A telemetry layout's names as stored (see the module table).
pub(crate) fn encode_names(names: &[String]) -> String {
    serde_json::to_string(names).unwrap_or_else(|_| unreachable!("a list of strings is JSON"))
}

/// A telemetry layout's names from their stored text, or `None` when it is not a JSON
/// array of strings.
pub(crate) fn decode_names(text: &str) -> Option<Vec<String>> {
    serde_json::from_str(text).ok()
}

/// The digest a telemetry layout is looked up by: the 64-bit FNV-1a hash
/// (Fowler, Noll and Vo; offset basis 0xcbf29ce484222325, prime 0x100000001b3) of the
/// stored names' text, its bits as a signed integer. Not unique: a lookup compares the
/// names too.
pub(crate) fn names_digest(text: &str) -> i64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_round_trip_to_the_millisecond() {
        for ms in [0_i64, 1, 1_700_000_000_123, -1, -86_400_000] {
            let t = millis_to_time(ms).unwrap();
            assert_eq!(time_to_millis(t), ms);
        }
        let t = UNIX_EPOCH + Duration::new(1_700_000_000, 123_999_999);
        assert_eq!(time_to_millis(t), 1_700_000_000_123);
    }

    #[test]
    fn durations_round_trip_to_the_nanosecond() {
        let d = Duration::new(12, 345_678_901);
        assert_eq!(nanos_to_duration(duration_to_nanos(d)), Some(d));
        assert_eq!(duration_to_nanos(Duration::MAX), i64::MAX);
        assert_eq!(nanos_to_duration(-1), None);
    }

    #[test]
    fn nan_is_null_and_back() {
        assert_eq!(real_to_sql(f64::NAN), None);
        assert!(sql_to_real(None).is_nan());
        assert_eq!(real_to_sql(f64::INFINITY), Some(f64::INFINITY));
        assert_eq!(sql_to_real(Some(2.5)), 2.5);
    }

    #[test]
    fn optional_reals_and_counts() {
        assert_eq!(optional_real_to_sql(None), None);
        assert_eq!(optional_real_to_sql(Some(f64::NAN)), None);
        assert_eq!(optional_real_to_sql(Some(1.5)), Some(1.5));
        assert_eq!(count_to_sql(7), 7);
        assert_eq!(count_to_sql(u64::MAX), i64::MAX);
    }

    #[test]
    fn points_round_trip_bit_for_bit() {
        let points = vec![(0.0, 1.5), (0.1, f64::NAN), (0.2, -0.0), (1e9, f64::MAX)];
        let blob = encode_points(&points);
        assert_eq!(blob.len(), 64);
        let back = decode_points(&blob).unwrap();
        assert_eq!(back.len(), points.len());
        for ((t0, v0), (t1, v1)) in points.iter().zip(&back) {
            assert_eq!(t0.to_bits(), t1.to_bits());
            assert_eq!(v0.to_bits(), v1.to_bits());
        }
        assert_eq!(decode_points(&[]), Some(vec![]));
        assert_eq!(decode_points(&blob[..15]), None);
    }

    #[test]
    fn telemetry_values_round_trip_bit_for_bit() {
        let values = [1.5, f64::NAN, -0.0, f64::INFINITY, 1e-300];
        let blob = encode_values(&values);
        assert_eq!(blob.len(), 40);
        let back = decode_values(&blob).unwrap();
        for (a, b) in values.iter().zip(&back) {
            assert_eq!(a.to_bits(), b.to_bits());
        }
        assert_eq!(decode_values(&[]), Some(vec![]));
        assert_eq!(decode_values(&blob[..9]), None);
    }

    #[test]
    fn layout_names_round_trip_whatever_they_hold() {
        let names = vec![
            "cpu_usage_s".to_owned(),
            "a \"quoted\"\nname, with, commas".to_owned(),
            String::new(),
        ];
        let text = encode_names(&names);
        assert_eq!(decode_names(&text), Some(names));
        assert_eq!(decode_names("not json"), None);
    }

    #[test]
    fn the_digest_is_fnv_1a() {
        // The published FNV-1a 64 test vectors.
        assert_eq!(names_digest(""), 0xcbf2_9ce4_8422_2325_u64 as i64);
        assert_eq!(names_digest("a"), 0xaf63_dc4c_8601_ec8c_u64 as i64);
        assert_eq!(names_digest("foobar"), 0x8594_4171_f739_67e8_u64 as i64);
    }
}
