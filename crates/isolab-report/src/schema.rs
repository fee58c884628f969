//! The version of isolab's machine-readable output: every JSON document and JSON line that
//! isolab prints or exports carries `schema_version` as a top-level key.

/// The current version of every JSON output. Raised when a key is removed, renamed or
/// changes meaning; a new key does not raise it, so readers ignore keys they do not know.
pub const SCHEMA_VERSION: u32 = 1;

/// `value` as a document of [`SCHEMA_VERSION`]: an object gains `schema_version`;
/// anything else (an array of rows) becomes `{"schema_version": …, key: value}`.
pub fn versioned(value: serde_json::Value, key: &str) -> serde_json::Value {
    match value {
        serde_json::Value::Object(mut map) => {
            map.insert("schema_version".into(), SCHEMA_VERSION.into());
            serde_json::Value::Object(map)
        }
        other => serde_json::json!({ "schema_version": SCHEMA_VERSION, key: other }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_gain_the_version_and_arrays_are_wrapped_under_their_key() {
        let object = versioned(serde_json::json!({"a": 1}), "rows");
        assert_eq!(
            object,
            serde_json::json!({"a": 1, "schema_version": SCHEMA_VERSION})
        );
        let rows = versioned(serde_json::json!([1, 2]), "rows");
        assert_eq!(
            rows,
            serde_json::json!({"schema_version": SCHEMA_VERSION, "rows": [1, 2]})
        );
    }
}
