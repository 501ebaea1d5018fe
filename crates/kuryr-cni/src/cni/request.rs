//! A CNI invocation as the runtime makes it: `CNI_*` environment plus the network configuration on stdin.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{codes, parse_cni_args, CniError, CniVersion, Command, NetConf, PodArgs};

/// One parsed ADD, DEL, CHECK, STATUS or GC (VERSION needs no parsing beyond the command).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CniRequest {
    pub command: Command,
    pub version: CniVersion,
    /// Empty for STATUS and GC.
    #[serde(default)]
    pub container_id: String,
    /// Empty for STATUS, GC and the runtime's second DEL (after the sandbox is gone).
    #[serde(default)]
    pub netns: String,
    #[serde(default)]
    pub ifname: String,
    /// Required for ADD and CHECK; DEL without it cleans up by netns only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<PodArgs>,
    #[serde(default)]
    pub args: BTreeMap<String, String>,
    pub config: NetConf,
}

impl CniRequest {
    /// Parses an invocation; `env` looks up one environment variable. Every failure is a spec error.
    pub fn parse(env: impl Fn(&str) -> Option<String>, stdin: &[u8]) -> Result<Self, CniError> {
        let command = Command::parse(&require(&env, "CNI_COMMAND")?)?;
        let config = NetConf::parse(stdin)?;
        let version = CniVersion::parse(&config.cni_version)?;
        match command {
            Command::Check if !version.has_check() => {
                return Err(CniError::new(
                    codes::INCOMPATIBLE_VERSION,
                    format!("CHECK is not defined for cniVersion {version}"),
                    "CHECK needs cniVersion 0.4.0 or later",
                ))
            }
            Command::Status | Command::Gc if !version.has_status_gc() => {
                return Err(CniError::new(
                    codes::INCOMPATIBLE_VERSION,
                    format!("{command} is not defined for cniVersion {version}"),
                    "STATUS and GC need cniVersion 1.1.0",
                ))
            }
            Command::Version => {
                return Err(CniError::new(
                    codes::INVALID_ENV,
                    "VERSION takes no request",
                    "answer it with version_reply()",
                ))
            }
            _ => {}
        }
        let args = match env("CNI_ARGS") {
            Some(raw) => parse_cni_args(&raw)?,
            None => BTreeMap::new(),
        };
        let mut req = Self {
            command,
            version,
            container_id: String::new(),
            netns: String::new(),
            ifname: String::new(),
            pod: None,
            args,
            config,
        };
        if !command.is_attachment() {
            return Ok(req);
        }
        req.container_id = require(&env, "CNI_CONTAINERID")?;
        validate_container_id(&req.container_id)?;
        req.ifname = require(&env, "CNI_IFNAME")?;
        validate_ifname(&req.ifname)?;
        req.netns = env("CNI_NETNS").unwrap_or_default();
        if command != Command::Del && req.netns.is_empty() {
            return Err(CniError::new(
                codes::INVALID_ENV,
                format!("CNI_NETNS is required for {command}"),
                "",
            ));
        }
        req.pod = match PodArgs::from_args(&req.args) {
            Ok(p) => Some(p),
            // The runtime's second DEL may come with little context; cleanup goes by netns then.
            Err(_) if command == Command::Del => None,
            Err(e) => return Err(e),
        };
        Ok(req)
    }

    /// Spec version to put in an error for this stdin, even when parsing failed.
    pub fn error_version(stdin: &[u8]) -> String {
        serde_json::from_slice::<serde_json::Value>(stdin)
            .ok()
            .and_then(|v| v.get("cniVersion").and_then(|s| s.as_str()).map(str::to_string))
            .and_then(|s| CniVersion::parse(&s).ok())
            .unwrap_or(CniVersion::LATEST)
            .as_str()
            .to_string()
    }

    /// The answer to VERSION: the runtime's version echoed (or the latest) and every supported one.
    pub fn version_reply(stdin: &[u8]) -> serde_json::Value {
        serde_json::json!({
            "cniVersion": Self::error_version(stdin),
            "supportedVersions": super::SUPPORTED_VERSIONS,
        })
    }
}

fn require(env: &impl Fn(&str) -> Option<String>, key: &str) -> Result<String, CniError> {
    env(key)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| CniError::new(codes::INVALID_ENV, format!("{key} is not set"), ""))
}

/// The spec's rule: alphanumeric first, then alphanumerics, `_`, `.`, `-`.
fn validate_container_id(id: &str) -> Result<(), CniError> {
    let mut chars = id.chars();
    let ok = chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
    if ok {
        Ok(())
    } else {
        Err(CniError::new(
            codes::INVALID_ENV,
            format!("invalid CNI_CONTAINERID {id:?}"),
            "",
        ))
    }
}

