//! A [`ToolRunner`] for tests that records commands and answers from a script.

use std::cell::RefCell;

use isolab_tools::{NotInstalled, ToolCommand, ToolError, ToolOutput, ToolRunner};

/// Answers each command whose display starts with a prefix; records every command.
#[derive(Default)]
pub(crate) struct FakeRunner {
    pub(crate) answers: Vec<(String, Result<Vec<u8>, String>)>,
    pub(crate) log: RefCell<Vec<String>>,
}

impl FakeRunner {
    pub(crate) fn answer(mut self, prefix: &str, out: &str) -> Self {
        self.answers
            .push((prefix.to_owned(), Ok(out.as_bytes().to_vec())));
        self
    }

    pub(crate) fn fail(mut self, prefix: &str, stderr: &str) -> Self {
        self.answers
            .push((prefix.to_owned(), Err(stderr.to_owned())));
        self
    }
}

impl ToolRunner for FakeRunner {
    fn run(&self, cmd: &ToolCommand) -> Result<ToolOutput, ToolError> {
        let line = cmd.display();
        self.log.borrow_mut().push(line.clone());
        for (prefix, answer) in &self.answers {
            if line.starts_with(prefix.as_str()) {
                return match answer {
                    Ok(out) => Ok(ToolOutput {
                        stdout: out.clone(),
                        stderr: Vec::new(),
                    }),
                    Err(stderr) => Err(ToolError::Failed {
                        command: line,
                        status: "exit status: 100".into(),
                        stderr: stderr.clone(),
                    }),
                };
            }
        }
        Err(NotInstalled {
            program: cmd.program.name.clone(),
            package: cmd.program.package.clone(),
        }
        .into())
    }
}
