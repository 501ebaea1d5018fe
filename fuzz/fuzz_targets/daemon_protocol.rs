//! The plugin ↔ daemon socket protocol: one JSON line each way.
//!
//! The input is what arrives on the socket. Asserts, for the daemon reading it as a request and for the
//! plugin reading it as an answer: no panic; a line that does not decode is a code-103 error (never a
//! dropped connection), and that error itself travels back intact; a line that decodes re-encodes to
//! something that decodes to the same value; a decoded ADD result renders for every spec version with
//! that version and the spec's keys.

#![no_main]

use kuryr_cni::cni::{codes, CniVersion, SUPPORTED_VERSIONS};
use kuryr_cni::protocol::{decode_request, decode_response, DaemonResponse, MAX_MESSAGE};
use libfuzzer_sys::fuzz_target;
use serde_json::json;

/// The first line as the reader on either side sees it: at most `MAX_MESSAGE` bytes, up to and
/// including the first newline; `None` when it is not UTF-8 (the reader fails and drops the connection).
fn first_line(data: &[u8]) -> Option<&str> {
    let data = &data[..data.len().min(MAX_MESSAGE)];
    let end = data
        .iter()
        .position(|b| *b == b'\n')
        .map_or(data.len(), |i| i + 1);
    std::str::from_utf8(&data[..end]).ok()
}

fn reencode<T: serde::Serialize>(v: &T) -> String {
    let mut s = serde_json::to_string(v).unwrap();
    assert!(!s.contains('\n'), "an encoded message must stay on one line: {s}");
    s.push('\n');
    s
}

fn check_request(line: &str) {
    match decode_request(line) {
        Ok(req) => {
            let again = decode_request(&reencode(&req)).expect("re-encoded request decodes");
            assert_eq!(again, req);
        }
        Err(e) => {
            assert_eq!(e.code, codes::PROTOCOL, "{e}");
            // The daemon answers with the error; the plugin must read that answer back as is.
            let answer = DaemonResponse::Error { error: e };
            let back = decode_response(&reencode(&answer)).expect("error answer decodes");
            assert_eq!(back, answer);
        }
    }
}

fn check_response(line: &str) {
    match decode_response(line) {
        Ok(resp) => {
            let again = decode_response(&reencode(&resp)).expect("re-encoded answer decodes");
            assert_eq!(again, resp);
            if let DaemonResponse::Ok { result: Some(r) } = &resp {
                for v in SUPPORTED_VERSIONS {
                    let version = CniVersion::parse(v).unwrap();
                    let out = r.render(version);
                    assert_eq!(out["cniVersion"], json!(v));
                    assert_eq!(
                        out["interfaces"].as_array().map(Vec::len),
                        Some(r.interfaces.len())
                    );
                    assert_eq!(out["ips"].as_array().map(Vec::len), Some(r.ips.len()));
                    assert_eq!(out["routes"].as_array().map(Vec::len), Some(r.routes.len()));
                    for ip in out["ips"].as_array().unwrap() {
                        assert_eq!(ip.get("version").is_some(), version.ip_has_version_field());
                    }
                    // What the plugin prints is valid JSON the runtime can read back.
                    let text = out.to_string();
                    assert_eq!(serde_json::from_str::<serde_json::Value>(&text).unwrap(), out);
                }
            }
        }
        Err(e) => assert_eq!(e.code, codes::PROTOCOL, "{e}"),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some(line) = first_line(data) else {
        return;
    };
    check_request(line);
    check_response(line);
});
