//! JSON on stdout: every document and every JSON line carries `schema_version`
//! ([`isolab_report::SCHEMA_VERSION`]), so scripts can tell which shape they read.

use anyhow::Result;
use serde::Serialize;

/// `value` as a pretty JSON document: an object gains `schema_version`; an array of rows
/// becomes `{"schema_version": …, key: [rows]}`.
pub fn document(key: &str, value: &impl Serialize) -> Result<String> {
    let value = isolab_report::versioned(serde_json::to_value(value)?, key);
    Ok(serde_json::to_string_pretty(&value)?)
}

/// `value` (an event object) as one compact JSON line with `schema_version`.
pub fn line(value: &impl Serialize) -> Result<String> {
    let value = isolab_report::versioned(serde_json::to_value(value)?, "event");
    Ok(serde_json::to_string(&value)?)
}
