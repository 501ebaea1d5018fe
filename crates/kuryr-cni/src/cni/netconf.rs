//! The network configuration on stdin (one plugin's entry of a conflist, with `name`/`cniVersion` copied in
//! by the runtime, plus `prevResult` on chained calls).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{codes, CniError};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetConf {
    pub cni_version: String,
    pub name: String,
    #[serde(rename = "type")]
    pub plugin_type: String,
    /// Daemon socket; absent means [`crate::protocol::DEFAULT_SOCKET`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket_path: Option<String>,
    /// How long the plugin waits for the daemon's answer; absent means the daemon's ADD timeout plus margin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prev_result: Option<Value>,
    /// GC (CNI 1.1): the attachments the runtime still has; every other one may be collected.
    #[serde(
        rename = "cni.dev/valid-attachments",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub valid_attachments: Option<Vec<ValidAttachment>>,
}

/// One entry of `cni.dev/valid-attachments`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ValidAttachment {
    #[serde(rename = "containerID")]
    pub container_id: String,
    pub ifname: String,
}

impl NetConf {
    /// Parses stdin; decoding failures are code 6, missing/mistyped required fields code 7, fields kuryr
    /// cannot honour code 2.
    pub fn parse(stdin: &[u8]) -> Result<Self, CniError> {
        let raw: Value = serde_json::from_slice(stdin).map_err(|e| {
            CniError::new(
                codes::DECODING_FAILURE,
                "cannot decode network configuration on stdin",
                e.to_string(),
            )
        })?;
        let Some(obj) = raw.as_object() else {
            return Err(CniError::new(
                codes::DECODING_FAILURE,
                "network configuration on stdin is not a JSON object",
                "",
            ));
        };
        for field in ["cniVersion", "name", "type"] {
            match obj.get(field) {
                Some(Value::String(s)) if !s.is_empty() => {}
                _ => {
                    return Err(CniError::new(
                        codes::INVALID_NETCONF,
                        format!("network configuration lacks a string {field:?}"),
                        "",
                    ))
                }
            }
        }
        // Kuryr's addresses come from Neutron (the KuryrPort); a chained IPAM plugin would contradict them.
        if obj.get("ipam").is_some_and(|v| !v.is_null()) {
            return Err(CniError::new(
                codes::UNSUPPORTED_FIELD,
                "kuryr-cni does not use an IPAM plugin: remove \"ipam\" from its configuration",
                "addresses come from the pod's Neutron port",
            ));
        }
        serde_json::from_value(raw).map_err(|e| {
            CniError::new(
                codes::INVALID_NETCONF,
                "invalid kuryr-cni configuration",
                e.to_string(),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minimal_and_full_configs_parse() {
        let c = NetConf::parse(br#"{"cniVersion":"1.0.0","name":"kuryr","type":"kuryr-cni"}"#).unwrap();
        assert_eq!(c.socket_path, None);
        let c = NetConf::parse(
            br#"{"cniVersion":"0.3.1","name":"k","type":"kuryr-cni","socketPath":"/tmp/s","timeoutSeconds":5,
                "prevResult":{"interfaces":[]},"somethingElse":1}"#,
        )
        .unwrap();
        assert_eq!(c.socket_path.as_deref(), Some("/tmp/s"));
        assert_eq!(c.timeout_seconds, Some(5));
    }

    #[test]
    fn gc_valid_attachments_parse() {
        let c = NetConf::parse(
            br#"{"cniVersion":"1.1.0","name":"k","type":"kuryr-cni",
                "cni.dev/valid-attachments":[{"containerID":"abc","ifname":"eth0"}]}"#,
        )
        .unwrap();
        assert_eq!(
            c.valid_attachments,
            Some(vec![ValidAttachment {
                container_id: "abc".into(),
                ifname: "eth0".into()
            }])
        );
    }

    #[test]
    fn malformed_json_is_decoding_failure() {
        for bad in [
            &b""[..],
            b"{",
            b"not json",
            b"{\"cniVersion\":",
            b"[1,2]",
            b"\"str\"",
        ] {
            assert_eq!(
                NetConf::parse(bad).unwrap_err().code,
                codes::DECODING_FAILURE,
                "{bad:?}"
            );
        }
    }

    #[test]
    fn missing_or_mistyped_required_fields_are_invalid_netconf() {
        for bad in [
            r#"{"name":"k","type":"kuryr-cni"}"#,
            r#"{"cniVersion":"1.0.0","type":"kuryr-cni"}"#,
            r#"{"cniVersion":"1.0.0","name":"k"}"#,
            r#"{"cniVersion":1,"name":"k","type":"kuryr-cni"}"#,
            r#"{"cniVersion":"","name":"k","type":"kuryr-cni"}"#,
            r#"{"cniVersion":"1.0.0","name":"k","type":"kuryr-cni","timeoutSeconds":"x"}"#,
        ] {
            assert_eq!(
                NetConf::parse(bad.as_bytes()).unwrap_err().code,
                codes::INVALID_NETCONF,
                "{bad}"
            );
        }
    }

    #[test]
    fn ipam_is_an_unsupported_field() {
        let e = NetConf::parse(
            br#"{"cniVersion":"1.0.0","name":"k","type":"kuryr-cni","ipam":{"type":"host-local"}}"#,
        )
        .unwrap_err();
        assert_eq!(e.code, codes::UNSUPPORTED_FIELD);
    }
}
