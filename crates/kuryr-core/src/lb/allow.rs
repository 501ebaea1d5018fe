//! What a Service may ask the cloud for, as the operator allows it. A user who may edit Services (but not
//! KuryrLoadBalancers) must not reach, through an annotation or a Service field, a provider, subnet, project,
//! security group or floating IP the operator did not allow. Everything the KuryrLoadBalancer controller is
//! about to build goes through [`enforce`] first (so a hand-edited KuryrLoadBalancer is held to the same
//! list), and a requested `loadBalancerIP` through [`claim_floating_ip`] once the cloud has been asked
//! about it. Each refusal is a [`Problem`] (a Warning Event and the `Allowed=False` condition); the rest of
//! the Service is still served.

use std::net::IpAddr;

use kuryr_api::annotations;
use kuryr_api::loadbalancer::KuryrLoadBalancerSpec;

use super::model::Problem;
use crate::policy::Cidr;

/// Event and condition reasons.
pub const ANNOTATION_NOT_ALLOWED: &str = "AnnotationNotAllowed";
pub const LOAD_BALANCER_IP_NOT_ALLOWED: &str = "LoadBalancerIPNotAllowed";
pub const SUBNET_NOT_ALLOWED: &str = "SubnetNotAllowed";
pub const PROJECT_NOT_ALLOWED: &str = "ProjectNotAllowed";
pub const SECURITY_GROUPS_NOT_ALLOWED: &str = "SecurityGroupsNotAllowed";

/// The operator's allow-lists for load balancers (flags of kuryr-controller, docs/security.md).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AllowList {
    /// The provider of Services that name none (`--lb-provider`); `None`: Octavia's default. Always
    /// allowed.
    pub default_provider: Option<String>,
    /// Further providers a Service may name with `openstack.org/kuryr-lb-provider`
    /// (`--lb-allowed-providers`); empty: only the default.
    pub providers: Vec<String>,
    /// The one VIP subnet (`--service-subnet`).
    pub vip_subnet: String,
    /// The one subnet of additional VIPs (`--secondary-service-subnet`); `None`: no additional VIPs.
    pub secondary_vip_subnet: Option<String>,
    /// The project load balancers are made in; `None`: the token's (then any spec project is refused).
    pub project: Option<String>,
    /// External networks a `loadBalancerIP` may be on (`--external-network` plus
    /// `--lb-floating-ip-networks`); empty: `loadBalancerIP` is refused.
    pub fip_networks: Vec<String>,
    /// Where a new floating IP with the requested address is created (`--external-network`).
    pub fip_create_network: Option<String>,
    /// Ranges a `loadBalancerIP` must fall in (`--lb-floating-ip-cidrs`); empty: any address of those
    /// networks.
    pub fip_cidrs: Vec<Cidr>,
}

impl AllowList {
    fn provider_allowed(&self, p: &str) -> bool {
        self.default_provider.as_deref() == Some(p) || self.providers.iter().any(|a| a == p)
    }

    fn allowed_providers(&self) -> String {
        let mut all: Vec<&str> = self.default_provider.iter().map(String::as_str).collect();
        all.extend(self.providers.iter().map(String::as_str));
        if all.is_empty() {
            "none: only Octavia's default".into()
        } else {
            all.join(", ")
        }
    }
}

/// A spec held to the allow-list.
#[derive(Clone, Debug, PartialEq)]
pub struct Enforced {
    /// The spec to build: refused values replaced by the configured ones (or dropped).
    pub spec: KuryrLoadBalancerSpec,
    /// One per refused value.
    pub refused: Vec<Problem>,
    /// The requested `loadBalancerIP` was refused: no floating IP at all (another address would not be
    /// what the user asked for).
    pub fip_refused: bool,
}

