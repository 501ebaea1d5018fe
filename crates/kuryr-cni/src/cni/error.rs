//! The spec's error JSON (`{"cniVersion","code","msg","details"}`) and its codes.

use serde::{Deserialize, Serialize};

/// Error codes: 1–99 are the spec's, 100+ are kuryr's own.
pub mod codes {
    pub const INCOMPATIBLE_VERSION: u32 = 1;
    pub const UNSUPPORTED_FIELD: u32 = 2;
    /// The container (pod) is unknown or gone.
    pub const UNKNOWN_CONTAINER: u32 = 3;
    pub const INVALID_ENV: u32 = 4;
    pub const IO_FAILURE: u32 = 5;
    pub const DECODING_FAILURE: u32 = 6;
    pub const INVALID_NETCONF: u32 = 7;
    pub const TRY_AGAIN_LATER: u32 = 11;
    /// STATUS: the plugin cannot serve ADDs now (CNI 1.1).
    pub const PLUGIN_NOT_AVAILABLE: u32 = 50;
    /// Unexpected daemon-side failure.
    pub const INTERNAL: u32 = 100;
    /// Netlink failed while binding or unbinding an interface.
    pub const BINDING_FAILED: u32 = 101;
    /// CHECK found the interface missing or different from the KuryrPort.
    pub const CHECK_FAILED: u32 = 102;
    /// The daemon and plugin disagree on the protocol (mixed versions during an upgrade).
    pub const PROTOCOL: u32 = 103;
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("CNI error {code}: {msg}{}", if details.is_empty() { String::new() } else { format!(" ({details})") })]
pub struct CniError {
    pub code: u32,
    pub msg: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub details: String,
}

impl CniError {
    pub fn new(code: u32, msg: impl Into<String>, details: impl Into<String>) -> Self {
        Self {
            code,
            msg: msg.into(),
            details: details.into(),
        }
    }

    /// The JSON a plugin prints on stdout (exit code 1) for this error.
    pub fn to_json(&self, cni_version: &str) -> serde_json::Value {
        let mut v = serde_json::json!({
            "cniVersion": cni_version,
            "code": self.code,
            "msg": self.msg,
        });
        if !self.details.is_empty() {
            v["details"] = self.details.clone().into();
        }
        v
    }

    /// Short label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self.code {
            codes::UNKNOWN_CONTAINER => "pod_gone",
            codes::TRY_AGAIN_LATER => "try_again",
            codes::BINDING_FAILED => "binding_failed",
            codes::CHECK_FAILED => "check_failed",
            1..=10 => "invalid_request",
            _ => "error",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_json_has_spec_fields_and_omits_empty_details() {
        let e = CniError::new(codes::TRY_AGAIN_LATER, "VIF not active", "");
        let v = e.to_json("1.0.0");
        assert_eq!(v["cniVersion"], "1.0.0");
        assert_eq!(v["code"], 11);
        assert_eq!(v["msg"], "VIF not active");
        assert!(v.get("details").is_none());
        let v = CniError::new(4, "m", "d").to_json("0.4.0");
        assert_eq!(v["details"], "d");
    }
}
