//! Plugin ↔ daemon protocol: one newline-terminated JSON request ([`CniRequest`]) and one newline-terminated
//! JSON [`DaemonResponse`] per connection, over a unix socket only root can open (directory 0700, socket
//! 0600). No HTTP: the plugin stays a small synchronous binary and nothing listens on TCP.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::cni::{codes, CniError, CniRequest, CniResult};

/// Where the daemon listens unless configured otherwise.
pub const DEFAULT_SOCKET: &str = "/run/kuryr/cni.sock";
/// Longest line either side accepts (a request with a large prevResult stays far below).
pub const MAX_MESSAGE: usize = 1 << 20;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum DaemonResponse {
    /// `result` only for ADD.
    Ok {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<CniResult>,
    },
    Error {
        error: CniError,
    },
}

impl DaemonResponse {
    pub fn from_result(r: Result<Option<CniResult>, CniError>) -> Self {
        match r {
            Ok(result) => Self::Ok { result },
            Err(error) => Self::Error { error },
        }
    }
}

/// Decodes one request line as the daemon reads it (at most [`MAX_MESSAGE`] bytes, newline included);
/// anything that is not a [`CniRequest`] is a [`codes::PROTOCOL`] error, never a panic.
pub fn decode_request(line: &str) -> Result<CniRequest, CniError> {
    serde_json::from_str(line).map_err(|e| {
        CniError::new(
            codes::PROTOCOL,
            "kuryr-daemon cannot decode the request",
            e.to_string(),
        )
    })
}

/// Decodes the daemon's answer line as the plugin reads it; like [`decode_request`], a bad line is a
/// [`codes::PROTOCOL`] error.
pub fn decode_response(line: &str) -> Result<DaemonResponse, CniError> {
    serde_json::from_str(line).map_err(|e| {
        CniError::new(
            codes::PROTOCOL,
            "cannot decode kuryr-daemon's answer",
            e.to_string(),
        )
    })
}

/// Sends `req` to the daemon at `socket` and waits up to `timeout` for the answer. Connection failures
/// come back as code 11 with a message naming the socket, since a restarting daemon is the usual cause.
pub fn call(socket: &Path, req: &CniRequest, timeout: Duration) -> Result<DaemonResponse, CniError> {
    let unreachable = |e: std::io::Error| {
        CniError::new(
            codes::TRY_AGAIN_LATER,
            format!("kuryr-daemon is not reachable at {}: {e}", socket.display()),
            "is the kuryr-daemon pod running on this node? (kubectl -n kube-system get pods -l app=kuryr-daemon -o wide)",
        )
    };
    let mut stream = UnixStream::connect(socket).map_err(unreachable)?;
    stream.set_read_timeout(Some(timeout)).map_err(unreachable)?;
    stream
        .set_write_timeout(Some(Duration::from_secs(5)))
        .map_err(unreachable)?;
    let mut line = serde_json::to_vec(req)
        .map_err(|e| CniError::new(codes::INTERNAL, "cannot encode daemon request", e.to_string()))?;
    line.push(b'\n');
    stream.write_all(&line).map_err(unreachable)?;
    let mut reader = BufReader::new(stream).take(MAX_MESSAGE as u64);
    let mut answer = String::new();
    match reader.read_line(&mut answer) {
        Ok(0) => Err(CniError::new(
            codes::TRY_AGAIN_LATER,
            "kuryr-daemon closed the connection without answering",
            "the daemon may be restarting; see its log",
        )),
        Ok(_) => decode_response(&answer),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            Err(CniError::new(
                codes::TRY_AGAIN_LATER,
                format!(
                    "kuryr-daemon did not answer {} within {}s",
                    req.command,
                    timeout.as_secs()
                ),
                "the pod's port may still be being created; the runtime will retry",
            ))
        }
        Err(e) => Err(unreachable(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_round_trip_with_a_status_tag() {
        let ok = DaemonResponse::Ok { result: None };
        let s = serde_json::to_string(&ok).unwrap();
        assert_eq!(s, r#"{"status":"ok"}"#);
        let err = DaemonResponse::from_result(Err(CniError::new(11, "later", "")));
        let s = serde_json::to_string(&err).unwrap();
        assert_eq!(serde_json::from_str::<DaemonResponse>(&s).unwrap(), err);
    }

    // Found by fuzz/fuzz_targets/daemon_protocol.rs: without serde_json's float_roundtrip, a number in the
    // runtime's prevResult came out of the daemon's decoding one ULP off.
    #[test]
    fn numbers_in_the_netconf_reach_the_daemon_unchanged() {
        let conf = crate::cni::NetConf::parse(
            br#"{"cniVersion":"1.1.0","name":"k","type":"kuryr-cni","prevResult":{"x":444444.4444444444000000000000000003219573333613107917}}"#,
        )
        .unwrap();
        let req = CniRequest {
            command: crate::cni::Command::Gc,
            version: crate::cni::CniVersion::V110,
            container_id: String::new(),
            netns: String::new(),
            ifname: String::new(),
            pod: None,
            args: Default::default(),
            config: conf,
        };
        let line = serde_json::to_string(&req).unwrap();
        assert!(line.contains(r#"{"x":444444.4444444444}"#), "{line}");
        assert_eq!(decode_request(&line).unwrap(), req);
    }

    #[test]
    fn missing_socket_is_a_clear_try_again() {
        let req = CniRequest {
            command: crate::cni::Command::Add,
            version: crate::cni::CniVersion::V100,
            container_id: "c".into(),
            netns: "/n".into(),
            ifname: "eth0".into(),
            pod: None,
            args: Default::default(),
            config: crate::cni::NetConf::parse(br#"{"cniVersion":"1.0.0","name":"k","type":"kuryr-cni"}"#)
                .unwrap(),
        };
        let e = call(Path::new("/nonexistent/kuryr.sock"), &req, Duration::from_secs(1)).unwrap_err();
        assert_eq!(e.code, codes::TRY_AGAIN_LATER);
        assert!(e.msg.contains("/nonexistent/kuryr.sock"), "{e}");
    }
}
