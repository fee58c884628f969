//! The CSV files the generators write (JMeter's JTL, Locust's stats, vegeta's encoded
//! results), read as RFC 4180 records and looked up by header name.

use super::{Generator, ParseError};
use std::path::Path;

/// A CSV file's header and records, each record with its 1-based line number.
#[derive(Debug)]
pub(crate) struct Table {
    pub header: Vec<String>,
    pub rows: Vec<(usize, Vec<String>)>,
}

impl Table {
    /// Reads `text` (the content of `path`) whose first record is a header. Quoted
    /// fields may hold commas, doubled quotes and line breaks. A file that ends inside
    /// a quoted field, or a record with another number of fields than the header, is
    /// truncated or not the expected file: both are errors naming the line.
    pub fn parse(tool: Generator, path: &Path, text: &str) -> Result<Table, ParseError> {
        let mut records = records(tool, path, text)?.into_iter();
        let header = match records.next() {
            Some((_, h)) if h.iter().any(|f| !f.trim().is_empty()) => h,
            _ => {
                return Err(ParseError::NoHeader {
                    tool,
                    path: path.to_owned(),
                })
            }
        };
        let mut rows = Vec::new();
        for (line, fields) in records {
            if fields.len() != header.len() {
                return Err(ParseError::BadRow {
                    tool,
                    path: path.to_owned(),
                    line,
                    reason: format!(
                        "{} fields where the header has {} (a truncated file?)",
                        fields.len(),
                        header.len()
                    ),
                    excerpt: super::excerpt(&fields.join(",")),
                });
            }
            rows.push((line, fields));
        }
        Ok(Table { header, rows })
    }

    /// The index of the column named `name`, or [`ParseError::MissingColumn`].
    pub fn column(&self, tool: Generator, path: &Path, name: &str) -> Result<usize, ParseError> {
        self.header
            .iter()
            .position(|h| h == name)
            .ok_or_else(|| ParseError::MissingColumn {
                tool,
                path: path.to_owned(),
                column: name.to_owned(),
                header: super::excerpt(&self.header.join(",")),
            })
    }
}

/// A field of a record as a finite number, or [`ParseError::BadRow`] naming the column.
pub(crate) fn number(
    tool: Generator,
    path: &Path,
    line: usize,
    column: &str,
    text: &str,
) -> Result<f64, ParseError> {
    match text.trim().parse::<f64>() {
        Ok(x) if x.is_finite() => Ok(x),
        _ => Err(ParseError::BadRow {
            tool,
            path: path.to_owned(),
            line,
            reason: format!("column `{column}` is {text:?}, not a number"),
            excerpt: String::new(),
        }),
    }
}

/// Splits `text` into records of fields, each with the line it starts on; blank lines
/// are skipped.
fn records(
    tool: Generator,
    path: &Path,
    text: &str,
) -> Result<Vec<(usize, Vec<String>)>, ParseError> {
    let mut out = Vec::new();
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut line = 1;
    let mut start_line = 1;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if quoted {
            match c {
                '"' if chars.peek() == Some(&'"') => {
                    chars.next();
                    field.push('"');
                }
                '"' => quoted = false,
                _ => {
                    if c == '\n' {
                        line += 1;
                    }
                    field.push(c);
                }
            }
            continue;
        }
        match c {
            '"' => quoted = true,
            ',' => fields.push(std::mem::take(&mut field)),
            '\r' if chars.peek() == Some(&'\n') => {}
            '\n' => {
                fields.push(std::mem::take(&mut field));
                if !(fields.len() == 1 && fields[0].is_empty()) {
                    out.push((start_line, std::mem::take(&mut fields)));
                }
                fields.clear();
                line += 1;
                start_line = line;
            }
            _ => field.push(c),
        }
    }
    if quoted {
        return Err(ParseError::BadRow {
            tool,
            path: path.to_owned(),
            line: start_line,
            reason: "the file ends inside a quoted field (a truncated file?)".to_owned(),
            excerpt: super::excerpt(&field),
        });
    }
    if !field.is_empty() || !fields.is_empty() {
        fields.push(field);
        out.push((start_line, fields));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> Result<Table, ParseError> {
        Table::parse(Generator::Jmeter, Path::new("t.csv"), text)
    }

    #[test]
    fn quoted_fields_keep_commas_quotes_and_line_breaks() {
        let t = table("a,b,c\r\n1,\"x, \"\"y\"\"\",3\n\n4,\"two\nlines\",6").unwrap();
        assert_eq!(t.header, ["a", "b", "c"]);
        assert_eq!(
            t.rows,
            [
                (2, vec!["1".into(), "x, \"y\"".into(), "3".into()]),
                (4, vec!["4".into(), "two\nlines".into(), "6".into()]),
            ]
        );
        assert_eq!(
            t.column(Generator::Jmeter, Path::new("t.csv"), "c")
                .unwrap(),
            2
        );
    }

    #[test]
    fn truncated_and_headerless_files_are_errors_naming_the_line() {
        let e = table("a,b\n1,2\n3").unwrap_err().to_string();
        assert!(e.contains("t.csv line 3") && e.contains("1 fields"), "{e}");
        let e = table("a,b\n1,\"2").unwrap_err().to_string();
        assert!(e.contains("inside a quoted field"), "{e}");
        let e = table("").unwrap_err().to_string();
        assert!(e.contains("no header"), "{e}");
        let t = table("a,b\n").unwrap();
        let e = t
            .column(Generator::Jmeter, Path::new("t.csv"), "elapsed")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("no column `elapsed`") && e.contains("a,b"),
            "{e}"
        );
    }
}