/// Linux interface names: 1–15 bytes, not `.`/`..`, no `/`, `:` or whitespace.
fn validate_ifname(name: &str) -> Result<(), CniError> {
    let ok = !name.is_empty()
        && name.len() <= 15
        && name != "."
        && name != ".."
        && !name.chars().any(|c| c == '/' || c == ':' || c.is_whitespace());
    if ok {
        Ok(())
    } else {
        Err(CniError::new(
            codes::INVALID_ENV,
            format!("invalid CNI_IFNAME {name:?}"),
            "",
        ))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    const CONF: &str = r#"{"cniVersion":"1.0.0","name":"kuryr","type":"kuryr-cni"}"#;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| m.get(k).cloned()
    }

    fn add_env() -> Vec<(&'static str, &'static str)> {
        vec![
            ("CNI_COMMAND", "ADD"),
            ("CNI_CONTAINERID", "abc123"),
            ("CNI_NETNS", "/var/run/netns/cni-1"),
            ("CNI_IFNAME", "eth0"),
            ("CNI_PATH", "/opt/cni/bin"),
            (
                "CNI_ARGS",
                "IgnoreUnknown=1;K8S_POD_NAMESPACE=shop;K8S_POD_NAME=web-0;K8S_POD_UID=u1",
            ),
        ]
    }

    fn without(key: &str) -> Vec<(&'static str, &'static str)> {
        add_env().into_iter().filter(|(k, _)| *k != key).collect()
    }

    fn with(key: &'static str, val: &'static str) -> Vec<(&'static str, &'static str)> {
        let mut e = without(key);
        e.push((key, val));
        e
    }

    #[test]
    fn add_parses() {
        let r = CniRequest::parse(env(&add_env()), CONF.as_bytes()).unwrap();
        assert_eq!(r.command, Command::Add);
        assert_eq!(r.version, CniVersion::V100);
        assert_eq!(r.pod.as_ref().unwrap().key(), "shop/web-0");
        assert_eq!(r.pod.unwrap().uid.as_deref(), Some("u1"));
    }

    #[test]
    fn every_missing_env_is_code_4() {
        for key in [
            "CNI_COMMAND",
            "CNI_CONTAINERID",
            "CNI_NETNS",
            "CNI_IFNAME",
            "CNI_ARGS",
        ] {
            let e = CniRequest::parse(env(&without(key)), CONF.as_bytes()).unwrap_err();
            assert_eq!(e.code, codes::INVALID_ENV, "{key}: {e}");
        }
    }

    #[test]
    fn unknown_command_is_code_4() {
        let e = CniRequest::parse(env(&with("CNI_COMMAND", "REBOOT")), CONF.as_bytes()).unwrap_err();
        assert_eq!(e.code, codes::INVALID_ENV);
        assert!(e.msg.contains("REBOOT"));
    }

    #[test]
    fn invalid_ids_and_ifnames_are_code_4() {
        for (k, v) in [
            ("CNI_CONTAINERID", "-abc"),
            ("CNI_CONTAINERID", "a/b"),
            ("CNI_IFNAME", "a-name-longer-than-15"),
            ("CNI_IFNAME", "eth 0"),
            ("CNI_IFNAME", ".."),
            ("CNI_IFNAME", "a/b"),
        ] {
            let e = CniRequest::parse(env(&with(k, v)), CONF.as_bytes()).unwrap_err();
            assert_eq!(e.code, codes::INVALID_ENV, "{k}={v}");
        }
    }

    #[test]
    fn wrong_cni_version_is_code_1() {
        for v in ["0.2.0", "2.0.0", "1.0"] {
            let conf = format!(r#"{{"cniVersion":"{v}","name":"k","type":"kuryr-cni"}}"#);
            let e = CniRequest::parse(env(&add_env()), conf.as_bytes()).unwrap_err();
            assert_eq!(e.code, codes::INCOMPATIBLE_VERSION, "{v}");
        }
    }

    #[test]
    fn check_needs_0_4_and_status_gc_need_1_1() {
        let old = r#"{"cniVersion":"0.3.1","name":"k","type":"kuryr-cni"}"#;
        let e = CniRequest::parse(env(&with("CNI_COMMAND", "CHECK")), old.as_bytes()).unwrap_err();
        assert_eq!(e.code, codes::INCOMPATIBLE_VERSION);
        let e = CniRequest::parse(env(&[("CNI_COMMAND", "STATUS")]), CONF.as_bytes()).unwrap_err();
        assert_eq!(e.code, codes::INCOMPATIBLE_VERSION);
        let v11 = r#"{"cniVersion":"1.1.0","name":"k","type":"kuryr-cni"}"#;
        let r = CniRequest::parse(env(&[("CNI_COMMAND", "GC")]), v11.as_bytes()).unwrap();
        assert_eq!(r.command, Command::Gc);
        let r = CniRequest::parse(env(&[("CNI_COMMAND", "STATUS")]), v11.as_bytes()).unwrap();
        assert_eq!(r.command, Command::Status);
    }

    #[test]
    fn malformed_stdin_is_code_6_and_bad_config_code_7() {
        let e = CniRequest::parse(env(&add_env()), b"{oops").unwrap_err();
        assert_eq!(e.code, codes::DECODING_FAILURE);
        let e = CniRequest::parse(env(&add_env()), br#"{"name":"k","type":"kuryr-cni"}"#).unwrap_err();
        assert_eq!(e.code, codes::INVALID_NETCONF);
    }

    #[test]
    fn del_accepts_empty_netns_and_no_pod_args() {
        let e = vec![
            ("CNI_COMMAND", "DEL"),
            ("CNI_CONTAINERID", "abc123"),
            ("CNI_NETNS", ""),
            ("CNI_IFNAME", "eth0"),
            ("CNI_ARGS", "IgnoreUnknown=1"),
        ];
        let r = CniRequest::parse(env(&e), CONF.as_bytes()).unwrap();
        assert_eq!(r.netns, "");
        assert_eq!(r.pod, None);
        // ADD with the same empty netns is refused.
        let e = CniRequest::parse(env(&with("CNI_NETNS", "")), CONF.as_bytes()).unwrap_err();
        assert_eq!(e.code, codes::INVALID_ENV);
    }

    #[test]
    fn version_reply_echoes_known_versions_only() {
        let v = CniRequest::version_reply(br#"{"cniVersion":"0.4.0"}"#);
        assert_eq!(v["cniVersion"], "0.4.0");
        assert_eq!(v["supportedVersions"].as_array().unwrap().len(), 5);
        assert_eq!(CniRequest::version_reply(b"")["cniVersion"], "1.1.0");
        assert_eq!(CniRequest::error_version(br#"{"cniVersion":"9.9.9"}"#), "1.1.0");
    }
}