/// `spec` with every value outside `allow` replaced by the operator's (provider, VIP subnet, project) or
/// dropped (security groups, `loadBalancerIP`).
pub fn enforce(spec: &KuryrLoadBalancerSpec, allow: &AllowList) -> Enforced {
    let mut out = spec.clone();
    let mut refused = Vec::new();
    if let Some(p) = spec.provider.as_deref() {
        if !allow.provider_allowed(p) {
            refused.push(Problem::new(
                ANNOTATION_NOT_ALLOWED,
                format!(
                    "{}: provider {p:?} is not allowed by the operator (allowed: {}); using {}",
                    annotations::LB_PROVIDER,
                    allow.allowed_providers(),
                    allow.default_provider.as_deref().unwrap_or("Octavia's default")
                ),
            ));
            out.provider = allow.default_provider.clone();
        }
    }
    if let Some(s) = spec.subnet_id.as_deref() {
        if s != allow.vip_subnet {
            refused.push(Problem::new(
                SUBNET_NOT_ALLOWED,
                format!(
                    "VIP subnet {s} is not the service subnet {}; using the service subnet",
                    allow.vip_subnet
                ),
            ));
        }
    }
    out.subnet_id = Some(allow.vip_subnet.clone());
    let before = out.additional_vips.len();
    out.additional_vips
        .retain(|v| allow.secondary_vip_subnet.as_deref() == Some(v.subnet_id.as_str()));
    if out.additional_vips.len() != before {
        refused.push(Problem::new(
            SUBNET_NOT_ALLOWED,
            format!(
                "additional VIP subnets other than the secondary service subnet ({}) are not allowed; \
                 those VIPs are left out",
                allow.secondary_vip_subnet.as_deref().unwrap_or("none configured")
            ),
        ));
    }
    if let Some(p) = spec.project_id.as_deref() {
        if allow.project.as_deref() != Some(p) {
            refused.push(Problem::new(
                PROJECT_NOT_ALLOWED,
                format!(
                    "project {p} is not the controller's ({}); load balancers are made in the controller's",
                    allow.project.as_deref().unwrap_or("the token's project")
                ),
            ));
            out.project_id = allow.project.clone();
        }
    }
    if !spec.security_groups_ids.is_empty() {
        refused.push(Problem::new(
            SECURITY_GROUPS_NOT_ALLOWED,
            format!(
                "security groups {:?} on the VIP are not managed by kuryr-rs; ignored",
                spec.security_groups_ids
            ),
        ));
        out.security_groups_ids.clear();
    }
    let mut fip_refused = false;
    if let Some(ip) = spec.lb_ip.as_deref() {
        if let Err(why) = lb_ip_allowed(ip, allow) {
            refused.push(Problem::new(
                LOAD_BALANCER_IP_NOT_ALLOWED,
                format!("loadBalancerIP {ip}: {why}; no floating IP is attached"),
            ));
            out.lb_ip = None;
            fip_refused = true;
        }
    }
    Enforced {
        spec: out,
        refused,
        fip_refused,
    }
}

/// Whether a requested address may be used at all (before the cloud is asked about it).
fn lb_ip_allowed(ip: &str, allow: &AllowList) -> Result<(), String> {
    let addr: IpAddr = ip.trim().parse().map_err(|_| "not an IP address".to_owned())?;
    if allow.fip_networks.is_empty() {
        return Err("the operator allows no external network for loadBalancerIP \
                    (--external-network / --lb-floating-ip-networks)"
            .into());
    }
    if !allow.fip_cidrs.is_empty() && !allow.fip_cidrs.iter().any(|c| c.contains(&addr)) {
        let ranges: Vec<String> = allow.fip_cidrs.iter().map(ToString::to_string).collect();
        return Err(format!(
            "outside the ranges the operator allows ({})",
            ranges.join(", ")
        ));
    }
    Ok(())
}

/// A floating IP that already has the requested address, as the cloud shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExistingFip<'a> {
    pub network_id: &'a str,
    pub project_id: Option<&'a str>,
    /// The port it is associated with.
    pub port_id: Option<&'a str>,
    /// Ownership tags: `None` untagged, `Some(true)` this Service's, `Some(false)` another object's.
    pub tagged_for_us: Option<bool>,
}

/// What to do about a requested `loadBalancerIP`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FipClaim {
    /// Nothing has the address: create it on the configured external network.
    Create,
    /// It is this Service's own (tagged for it): use it, it is released with the Service.
    Ours,
    /// The user's pre-allocated floating IP: use it, only disassociate it when the Service goes.
    Users,
    Refused(Problem),
}

