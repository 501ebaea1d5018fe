//! The CNI plugin: reads the runtime's env and stdin, answers VERSION itself, forwards everything else to
//! kuryr-daemon over its unix socket and prints the result or the spec's error JSON (exit code 1).
//! `kuryr-cni --version` prints the build's version line for people.

use std::io::{Read, Write};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use kuryr_cni::cni::{codes, CniError, CniRequest};
use kuryr_cni::protocol::{self, DaemonResponse};

/// ADD waits up to the daemon's add timeout (60 s by default); answer a little after it.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(75);

fn main() -> ExitCode {
    // Runtimes run plugins without arguments (CNI passes everything in the environment and on stdin), so
    // this can only be someone asking; answered before stdin is read, which would wait for a terminal.
    if std::env::args_os().nth(1).is_some_and(|a| a == "--version") {
        return match writeln!(std::io::stdout().lock(), "{}", kuryr_version::line("kuryr-cni")) {
            Ok(()) => ExitCode::SUCCESS,
            Err(_) => ExitCode::FAILURE,
        };
    }
    let mut stdin = Vec::new();
    if let Err(e) = std::io::stdin().read_to_end(&mut stdin) {
        let err = CniError::new(codes::IO_FAILURE, "cannot read stdin", e.to_string());
        return fail(&err, &CniRequest::error_version(&stdin));
    }
    if std::env::var("CNI_COMMAND").as_deref() == Ok("VERSION") {
        return print(&CniRequest::version_reply(&stdin));
    }
    let req = match CniRequest::parse(|k| std::env::var(k).ok(), &stdin) {
        Ok(r) => r,
        Err(e) => return fail(&e, &CniRequest::error_version(&stdin)),
    };
    let version = req.version.as_str();
    let socket = req
        .config
        .socket_path
        .clone()
        .unwrap_or_else(|| protocol::DEFAULT_SOCKET.into());
    let timeout = req
        .config
        .timeout_seconds
        .map(Duration::from_secs)
        .unwrap_or(DEFAULT_TIMEOUT);
    match protocol::call(Path::new(&socket), &req, timeout) {
        Ok(DaemonResponse::Ok { result: Some(r) }) => print(&r.render(req.version)),
        Ok(DaemonResponse::Ok { result: None }) => ExitCode::SUCCESS,
        Ok(DaemonResponse::Error { error }) => fail(&error, version),
        Err(e) => fail(&e, version),
    }
}

fn print(v: &serde_json::Value) -> ExitCode {
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{v}") {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::FAILURE,
    }
}

fn fail(e: &CniError, version: &str) -> ExitCode {
    let _ = print(&e.to_json(version));
    ExitCode::FAILURE
}
