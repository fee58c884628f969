//! The CSV files the generators write (JMeter's JTL, Locust's stats, vegeta's encoded
//! results), read as RFC 4180 records and looked up by header name.

use super::{Generator, ParseError};
use std::path::Path;

/// A CSV file's header, then its records one at a time (JMeter's JTL of a long run has
/// millions: they are never all held at once).
pub(crate) struct Csv<'a> {
    tool: Generator,
    path: &'a Path,
    /// The header's fields.
    pub header: Vec<String>,
    records: Records<'a>,
}

impl<'a> Csv<'a> {
    /// Reads the header of `text` (the content of `path`), or [`ParseError::NoHeader`].
    /// Quoted fields may hold commas, doubled quotes and line breaks.
    pub fn open(tool: Generator, path: &'a Path, text: &'a str) -> Result<Csv<'a>, ParseError> {
        let mut records = Records {
            tool,
            path,
            chars: text.chars().peekable(),
            line: 1,
        };
        let header = match records.next().transpose()? {
            Some((_, h)) if h.iter().any(|f| !f.trim().is_empty()) => h,
            _ => {
                return Err(ParseError::NoHeader {
                    tool,
                    path: path.to_owned(),
                })
            }
        };
        Ok(Csv {
            tool,
            path,
            header,
            records,
        })
    }

    /// Reads `text` (the content of `path`), a file without a header line whose
    /// columns are `header`.
    pub fn headless(tool: Generator, path: &'a Path, text: &'a str, header: &[&str]) -> Csv<'a> {
        Csv {
            tool,
            path,
            header: header.iter().map(|h| (*h).to_owned()).collect(),
            records: Records {
                tool,
                path,
                chars: text.chars().peekable(),
                line: 1,
            },
        }
    }

    /// The index of the column named `name`, or [`ParseError::MissingColumn`].
    pub fn column(&self, name: &str) -> Result<usize, ParseError> {
        self.header
            .iter()
            .position(|h| h == name)
            .ok_or_else(|| ParseError::MissingColumn {
                tool: self.tool,
                path: self.path.to_owned(),
                column: name.to_owned(),
                header: super::excerpt(&self.header.join(",")),
            })
    }
}

impl Iterator for Csv<'_> {
    type Item = Result<(usize, Vec<String>), ParseError>;

    /// The next record with the line it starts on. A file that ends inside a quoted
    /// field, or a record with another number of fields than the header, is truncated or
    /// not the expected file: both are errors naming the line.
    fn next(&mut self) -> Option<Self::Item> {
        let (line, fields) = match self.records.next()? {
            Ok(r) => r,
            Err(e) => return Some(Err(e)),
        };
        if fields.len() != self.header.len() {
            return Some(Err(ParseError::BadRow {
                tool: self.tool,
                path: self.path.to_owned(),
                line,
                reason: format!(
                    "{} fields where the header has {} (a truncated file?)",
                    fields.len(),
                    self.header.len()
                ),
                excerpt: super::excerpt(&fields.join(",")),
            }));
        }
        Some(Ok((line, fields)))
    }
}

/// A small CSV file's header and all its records (Locust's statistics).
#[derive(Debug)]
pub(crate) struct Table {
    pub header: Vec<String>,
    pub rows: Vec<(usize, Vec<String>)>,
}

impl Table {
    /// Reads all of `text` (the content of `path`), as [`Csv`] does.
    pub fn parse(tool: Generator, path: &Path, text: &str) -> Result<Table, ParseError> {
        let mut csv = Csv::open(tool, path, text)?;
        let rows = csv.by_ref().collect::<Result<_, _>>()?;
        Ok(Table {
            header: csv.header,
            rows,
        })
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

/// The records of a CSV text, each with the line it starts on; blank lines are
/// skipped.
struct Records<'a> {
    tool: Generator,
    path: &'a Path,
    chars: std::iter::Peekable<std::str::Chars<'a>>,
    line: usize,
}

impl Iterator for Records<'_> {
    type Item = Result<(usize, Vec<String>), ParseError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let start_line = self.line;
            let mut fields = Vec::new();
            let mut field = String::new();
            let mut quoted = false;
            let mut ended = false;
            while let Some(c) = self.chars.next() {
                if quoted {
                    match c {
                        '"' if self.chars.peek() == Some(&'"') => {
                            self.chars.next();
                            field.push('"');
                        }
                        '"' => quoted = false,
                        _ => {
                            if c == '\n' {
                                self.line += 1;
                            }
                            field.push(c);
                        }
                    }
                    continue;
                }
                match c {
                    '"' => quoted = true,
                    ',' => fields.push(std::mem::take(&mut field)),
                    '\r' if self.chars.peek() == Some(&'\n') => {}
                    '\n' => {
                        self.line += 1;
                        ended = true;
                        break;
                    }
                    _ => field.push(c),
                }
            }
            if quoted {
                return Some(Err(ParseError::BadRow {
                    tool: self.tool,
                    path: self.path.to_owned(),
                    line: start_line,
                    reason: "the file ends inside a quoted field (a truncated file?)".to_owned(),
                    excerpt: super::excerpt(&field),
                }));
            }
            if !ended && field.is_empty() && fields.is_empty() {
                return None; // end of the text
            }
            if field.is_empty() && fields.is_empty() {
                continue; // a blank line
            }
            fields.push(field);
            return Some(Ok((start_line, fields)));
        }
    }
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
