//! Offline checks of the generated CRDs: what the issue promises (status subresource, upstream names, printer
//! columns), what Kubernetes 1.20 needs (structural schemas, no CEL), and that the committed YAML is current.

use std::collections::BTreeSet;

use kuryr_api::crds::{crds, crds_yaml, CRDS_YAML_PATH};
use kuryr_api::k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};

fn crd(kind: &str) -> CustomResourceDefinition {
    crds()
        .into_iter()
        .find(|c| c.spec.names.kind == kind)
        .expect("no such CRD")
}

fn columns(kind: &str) -> Vec<(String, String)> {
    let crd = crd(kind);
    crd.spec.versions[0]
        .additional_printer_columns
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|c| (c.name, c.json_path))
        .collect()
}

#[test]
fn names_scope_and_version_match_upstream() {
    let expected = [
        ("KuryrPort", "kuryrports", "kuryrport", "kp"),
        ("KuryrNetwork", "kuryrnetworks", "kuryrnetwork", "kns"),
        (
            "KuryrLoadBalancer",
            "kuryrloadbalancers",
            "kuryrloadbalancer",
            "klb",
        ),
        (
            "KuryrNetworkPolicy",
            "kuryrnetworkpolicies",
            "kuryrnetworkpolicy",
            "knp",
        ),
    ];
    let all = crds();
    assert_eq!(all.len(), expected.len());
    for (crd, (kind, plural, singular, short)) in all.iter().zip(expected) {
        assert_eq!(crd.spec.names.kind, kind);
        assert_eq!(
            crd.metadata.name.as_deref(),
            Some(format!("{plural}.openstack.org").as_str())
        );
        assert_eq!(crd.spec.group, "openstack.org");
        assert_eq!(crd.spec.scope, "Namespaced");
        assert_eq!(crd.spec.names.plural, plural);
        assert_eq!(crd.spec.names.singular.as_deref(), Some(singular));
        assert_eq!(
            crd.spec.names.short_names.as_deref(),
            Some(&[short.to_string()][..])
        );
        assert_eq!(crd.spec.versions.len(), 1);
        let v = &crd.spec.versions[0];
        assert_eq!((v.name.as_str(), v.served, v.storage), ("v1", true, true));
    }
}

#[test]
fn every_crd_has_the_status_subresource_and_a_ready_column() {
    for crd in crds() {
        let v = &crd.spec.versions[0];
        let sub = v.subresources.as_ref().expect("subresources");
        assert!(
            sub.status.is_some(),
            "{} lacks the status subresource",
            crd.spec.names.kind
        );
        let cols = columns(&crd.spec.names.kind);
        assert!(cols
            .iter()
            .any(|(n, p)| n == "Ready" && p.contains("@.type==\"Ready\"")));
        assert_eq!(cols.last().map(|(n, _)| n.as_str()), Some("Age"));
        let status = &v
            .schema
            .as_ref()
            .unwrap()
            .open_api_v3_schema
            .as_ref()
            .unwrap()
            .properties
            .as_ref()
            .unwrap()["status"];
        let conditions = &status.properties.as_ref().unwrap()["conditions"];
        assert_eq!(conditions.x_kubernetes_list_type.as_deref(), Some("map"));
        assert_eq!(
            conditions.x_kubernetes_list_map_keys.as_deref(),
            Some(&["type".to_string()][..])
        );
    }
}

#[test]
fn printer_columns_show_what_is_wired() {
    let has = |kind: &str, name: &str, path: &str| {
        let cols = columns(kind);
        assert!(
            cols.iter().any(|(n, p)| n == name && p == path),
            "{kind} lacks column {name} = {path}: {cols:?}"
        );
    };
    has("KuryrPort", "Node", ".spec.podNodeName");
    has("KuryrPort", "VLAN", ".status.vifs.eth0.vif.vlanId");
    has("KuryrPort", "IP", ".status.vifs.eth0.vif.ips[0].address");
    has("KuryrPort", "Active", ".status.vifs.eth0.vif.active");
    has("KuryrNetwork", "Subnet-CIDR", ".status.subnetCIDR");
    has("KuryrLoadBalancer", "IP", ".spec.ip");
    has(
        "KuryrLoadBalancer",
        "External-IP",
        ".status.service_pub_ip_info.ip_addr",
    );
    has(
        "KuryrLoadBalancer",
        "LB-Status",
        ".status.loadbalancer.provisioning_status",
    );
    has("KuryrNetworkPolicy", "SG-ID", ".status.securityGroupId");
}

