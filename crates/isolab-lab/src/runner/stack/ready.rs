//! Whether a started component is ready: an HTTP status on a path, or a command
//! on the host that exits 0; each given up at a deadline, when the component exits
//! or when the run is interrupted.

use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::platform::{Interrupt, Service};

/// Waits until `GET path` on `address` answers `status`; why not, at `deadline`
/// or when the component exits or the run is interrupted.
pub(super) fn wait_http(
    address: SocketAddr,
    path: &str,
    status: u16,
    deadline: Instant,
    service: &Service<'_>,
    interrupt: &Interrupt,
) -> Result<(), String> {
    loop {
        let last = match http_status(address, path) {
            Ok(s) if s == status => return Ok(()),
            Ok(s) => format!("GET {path} answered {s}, not {status}"),
            Err(e) => format!("GET {path}: {e}"),
        };
        if !service.is_running() {
            return Err(format!("it exited ({last})"));
        }
        if interrupt.is_triggered() || Instant::now() >= deadline {
            return Err(last);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The status code of an HTTP/1.0 `GET path` on `address`.
fn http_status(address: SocketAddr, path: &str) -> std::io::Result<u16> {
    use std::io::{Read, Write};
    let mut s = TcpStream::connect_timeout(&address, Duration::from_secs(2))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        s,
        "GET {path} HTTP/1.0\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )?;
    let mut head = [0u8; 64];
    let mut n = 0;
    while n < head.len() {
        match s.read(&mut head[n..])? {
            0 => break,
            k => n += k,
        }
        if head[..n].contains(&b'\n') {
            break;
        }
    }
    let line = String::from_utf8_lossy(&head[..n]);
    line.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("not an HTTP answer: {:?}", line.trim())))
}

/// Runs `argv` on the host until it exits 0; why not, at `deadline` or when the
/// component exits or the run is interrupted.
pub(super) fn wait_command(
    argv: &[String],
    deadline: Instant,
    service: &Service<'_>,
    interrupt: &Interrupt,
) -> Result<(), String> {
    use isolab_tools::ToolRunner;
    let Some(program) = argv.first() else {
        return Err("the readiness command is empty".into());
    };
    if isolab_tools::find_program(program).is_none() {
        return Err(format!(
            "the readiness command `{program}` is not installed on the host"
        ));
    }
    let command = argv[1..]
        .iter()
        .fold(isolab_tools::ToolCommand::new(program, program), |c, a| {
            c.arg(a)
        });
    loop {
        let last = match isolab_tools::SystemTools.run(&command) {
            Ok(_) => return Ok(()),
            Err(e) => e.to_string(),
        };
        if !service.is_running() {
            return Err(format!("it exited ({last})"));
        }
        if interrupt.is_triggered() || Instant::now() >= deadline {
            return Err(last);
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}
