//! Several networks per pod (the Network Plumbing WG's `k8s.v1.cni.cncf.io/networks` annotation): which
//! NetworkAttachmentDefinitions a pod asks for, and the extra interfaces they become. A definition kuryr-rs
//! serves names its Neutron subnet in `openstack.org/kuryr-config` (`{"subnetId": "..."}`, upstream's
//! form); the subnet must be in the operator's `--additional-subnets`, or the request is refused with an
//! Event and the pod is wired on its default network alone.

use std::collections::{BTreeMap, BTreeSet};

use kuryr_api::attachment::KURYR_CONFIG;
use kuryr_api::port::{AdditionalNetwork, DEFAULT_IFNAME};
use serde::Deserialize;

use crate::lb::allow::{ANNOTATION_NOT_ALLOWED, SUBNET_NOT_ALLOWED};
use crate::lb::Problem;

/// Reason of the Event for a request naming a definition that does not exist or does not say its subnet.
pub const NETWORK_ATTACHMENT_INVALID: &str = "NetworkAttachmentInvalid";

/// One entry of the annotation.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct Request {
    pub name: String,
    #[serde(default)]
    pub namespace: Option<String>,
    /// The interface name asked for (`interface` in the JSON form, `name@if` in the short one).
    #[serde(default, rename = "interface")]
    pub interface: Option<String>,
}

/// Parses the annotation: a JSON list of `{"name", "namespace", "interface"}`, or a comma list of
/// `[namespace/]name[@interface]`.
pub fn parse(value: &str) -> Result<Vec<Request>, String> {
    let v = value.trim();
    if v.is_empty() {
        return Ok(Vec::new());
    }
    if v.starts_with('[') {
        let list: Vec<Request> =
            serde_json::from_str(v).map_err(|e| format!("not a list of network selections: {e}"))?;
        return list.into_iter().map(checked).collect();
    }
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|item| {
            let (rest, interface) = match item.split_once('@') {
                Some((r, i)) => (r, Some(i.to_owned())),
                None => (item, None),
            };
            let (namespace, name) = match rest.split_once('/') {
                Some((ns, n)) => (Some(ns.to_owned()), n.to_owned()),
                None => (None, rest.to_owned()),
            };
            checked(Request {
                name,
                namespace,
                interface,
            })
        })
        .collect()
}

