//! A minimal QMP (QEMU Machine Protocol) client: the greeting, `qmp_capabilities`, and commands
//! whose replies are read line by line, skipping asynchronous events. Generic over the stream,
//! so that the encoding and parsing are tested on canned text; the real stream is the VM's
//! `UnixStream`.

use std::io::{BufRead, BufReader, Read, Write};

use serde_json::{json, Value};

/// One vCPU's host thread, from `query-cpus-fast`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VcpuThread {
    /// The vCPU index (`cpu-index`).
    pub vcpu: u32,
    /// The host thread id (`thread-id`).
    pub thread_id: i32,
}

/// A QMP session over `S`.
#[derive(Debug)]
pub struct Qmp<S: Read + Write> {
    stream: BufReader<S>,
    /// Events received while waiting for replies (their `event` names), oldest first.
    pub events: Vec<String>,
}

/// The JSON line of a command.
pub fn encode_command(execute: &str, arguments: Option<&Value>) -> String {
    let v = match arguments {
        Some(args) => json!({ "execute": execute, "arguments": args }),
        None => json!({ "execute": execute }),
    };
    format!("{v}\n")
}

impl<S: Read + Write> Qmp<S> {
    /// Reads the greeting and enters command mode (`qmp_capabilities`).
    pub fn handshake(stream: S) -> Result<Qmp<S>, String> {
        let mut qmp = Qmp {
            stream: BufReader::new(stream),
            events: Vec::new(),
        };
        let greeting = qmp.read_message()?;
        if greeting.get("QMP").is_none() {
            return Err(format!("expected the QMP greeting, got {greeting}"));
        }
        qmp.execute("qmp_capabilities", None)?;
        Ok(qmp)
    }

    fn read_message(&mut self) -> Result<Value, String> {
        let mut line = String::new();
        loop {
            line.clear();
            let n = self
                .stream
                .read_line(&mut line)
                .map_err(|e| format!("read: {e}"))?;
            if n == 0 {
                return Err("QEMU closed the connection".into());
            }
            if !line.trim().is_empty() {
                return serde_json::from_str(line.trim())
                    .map_err(|e| format!("malformed message {:?}: {e}", line.trim()));
            }
        }
    }

    /// Runs `execute` and returns its `return` value; an `error` reply is an error with QEMU's
    /// description.
    pub(crate) fn execute(
        &mut self,
        execute: &str,
        arguments: Option<&Value>,
    ) -> Result<Value, String> {
        let line = encode_command(execute, arguments);
        let w = self.stream.get_mut();
        w.write_all(line.as_bytes())
            .and_then(|()| w.flush())
            .map_err(|e| format!("write {execute}: {e}"))?;
        loop {
            let msg = self.read_message()?;
            if let Some(event) = msg.get("event") {
                self.events
                    .push(event.as_str().unwrap_or_default().to_owned());
                continue;
            }
            if let Some(ret) = msg.get("return") {
                return Ok(ret.clone());
            }
            if let Some(err) = msg.get("error") {
                let class = err.get("class").and_then(Value::as_str).unwrap_or("Error");
                let desc = err.get("desc").and_then(Value::as_str).unwrap_or("");
                return Err(format!("{execute}: {class}: {desc}"));
            }
            return Err(format!("{execute}: unexpected reply {msg}"));
        }
    }

    /// The vCPU threads (`query-cpus-fast`).
    pub fn vcpu_threads(&mut self) -> Result<Vec<VcpuThread>, String> {
        let v = self.execute("query-cpus-fast", None)?;
        parse_cpus_fast(&v)
    }
}