/// Decides about `ip` given what already holds it. `project`: the controller's project; `vip_port`: the
/// load balancer's VIP port (an address already on it is fine).
pub fn claim_floating_ip(
    ip: &str,
    existing: Option<ExistingFip<'_>>,
    allow: &AllowList,
    project: Option<&str>,
    vip_port: &str,
) -> FipClaim {
    let refuse = |why: String| {
        FipClaim::Refused(Problem::new(
            LOAD_BALANCER_IP_NOT_ALLOWED,
            format!("loadBalancerIP {ip}: {why}; no floating IP is attached"),
        ))
    };
    if let Err(why) = lb_ip_allowed(ip, allow) {
        return refuse(why);
    }
    let Some(f) = existing else {
        return match &allow.fip_create_network {
            Some(_) => FipClaim::Create,
            None => refuse(
                "no floating IP has this address and there is no --external-network to create it on".into(),
            ),
        };
    };
    match f.tagged_for_us {
        Some(true) => return FipClaim::Ours,
        Some(false) => {
            return refuse("it belongs to another Kubernetes object (its kuryr ownership tags)".into())
        }
        None => {}
    }
    if !allow.fip_networks.iter().any(|n| n == f.network_id) {
        return refuse(format!(
            "it is on network {}, which the operator does not allow",
            f.network_id
        ));
    }
    match (project, f.project_id) {
        (Some(mine), Some(theirs)) if mine != theirs => {
            return refuse(format!("it belongs to project {theirs}, not to the controller's"))
        }
        // The project is unknown on one side: only a floating IP that is visibly ours may be used.
        (None, _) | (_, None) => return refuse("its project cannot be checked".into()),
        _ => {}
    }
    match f.port_id {
        Some(p) if p != vip_port => refuse(format!("it is already associated with port {p}")),
        _ => FipClaim::Users,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allow() -> AllowList {
        AllowList {
            default_provider: Some("ovn".into()),
            providers: vec!["amphora".into()],
            vip_subnet: "svc-subnet".into(),
            secondary_vip_subnet: Some("svc-subnet-v6".into()),
            project: Some("p1".into()),
            fip_networks: vec!["public".into()],
            fip_create_network: Some("public".into()),
            fip_cidrs: Vec::new(),
        }
    }

    #[test]
    fn additional_vips_only_on_the_secondary_service_subnet() {
        let vip = |subnet: &str| kuryr_api::loadbalancer::LbAdditionalVip {
            ip: "fd42:19::10".into(),
            subnet_id: subnet.into(),
        };
        let mut s = spec();
        s.additional_vips = vec![vip("svc-subnet-v6")];
        let e = enforce(&s, &allow());
        assert!(e.refused.is_empty(), "{:?}", e.refused);
        assert_eq!(e.spec.additional_vips, vec![vip("svc-subnet-v6")]);
        s.additional_vips = vec![vip("tenant-b-v6")];
        let e = enforce(&s, &allow());
        assert!(e.spec.additional_vips.is_empty());
        assert_eq!(e.refused.len(), 1, "{:?}", e.refused);
        assert_eq!(e.refused[0].reason, SUBNET_NOT_ALLOWED);
    }

    fn spec() -> KuryrLoadBalancerSpec {
        KuryrLoadBalancerSpec {
            subnet_id: Some("svc-subnet".into()),
            project_id: Some("p1".into()),
            provider: Some("ovn".into()),
            ..KuryrLoadBalancerSpec::default()
        }
    }

    fn reasons(e: &Enforced) -> Vec<&'static str> {
        e.refused.iter().map(|p| p.reason).collect()
    }

    #[test]
    fn an_allowed_spec_is_kept_as_is() {
        let mut s = spec();
        s.provider = Some("amphora".into());
        s.lb_ip = Some("203.0.113.7".into());
        let e = enforce(&s, &allow());
        assert_eq!((e.spec, e.refused, e.fip_refused), (s, vec![], false));
        let mut none = spec();
        none.provider = None;
        none.subnet_id = None;
        none.project_id = None;
        let e = enforce(&none, &allow());
        assert!(e.refused.is_empty(), "{:?}", e.refused);
        assert_eq!(e.spec.subnet_id.as_deref(), Some("svc-subnet"));
    }

    #[test]
    fn a_provider_outside_the_list_falls_back_to_the_default() {
        let mut s = spec();
        s.provider = Some("vendor-x".into());
        let e = enforce(&s, &allow());
        assert_eq!(reasons(&e), vec![ANNOTATION_NOT_ALLOWED]);
        assert_eq!(e.spec.provider.as_deref(), Some("ovn"));
        assert!(e.refused[0].message.contains("openstack.org/kuryr-lb-provider"));
        assert!(e.refused[0].message.contains("allowed: ovn, amphora"));
        // Only the default when nothing more is listed; Octavia's default when no default is configured.
        let strict = AllowList {
            default_provider: None,
            providers: vec![],
            ..allow()
        };
        s.provider = Some("amphora".into());
        let e = enforce(&s, &strict);
        assert_eq!(
            (reasons(&e), e.spec.provider),
            (vec![ANNOTATION_NOT_ALLOWED], None)
        );
    }

    #[test]
    fn subnet_project_and_security_groups_of_a_tampered_spec_are_replaced() {
        let mut s = spec();
        s.subnet_id = Some("tenant-b-subnet".into());
        s.project_id = Some("p2".into());
        s.security_groups_ids = vec!["sg-open".into()];
        let e = enforce(&s, &allow());
        assert_eq!(
            reasons(&e),
            vec![
                SUBNET_NOT_ALLOWED,
                PROJECT_NOT_ALLOWED,
                SECURITY_GROUPS_NOT_ALLOWED
            ]
        );
        assert_eq!(e.spec.subnet_id.as_deref(), Some("svc-subnet"));
        assert_eq!(e.spec.project_id.as_deref(), Some("p1"));
        assert!(e.spec.security_groups_ids.is_empty());
        assert!(!e.fip_refused);
    }

    #[test]
    fn a_load_balancer_ip_needs_an_allowed_network_and_range() {
        let mut s = spec();
        s.lb_ip = Some("198.51.100.9".into());
        let ranged = AllowList {
            fip_cidrs: vec!["203.0.113.0/24".parse().unwrap()],
            ..allow()
        };
        let e = enforce(&s, &ranged);
        assert_eq!(
            (reasons(&e), e.fip_refused),
            (vec![LOAD_BALANCER_IP_NOT_ALLOWED], true)
        );
        assert_eq!(e.spec.lb_ip, None);
        assert!(
            e.refused[0].message.contains("203.0.113.0/24"),
            "{}",
            e.refused[0].message
        );
        s.lb_ip = Some("203.0.113.9".into());
        assert!(enforce(&s, &ranged).refused.is_empty());
        let no_networks = AllowList {
            fip_networks: vec![],
            fip_create_network: None,
            ..allow()
        };
        assert!(enforce(&s, &no_networks).fip_refused);
        s.lb_ip = Some("not-an-ip".into());
        assert!(enforce(&s, &allow()).fip_refused);
    }

    fn fip<'a>(
        net: &'a str,
        project: &'a str,
        port: Option<&'a str>,
        tagged: Option<bool>,
    ) -> ExistingFip<'a> {
        ExistingFip {
            network_id: net,
            project_id: Some(project),
            port_id: port,
            tagged_for_us: tagged,
        }
    }

    #[test]
    fn floating_ips_of_others_are_never_taken() {
        let a = allow();
        let claim = |f: Option<ExistingFip<'_>>| claim_floating_ip("203.0.113.7", f, &a, Some("p1"), "vip");
        assert_eq!(claim(None), FipClaim::Create);
        assert_eq!(claim(Some(fip("public", "p1", None, None))), FipClaim::Users);
        assert_eq!(
            claim(Some(fip("public", "p1", Some("vip"), None))),
            FipClaim::Users
        );
        assert_eq!(
            claim(Some(fip("public", "p1", Some("vm-port"), Some(true)))),
            FipClaim::Ours
        );
        let refused = |c: FipClaim| match c {
            FipClaim::Refused(p) => p.message,
            other => panic!("not refused: {other:?}"),
        };
        assert!(refused(claim(Some(fip("public", "p1", None, Some(false)))))
            .contains("another Kubernetes object"));
        assert!(refused(claim(Some(fip("public", "p2", None, None)))).contains("project p2"));
        assert!(refused(claim(Some(fip("public", "p1", Some("vm-port"), None)))).contains("port vm-port"));
        assert!(refused(claim(Some(fip("corp-net", "p1", None, None)))).contains("network corp-net"));
        let unknown = ExistingFip {
            project_id: None,
            ..fip("public", "p1", None, None)
        };
        assert!(refused(claim(Some(unknown))).contains("cannot be checked"));
        let no_create = AllowList {
            fip_create_network: None,
            ..allow()
        };
        assert!(matches!(
            claim_floating_ip("203.0.113.7", None, &no_create, Some("p1"), "vip"),
            FipClaim::Refused(_)
        ));
    }
}