fn checked(r: Request) -> Result<Request, String> {
    let dns_label = |s: &str| {
        !s.is_empty()
            && s.len() <= 253
            && s.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
    };
    if !dns_label(&r.name) || r.namespace.as_deref().is_some_and(|n| !dns_label(n)) {
        return Err(format!(
            "{:?}: not a [namespace/]name of a NetworkAttachmentDefinition",
            r.name
        ));
    }
    if let Some(i) = &r.interface {
        // Linux interface names: at most 15 bytes, no '/' or whitespace.
        if i.is_empty() || i.len() > 15 || i.contains(['/', ' ', ':']) || i == DEFAULT_IFNAME {
            return Err(format!(
                "{i:?}: not an interface name kuryr-rs can give (1-15 characters, not eth0)"
            ));
        }
    }
    Ok(r)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct KuryrConfig {
    subnet_id: String,
}

/// The Neutron subnet a definition's annotations name, or why not.
pub fn subnet_of(annotations: Option<&BTreeMap<String, String>>) -> Result<String, String> {
    let raw = annotations
        .and_then(|a| a.get(KURYR_CONFIG))
        .ok_or_else(|| format!("no {KURYR_CONFIG} annotation: not a kuryr network"))?;
    let c: KuryrConfig = serde_json::from_str(raw).map_err(|e| format!("{KURYR_CONFIG}: {e}"))?;
    if c.subnet_id.trim().is_empty() {
        return Err(format!("{KURYR_CONFIG}: empty subnetId"));
    }
    Ok(c.subnet_id.trim().to_owned())
}

/// What a definition lookup found: `Some(annotations)` when it exists.
pub type Found = Option<BTreeMap<String, String>>;

/// The extra interfaces for `requests` of a pod in `pod_ns` (definitions looked up by `(namespace, name)`
/// in `found`), with `allowed` subnets; and a Problem for each request refused. Interfaces are named as
/// asked, else `net1`, `net2`, ... in order; a subnet asked twice is served once.
pub fn resolve(
    requests: &[Request],
    pod_ns: &str,
    found: &BTreeMap<(String, String), Found>,
    allowed: &BTreeSet<String>,
) -> (Vec<AdditionalNetwork>, Vec<Problem>) {
    let mut out: Vec<AdditionalNetwork> = Vec::new();
    let mut problems = Vec::new();
    let mut next = 1;
    for r in requests {
        let ns = r.namespace.clone().unwrap_or_else(|| pod_ns.to_owned());
        let key = (ns.clone(), r.name.clone());
        let attachment = format!("{ns}/{}", r.name);
        let subnet = match found.get(&key) {
            None | Some(None) => Err(format!("NetworkAttachmentDefinition {attachment} not found")),
            Some(Some(ann)) => {
                subnet_of(Some(ann)).map_err(|e| format!("NetworkAttachmentDefinition {attachment}: {e}"))
            }
        };
        let subnet = match subnet {
            Ok(s) => s,
            Err(m) => {
                problems.push(Problem::new(NETWORK_ATTACHMENT_INVALID, m));
                continue;
            }
        };
        if !allowed.contains(&subnet) {
            problems.push(Problem::new(
                SUBNET_NOT_ALLOWED,
                format!("NetworkAttachmentDefinition {attachment}: subnet {subnet} is not in --additional-subnets"),
            ));
            continue;
        }
        if out.iter().any(|n| n.subnet_id == subnet) {
            continue;
        }
        let interface = match &r.interface {
            Some(i) if out.iter().all(|n| &n.interface != i) => i.clone(),
            _ => loop {
                let candidate = format!("net{next}");
                next += 1;
                if out.iter().all(|n| n.interface != candidate) {
                    break candidate;
                }
            },
        };
        out.push(AdditionalNetwork {
            interface,
            subnet_id: subnet,
            attachment,
        });
    }
    (out, problems)
}

/// The Problem for an annotation that does not parse (the pod is wired on its default network).
pub fn unreadable(why: &str) -> Problem {
    Problem::new(
        ANNOTATION_NOT_ALLOWED,
        format!("{}: {why}", kuryr_api::annotations::NPWG_NETWORKS),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(ns: Option<&str>, name: &str, interface: Option<&str>) -> Request {
        Request {
            name: name.into(),
            namespace: ns.map(Into::into),
            interface: interface.map(Into::into),
        }
    }

    #[test]
    fn both_annotation_forms_parse_and_bad_names_are_refused() {
        assert_eq!(
            parse("net-a, other/net-b@data0").unwrap(),
            vec![
                req(None, "net-a", None),
                req(Some("other"), "net-b", Some("data0"))
            ]
        );
        assert_eq!(
            parse(r#"[{"name": "net-a", "interface": "data1"}, {"name": "net-b", "namespace": "x"}]"#)
                .unwrap(),
            vec![req(None, "net-a", Some("data1")), req(Some("x"), "net-b", None)]
        );
        assert_eq!(parse("  ").unwrap(), vec![]);
        assert!(parse("Net_A").is_err());
        assert!(parse("net-a@eth0").is_err(), "eth0 is the default interface");
        assert!(parse("net-a@a-very-long-interface").is_err());
        assert!(parse("[{\"nam\": 1}]").is_err());
    }

    #[test]
    fn the_subnet_comes_from_kuryr_config() {
        let ann = |v: &str| BTreeMap::from([(KURYR_CONFIG.to_owned(), v.to_owned())]);
        assert_eq!(subnet_of(Some(&ann(r#"{"subnetId": " s-1 "}"#))).unwrap(), "s-1");
        assert!(subnet_of(Some(&ann(r#"{"subnetId": ""}"#))).is_err());
        assert!(subnet_of(Some(&ann("nope"))).is_err());
        assert!(subnet_of(None).unwrap_err().contains("not a kuryr network"));
    }

    #[test]
    fn requests_become_interfaces_on_allowed_subnets_and_the_rest_are_told() {
        let kc = |s: &str| {
            Some(BTreeMap::from([(
                KURYR_CONFIG.to_owned(),
                format!(r#"{{"subnetId":"{s}"}}"#),
            )]))
        };
        let found = BTreeMap::from([
            (("ns".to_owned(), "a".to_owned()), kc("s-a")),
            (("ns".to_owned(), "a2".to_owned()), kc("s-a")),
            (("other".to_owned(), "b".to_owned()), kc("s-b")),
            (("ns".to_owned(), "forbidden".to_owned()), kc("s-x")),
            (("ns".to_owned(), "plain".to_owned()), Some(BTreeMap::new())),
        ]);
        let allowed = BTreeSet::from(["s-a".to_owned(), "s-b".to_owned()]);
        let requests = vec![
            req(None, "a", None),
            req(None, "a2", None),
            req(Some("other"), "b", Some("net1")),
            req(None, "forbidden", None),
            req(None, "missing", None),
            req(None, "plain", None),
        ];
        let (nets, problems) = resolve(&requests, "ns", &found, &allowed);
        assert_eq!(
            nets,
            vec![
                AdditionalNetwork {
                    interface: "net1".into(),
                    subnet_id: "s-a".into(),
                    attachment: "ns/a".into()
                },
                // `net1` is taken: the next free name.
                AdditionalNetwork {
                    interface: "net2".into(),
                    subnet_id: "s-b".into(),
                    attachment: "other/b".into()
                },
            ]
        );
        let reasons: Vec<&str> = problems.iter().map(|p| p.reason).collect();
        assert_eq!(
            reasons,
            [
                SUBNET_NOT_ALLOWED,
                NETWORK_ATTACHMENT_INVALID,
                NETWORK_ATTACHMENT_INVALID
            ]
        );
        assert!(problems[1].message.contains("ns/missing not found"));
        assert!(problems[2].message.contains("not a kuryr network"));
    }
}
