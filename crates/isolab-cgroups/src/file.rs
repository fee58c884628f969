//! Reading and writing cgroup interface files, with errors that name the path and,
//! for writes, the data.

use std::fs;
use std::io::{self, Write};
use std::path::Path;

use crate::error::Error;
use crate::format::Expected;

/// Whether a read error means "this file is not provided here": absent (controller
/// off, old kernel, cgroup gone), or present but disabled (`cgroup.pressure` = 0
/// makes the `*.pressure` files fail with `EOPNOTSUPP`).
fn is_absent(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::NotFound
        || matches!(e.raw_os_error(), Some(libc::ENODEV | libc::EOPNOTSUPP))
}

/// The text of a file of a kernel pseudo file system (procfs, cgroupfs), whose
/// size reads as 0: one `open`, reads into a 4 KiB buffer (doubled when full) until
/// end of file, `close`. `fs::read_to_string` asks for the size first (`statx`) and,
/// told 0, probes with 32 bytes and grows from there: /proc/self/mountinfo took
/// nine reads.
pub fn read_pseudo_file(path: &Path) -> io::Result<String> {
    use std::io::Read;
    let mut file = fs::File::open(path)?;
    let mut buf = vec![0u8; 4096];
    let mut len = 0;
    loop {
        if len == buf.len() {
            buf.resize(len * 2, 0);
        }
        match file.read(&mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(len);
    String::from_utf8(buf).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// The file's text, or an error naming it.
pub(crate) fn read(path: &Path) -> Result<String, Error> {
    read_pseudo_file(path).map_err(|source| Error::Read {
        path: path.to_owned(),
        source,
    })
}

/// The file's text, `None` when the file is not provided (see [`is_absent`]).
pub(crate) fn read_opt(path: &Path) -> Result<Option<String>, Error> {
    match read_pseudo_file(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if is_absent(&e) => Ok(None),
        Err(source) => Err(Error::Read {
            path: path.to_owned(),
            source,
        }),
    }
}

/// Applies a pure parser to text read from `path`, naming the path on failure.
pub(crate) fn parse<'t, T>(
    path: &Path,
    text: &'t str,
    parser: impl FnOnce(&'t str) -> Result<T, Expected>,
) -> Result<T, Error> {
    parser(text).map_err(|Expected(expected)| Error::Parse {
        path: path.to_owned(),
        found: text.trim_end().to_owned(),
        expected,
    })
}

/// Reads and parses an optional file: `None` when it is not provided.
pub(crate) fn read_parsed_opt<T>(
    path: &Path,
    parser: impl FnOnce(&str) -> Result<T, Expected>,
) -> Result<Option<T>, Error> {
    match read_opt(path)? {
        Some(text) => parse(path, &text, parser).map(Some),
        None => Ok(None),
    }
}

/// Writes `data` to an existing file in one `write(2)`, as the kernel expects.
pub(crate) fn write(path: &Path, data: &str) -> Result<(), Error> {
    let result = fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .and_then(|mut f| f.write_all(data.as_bytes()));
    result.map_err(|source| Error::Write {
        path: path.to_owned(),
        data: data.to_owned(),
        source,
    })
}

/// Like [`write`], but an absent file becomes [`Error::MissingFile`] saying which
/// limit needed it.
pub(crate) fn write_limit(path: &Path, data: &str, needed_for: &'static str) -> Result<(), Error> {
    match write(path, data) {
        Err(Error::Write { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
            Err(Error::MissingFile {
                path: path.to_owned(),
                needed_for,
            })
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::single_u64;

    #[test]
    fn errors_name_the_path_and_data() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("cpu.max");
        assert!(read_opt(&missing).unwrap().is_none());
        let err = read(&missing).unwrap_err().to_string();
        assert!(err.contains("cpu.max"), "{err}");
        let err = write(&missing, "50000 100000").unwrap_err().to_string();
        assert!(
            err.starts_with("cannot write \"50000 100000\" to "),
            "{err}"
        );
        assert!(err.contains("cpu.max"), "{err}");
        let err = write_limit(&missing, "1", "swap limit")
            .unwrap_err()
            .to_string();
        assert!(err.contains("swap limit"), "{err}");
    }

    #[test]
    fn writes_replace_content_and_parse_errors_show_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pids.current");
        fs::write(&path, "123456").unwrap();
        write(&path, "7").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "7");
        assert_eq!(read_parsed_opt(&path, single_u64).unwrap(), Some(7));
        fs::write(&path, "seven\n").unwrap();
        let err = read_parsed_opt(&path, single_u64).unwrap_err().to_string();
        assert!(
            err.contains("pids.current") && err.contains("\"seven\""),
            "{err}"
        );
    }
}
