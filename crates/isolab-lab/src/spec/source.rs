//! Where a spec came from, and turning byte spans into `file:line:col`.

use std::fmt;
use std::ops::Range;

/// The text of a spec and the name it is reported under (a path, or a label such as
/// `built-in quick-start` or `stored spec of experiment 3`).
#[derive(Debug, Clone)]
pub struct Source {
    /// File name or label used in messages.
    pub name: String,
    /// The TOML text.
    pub text: String,
}

/// A 1-based line and column in a [`Source`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Location {
    /// 1-based line.
    pub line: usize,
    /// 1-based column, counted in characters.
    pub col: usize,
}

impl Source {
    /// A spec read from `name` with contents `text`.
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> Self {
        Source {
            name: name.into(),
            text: text.into(),
        }
    }

    /// Line and column of byte offset `offset` (clamped to the text).
    pub fn locate(&self, offset: usize) -> Location {
        let offset = offset.min(self.text.len());
        let before = &self.text[..floor_char_boundary(&self.text, offset)];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let col = before[line_start..].chars().count() + 1;
        Location { line, col }
    }

    /// A [`SpecError`] at `span` with `message`.
    pub fn error(&self, span: Option<Range<usize>>, message: impl Into<String>) -> SpecError {
        SpecError {
            file: self.name.clone(),
            location: span.map(|s| self.locate(s.start)),
            message: message.into(),
        }
    }
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// An error in a spec, with the file, line and column it refers to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError {
    /// File name or label of the spec.
    pub file: String,
    /// Where in the file, when known.
    pub location: Option<Location>,
    /// What is wrong and what was expected.
    pub message: String,
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.location {
            Some(l) => write!(f, "{}:{}:{}: {}", self.file, l.line, l.col, self.message),
            None => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

impl std::error::Error for SpecError {}

/// Several spec errors found in one pass, reported together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecErrors(pub Vec<SpecError>);

impl fmt::Display for SpecErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for SpecErrors {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locates_lines_and_columns() {
        let s = Source::new("x.toml", "a = 1\nbé = 2\n");
        assert_eq!(s.locate(0), Location { line: 1, col: 1 });
        assert_eq!(s.locate(6), Location { line: 2, col: 1 });
        // "bé = " : 'é' is two bytes but one column.
        assert_eq!(s.locate(11), Location { line: 2, col: 5 });
        assert_eq!(s.locate(999), Location { line: 3, col: 1 });
    }

    #[test]
    fn formats_like_a_compiler() {
        let s = Source::new("x.toml", "a = 1\n");
        let e = s.error(Some(4..5), "expected a string");
        assert_eq!(e.to_string(), "x.toml:1:5: expected a string");
    }
}