/// Kubernetes' structural schema rules: every node has a type unless it is int-or-string or preserves unknown
/// fields; no oneOf/anyOf left from Rust enums or options. (CEL rules would be allowed since the supported
/// floor, 1.30, has them at GA; the CRDs use none.)
fn check_structural(path: &str, s: &JSONSchemaProps, errors: &mut Vec<String>) {
    if s.type_.is_none()
        && s.x_kubernetes_int_or_string != Some(true)
        && s.x_kubernetes_preserve_unknown_fields != Some(true)
    {
        errors.push(format!("{path}: no type"));
    }
    if s.one_of.is_some() || s.any_of.is_some() || s.all_of.is_some() || s.not.is_some() {
        errors.push(format!("{path}: oneOf/anyOf/allOf/not"));
    }
    if s.enum_.iter().flatten().any(|v| v.0.is_null()) {
        errors.push(format!("{path}: null in enum (not a structural schema)"));
    }
    if s.ref_path.is_some() {
        errors.push(format!("{path}: $ref"));
    }
    for (name, prop) in s.properties.iter().flatten() {
        check_structural(&format!("{path}.{name}"), prop, errors);
    }
    if let Some(JSONSchemaPropsOrArray::Schema(items)) = &s.items {
        check_structural(&format!("{path}[]"), items, errors);
    }
    if let Some(JSONSchemaPropsOrBool::Schema(add)) = &s.additional_properties {
        check_structural(&format!("{path}{{}}"), add, errors);
    }
}

#[test]
fn schemas_are_structural_and_1_20_compatible() {
    let mut errors = vec![];
    for crd in crds() {
        let v = &crd.spec.versions[0];
        assert!(
            v.selectable_fields.is_none(),
            "selectableFields need Kubernetes 1.30"
        );
        let schema = v.schema.as_ref().unwrap().open_api_v3_schema.as_ref().unwrap();
        check_structural(&crd.spec.names.kind, schema, &mut errors);
    }
    assert!(errors.is_empty(), "{errors:#?}");
}

#[test]
fn schemas_carry_validation_for_obvious_mistakes() {
    let spec = |kind: &str| {
        crd(kind).spec.versions[0]
            .schema
            .as_ref()
            .unwrap()
            .open_api_v3_schema
            .as_ref()
            .unwrap()
            .properties
            .as_ref()
            .unwrap()["spec"]
            .clone()
    };
    let kp = spec("KuryrPort");
    let required: BTreeSet<_> = kp.required.iter().flatten().cloned().collect();
    assert_eq!(
        required,
        BTreeSet::from(["podUid".to_string(), "podNodeName".to_string()])
    );
    let klb = spec("KuryrLoadBalancer");
    let port = match &klb.properties.as_ref().unwrap()["ports"].items {
        Some(JSONSchemaPropsOrArray::Schema(s)) => s.clone(),
        other => panic!("ports items: {other:?}"),
    };
    let protocol = &port.properties.as_ref().unwrap()["protocol"];
    assert_eq!(protocol.enum_.as_ref().map(Vec::len), Some(3));
    let number = &port.properties.as_ref().unwrap()["port"];
    assert_eq!((number.minimum, number.maximum), (Some(1.0), Some(65535.0)));
}

#[test]
fn vif_schema_keeps_upstream_blobs_and_requires_nothing() {
    let kp = crd("KuryrPort");
    let root = kp.spec.versions[0]
        .schema
        .as_ref()
        .unwrap()
        .open_api_v3_schema
        .as_ref()
        .unwrap();
    let status = &root.properties.as_ref().unwrap()["status"];
    let vifs = &status.properties.as_ref().unwrap()["vifs"];
    let entry = match &vifs.additional_properties {
        Some(JSONSchemaPropsOrBool::Schema(s)) => s,
        other => panic!("vifs additionalProperties: {other:?}"),
    };
    let vif = &entry.properties.as_ref().unwrap()["vif"];
    assert_eq!(vif.x_kubernetes_preserve_unknown_fields, Some(true));
    assert!(vif.required.is_none(), "{:?}", vif.required);
    for (name, prop) in vif.properties.iter().flatten() {
        assert!(
            prop.default.is_none(),
            "vif.{name} has a default the apiserver would write into upstream blobs"
        );
    }
    let vlan = &vif.properties.as_ref().unwrap()["vlanId"];
    assert_eq!((vlan.minimum, vlan.maximum), (Some(1.0), Some(4094.0)));
}

#[test]
fn committed_yaml_matches_the_types() {
    let path = format!("{}/../../{CRDS_YAML_PATH}", env!("CARGO_MANIFEST_DIR"));
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    let generated = crds_yaml().unwrap();
    assert!(
        committed == generated,
        "{CRDS_YAML_PATH} is out of date with the CRD types; \
         run `cargo run -p kuryr-api --bin crdgen > deploy/crds/kuryr-crds.yaml`"
    );
}

#[test]
fn committed_yaml_parses_back_into_the_same_crds() {
    let yaml = crds_yaml().unwrap();
    let docs: Vec<CustomResourceDefinition> = yaml
        .split("\n---\n")
        .skip(1)
        .map(|doc| serde_yaml::from_str(doc).unwrap())
        .collect();
    assert_eq!(docs, crds());
}