/// Parses the `return` of `query-cpus-fast`: a list of objects with `cpu-index` and
/// `thread-id`, sorted by vCPU.
pub fn parse_cpus_fast(v: &Value) -> Result<Vec<VcpuThread>, String> {
    let list = v
        .as_array()
        .ok_or_else(|| format!("query-cpus-fast: expected a list, got {v}"))?;
    let mut out = Vec::with_capacity(list.len());
    for cpu in list {
        let vcpu = cpu
            .get("cpu-index")
            .and_then(Value::as_u64)
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| format!("query-cpus-fast: no cpu-index in {cpu}"))?;
        let thread_id = cpu
            .get("thread-id")
            .and_then(Value::as_i64)
            .and_then(|n| i32::try_from(n).ok())
            .ok_or_else(|| format!("query-cpus-fast: no thread-id in {cpu}"))?;
        out.push(VcpuThread { vcpu, thread_id });
    }
    out.sort_by_key(|t| t.vcpu);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    /// Replies from a canned text; records what was written.
    #[derive(Debug)]
    struct Canned {
        input: Cursor<Vec<u8>>,
        output: Vec<u8>,
    }

    impl Read for Canned {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            self.input.read(buf)
        }
    }

    impl Write for Canned {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.output.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    const GREETING: &str = r#"{"QMP": {"version": {"qemu": {"micro": 22, "minor": 2, "major": 7}, "package": "Debian 1:7.2+dfsg-7+deb12u18+b3"}, "capabilities": ["oob"]}}"#;

    const CPUS_FAST: &str = r#"{"return": [{"thread-id": 4242, "props": {"core-id": 0, "thread-id": 0, "node-id": 0, "socket-id": 0}, "qom-path": "/machine/unattached/device[0]", "cpu-index": 0, "target": "x86_64"}, {"thread-id": 4243, "props": {"core-id": 0, "thread-id": 0, "socket-id": 1}, "qom-path": "/machine/unattached/device[1]", "cpu-index": 1, "target": "x86_64"}]}"#;

    fn session(replies: &[&str]) -> Qmp<Canned> {
        let mut text = String::new();
        for r in replies {
            text.push_str(r);
            text.push_str("\r\n");
        }
        Qmp::handshake(Canned {
            input: Cursor::new(text.into_bytes()),
            output: Vec::new(),
        })
        .unwrap()
    }

    #[test]
    fn cpus_fast_through_a_session_with_an_event() {
        let mut qmp = session(&[
            GREETING,
            r#"{"return": {}}"#,
            r#"{"timestamp": {"seconds": 1, "microseconds": 2}, "event": "RESUME"}"#,
            CPUS_FAST,
        ]);
        let threads = qmp.vcpu_threads().unwrap();
        assert_eq!(
            threads,
            [
                VcpuThread {
                    vcpu: 0,
                    thread_id: 4242
                },
                VcpuThread {
                    vcpu: 1,
                    thread_id: 4243
                }
            ]
        );
        assert_eq!(qmp.events, ["RESUME"]);
        let written = String::from_utf8(qmp.stream.get_ref().output.clone()).unwrap();
        assert_eq!(
            written,
            "{\"execute\":\"qmp_capabilities\"}\n{\"execute\":\"query-cpus-fast\"}\n"
        );
    }

    #[test]
    fn errors_and_bad_replies() {
        let mut qmp = session(&[
            GREETING,
            r#"{"return": {}}"#,
            r#"{"error": {"class": "CommandNotFound", "desc": "The command nope has not been found"}}"#,
        ]);
        let e = qmp.execute("nope", None).unwrap_err();
        assert_eq!(
            e,
            "nope: CommandNotFound: The command nope has not been found"
        );
        assert!(qmp.execute("quit", None).unwrap_err().contains("closed"));
        assert!(parse_cpus_fast(&json!({"a": 1})).is_err());
        assert!(parse_cpus_fast(&json!([{"cpu-index": 0}]))
            .unwrap_err()
            .contains("thread-id"));
        let bad = Qmp::handshake(Canned {
            input: Cursor::new(b"{\"return\": {}}\n".to_vec()),
            output: Vec::new(),
        });
        assert!(bad.unwrap_err().contains("greeting"));
        let line = encode_command(
            "human-monitor-command",
            Some(&json!({"command-line": "info cpus"})),
        );
        assert!(line.ends_with('\n'));
        let v: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(
            v,
            json!({"execute": "human-monitor-command", "arguments": {"command-line": "info cpus"}})
        );
    }
}
