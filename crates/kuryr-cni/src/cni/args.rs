//! `CNI_ARGS`: `K=V;K=V` in any order; kubelet/containerd pass `IgnoreUnknown=1`, K8S_POD_NAMESPACE,
//! K8S_POD_NAME, K8S_POD_INFRA_CONTAINER_ID and (newer) K8S_POD_UID.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{codes, CniError};

/// Parses `CNI_ARGS`. Unknown keys are kept (and ignored by callers); a pair without `=` is an error.
pub fn parse_cni_args(raw: &str) -> Result<BTreeMap<String, String>, CniError> {
    let mut out = BTreeMap::new();
    for pair in raw.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((k, v)) = pair.split_once('=') else {
            return Err(CniError::new(
                codes::INVALID_ENV,
                format!("invalid CNI_ARGS entry {pair:?}"),
                "expected KEY=VALUE pairs separated by ';'",
            ));
        };
        if k.is_empty() {
            return Err(CniError::new(
                codes::INVALID_ENV,
                format!("invalid CNI_ARGS entry {pair:?}"),
                "empty key",
            ));
        }
        out.insert(k.to_string(), v.to_string());
    }
    Ok(out)
}

/// The pod a request is about.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodArgs {
    pub namespace: String,
    pub name: String,
    /// Absent from older runtimes; when present the daemon refuses a KuryrPort of another pod UID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
}

impl PodArgs {
    pub fn from_args(args: &BTreeMap<String, String>) -> Result<Self, CniError> {
        let get = |k: &str| args.get(k).filter(|v| !v.is_empty()).cloned();
        let missing = |k: &str| {
            CniError::new(
                codes::INVALID_ENV,
                format!("CNI_ARGS lacks {k}"),
                "kuryr-cni serves Kubernetes pods: the runtime must pass K8S_POD_NAMESPACE and K8S_POD_NAME",
            )
        };
        Ok(Self {
            namespace: get("K8S_POD_NAMESPACE").ok_or_else(|| missing("K8S_POD_NAMESPACE"))?,
            name: get("K8S_POD_NAME").ok_or_else(|| missing("K8S_POD_NAME"))?,
            uid: get("K8S_POD_UID"),
        })
    }

    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn args_parse_in_any_order_with_ignore_unknown() {
        let a = parse_cni_args(
            "K8S_POD_UID=u-1;IgnoreUnknown=1;K8S_POD_NAME=web-0;K8S_POD_INFRA_CONTAINER_ID=abc;K8S_POD_NAMESPACE=shop",
        )
        .unwrap();
        let b = parse_cni_args("IgnoreUnknown=1;K8S_POD_NAMESPACE=shop;K8S_POD_NAME=web-0;K8S_POD_UID=u-1")
            .unwrap();
        let (pa, pb) = (PodArgs::from_args(&a).unwrap(), PodArgs::from_args(&b).unwrap());
        assert_eq!(pa, pb);
        assert_eq!(pa.uid.as_deref(), Some("u-1"));
        assert_eq!(pa.key(), "shop/web-0");
    }

    #[test]
    fn args_tolerate_empty_and_trailing_separators() {
        assert!(parse_cni_args("").unwrap().is_empty());
        assert_eq!(parse_cni_args("A=1;;B=;").unwrap().len(), 2);
    }

    #[test]
    fn args_without_equals_are_invalid_env() {
        assert_eq!(
            parse_cni_args("IgnoreUnknown").unwrap_err().code,
            codes::INVALID_ENV
        );
        assert_eq!(parse_cni_args("=x").unwrap_err().code, codes::INVALID_ENV);
    }

    #[test]
    fn missing_pod_name_is_invalid_env_and_uid_is_optional() {
        let a = parse_cni_args("K8S_POD_NAMESPACE=ns").unwrap();
        let e = PodArgs::from_args(&a).unwrap_err();
        assert_eq!(e.code, codes::INVALID_ENV);
        assert!(e.msg.contains("K8S_POD_NAME"));
        let a = parse_cni_args("K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p").unwrap();
        assert_eq!(PodArgs::from_args(&a).unwrap().uid, None);
    }
}
