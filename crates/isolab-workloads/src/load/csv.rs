//! The CSV files the generators write (JMeter's JTL, Locust's stats, vegeta's encoded
//! results), read as RFC 4180 records with the `csv` crate, streamed from the file, and
//! looked up by header name.

use std::io::Read;
use std::path::Path;

use super::{Generator, ParseError};

/// A CSV file's header, then its records one at a time, read from the file as they are
/// needed (JMeter's JTL of a long run has millions: they are never all held at once).
pub(crate) struct Csv<'a, R: Read> {
    tool: Generator,
    path: &'a Path,
    /// The header's fields.
    pub header: Vec<String>,
    records: Records<'a, R>,
}

impl<'a, R: Read> Csv<'a, R> {
    /// Reads the header of `reader` (the content of `path`), or [`ParseError::NoHeader`].
    /// Quoted fields may hold commas, doubled quotes and line breaks.
    pub fn open(tool: Generator, path: &'a Path, reader: R) -> Result<Csv<'a, R>, ParseError> {
        let mut records = Records::new(tool, path, reader);
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

    /// Reads `reader` (the content of `path`), a file without a header line whose
    /// columns are `header`.
    pub fn headless(tool: Generator, path: &'a Path, reader: R, header: &[&str]) -> Csv<'a, R> {
        Csv {
            tool,
            path,
            header: header.iter().map(|h| (*h).to_owned()).collect(),
            records: Records::new(tool, path, reader),
        }
    }

    /// The index of the column named `name`, or [`ParseError::MissingColumn`].
    pub fn column(&self, name: &str) -> Result<usize, ParseError> {
        column(self.tool, self.path, &self.header, name)
    }
}

/// The index of the column named `name` in `header`, or [`ParseError::MissingColumn`].
fn column(
    tool: Generator,
    path: &Path,
    header: &[String],
    name: &str,
) -> Result<usize, ParseError> {
    header
        .iter()
        .position(|h| h == name)
        .ok_or_else(|| ParseError::MissingColumn {
            tool,
            path: path.to_owned(),
            column: name.to_owned(),
            header: super::excerpt(&header.join(",")),
        })
}

impl<R: Read> Iterator for Csv<'_, R> {
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
    /// Reads all of `reader` (the content of `path`), as [`Csv`] does.
    pub fn parse(tool: Generator, path: &Path, reader: impl Read) -> Result<Table, ParseError> {
        let mut csv = Csv::open(tool, path, reader)?;
        let rows = csv.by_ref().collect::<Result<_, _>>()?;
        Ok(Table {
            header: csv.header,
            rows,
        })
    }

    /// The index of the column named `name`, or [`ParseError::MissingColumn`].
    pub fn column(&self, tool: Generator, path: &Path, name: &str) -> Result<usize, ParseError> {
        column(tool, path, &self.header, name)
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

/// What the records' line numbers and the truncation check need of the bytes read: the
/// double quotes counted, and the offsets of the line feeds read but not yet passed.
/// RFC 4180 quotes come in pairs (a quoted field's two, and `""` inside it), so an odd
/// count at the end means the text ended inside a quoted field — a truncated file, which
/// the `csv` crate would read as a last record cut short.
struct Counted<R> {
    inner: R,
    /// Bytes read so far.
    offset: u64,
    quotes: u64,
    /// Offsets of the line feeds read ahead of the current record.
    line_feeds: std::collections::VecDeque<u64>,
    /// Line feeds before the current record.
    lines: u64,
}

impl<R> Counted<R> {
    /// The line (from 1) of the first byte at or after `offset` that is not a line
    /// feed, for offsets that never decrease. The `csv` crate gives a record the offset
    /// where the blank lines it skipped before it begin.
    fn line_at(&mut self, offset: u64) -> usize {
        let mut next = offset;
        while let Some(&o) = self.line_feeds.front() {
            if o > next {
                break;
            }
            if o == next {
                next += 1;
            }
            self.line_feeds.pop_front();
            self.lines += 1;
        }
        self.lines as usize + 1
    }
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        for (i, &b) in buf[..n].iter().enumerate() {
            match b {
                b'"' => self.quotes += 1,
                b'\n' => self.line_feeds.push_back(self.offset + i as u64),
                _ => {}
            }
        }
        self.offset += n as u64;
        Ok(n)
    }
}

/// The records of a CSV text, each with the line it starts on; blank lines are
/// skipped, and a carriage return before a line feed is not part of the last field.
struct Records<'a, R: Read> {
    tool: Generator,
    path: &'a Path,
    reader: csv::Reader<Counted<R>>,
    record: csv::StringRecord,
    /// The line of the last record returned.
    last_line: usize,
}

impl<'a, R: Read> Records<'a, R> {
    fn new(tool: Generator, path: &'a Path, reader: R) -> Records<'a, R> {
        let reader = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            // Lines end at a line feed; a carriage return before it is stripped below,
            // so that line numbers count line feeds as an editor does.
            .terminator(csv::Terminator::Any(b'\n'))
            .from_reader(Counted {
                inner: reader,
                offset: 0,
                quotes: 0,
                line_feeds: Default::default(),
                lines: 0,
            });
        Records {
            tool,
            path,
            reader,
            record: csv::StringRecord::new(),
            last_line: 1,
        }
    }

    fn error(&self, line: usize, reason: String, excerpt: String) -> ParseError {
        ParseError::BadRow {
            tool: self.tool,
            path: self.path.to_owned(),
            line,
            reason,
            excerpt,
        }
    }
}

impl<R: Read> Iterator for Records<'_, R> {
    type Item = Result<(usize, Vec<String>), ParseError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            match self.reader.read_record(&mut self.record) {
                Ok(true) => {}
                Ok(false) if self.reader.get_ref().quotes % 2 == 1 => {
                    // Reported once: the next call finds the reader done and even.
                    self.reader.get_mut().quotes = 0;
                    return Some(Err(self.error(
                        self.last_line,
                        "the file ends inside a quoted field (a truncated file?)".to_owned(),
                        String::new(),
                    )));
                }
                Ok(false) => return None,
                Err(e) => {
                    let line = match e.position() {
                        Some(p) => self.reader.get_mut().line_at(p.byte()),
                        None => self.last_line,
                    };
                    return Some(Err(self.error(line, e.to_string(), String::new())));
                }
            }
            let start = self.record.position().map_or(0, |p| p.byte());
            let line = self.reader.get_mut().line_at(start);
            let mut fields: Vec<String> = self.record.iter().map(str::to_owned).collect();
            if let Some(last) = fields.last_mut() {
                if last.ends_with('\r') {
                    last.pop();
                }
            }
            if fields.len() == 1 && fields[0].is_empty() {
                continue; // a blank line
            }
            self.last_line = line;
            return Some(Ok((line, fields)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> Result<Table, ParseError> {
        Table::parse(Generator::Jmeter, Path::new("t.csv"), text.as_bytes())
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

    #[test]
    fn crlf_files_blank_lines_and_quoted_line_breaks_keep_editor_line_numbers() {
        let text = "a,b\r\n\r\n1,\"x\r\ny\"\r\n\n\n2,3\r\n4";
        let mut csv = Csv::open(Generator::Jmeter, Path::new("t.csv"), text.as_bytes()).unwrap();
        assert_eq!(csv.header, ["a", "b"]);
        assert_eq!(
            csv.next().unwrap().unwrap(),
            (3, vec!["1".into(), "x\r\ny".into()])
        );
        assert_eq!(
            csv.next().unwrap().unwrap(),
            (7, vec!["2".into(), "3".into()])
        );
        let e = csv.next().unwrap().unwrap_err().to_string();
        assert!(e.contains("t.csv line 8") && e.contains("1 fields"), "{e}");
        assert!(csv.next().is_none());
    }
}
