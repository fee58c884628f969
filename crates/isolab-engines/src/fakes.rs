//! Test doubles shared by the engines' unit tests.

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

use crate::tool::{Output, Tools};

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A fake [`Tools`]: records every argv and answers the first canned reply
/// whose pattern the joined command line contains.
#[derive(Default)]
pub(crate) struct Fake {
    pub calls: Mutex<Vec<Vec<String>>>,
    pub replies: Mutex<Vec<(String, Output)>>,
    pub missing: Vec<String>,
}

impl Fake {
    pub fn reply(&self, pattern: &str, status: i32, stdout: &str, stderr: &str) {
        lock(&self.replies).push((
            pattern.to_owned(),
            Output {
                status,
                stdout: stdout.to_owned(),
                stderr: stderr.to_owned(),
            },
        ));
    }

    pub fn calls(&self) -> Vec<String> {
        lock(&self.calls).iter().map(|c| c.join(" ")).collect()
    }
}

impl Tools for Fake {
    fn run(&self, argv: &[String]) -> std::io::Result<Output> {
        lock(&self.calls).push(argv.to_vec());
        let line = argv.join(" ");
        Ok(lock(&self.replies)
            .iter()
            .find(|(p, _)| line.contains(p.as_str()))
            .map(|(_, o)| o.clone())
            .unwrap_or(Output {
                status: 0,
                stdout: String::new(),
                stderr: String::new(),
            }))
    }

    fn which(&self, program: &str) -> Option<PathBuf> {
        if self.missing.iter().any(|m| m == program) {
            return None;
        }
        Some(if program.contains('/') {
            PathBuf::from(program)
        } else {
            PathBuf::from("/usr/bin").join(program)
        })
    }
}
