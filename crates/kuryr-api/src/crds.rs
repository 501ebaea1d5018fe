//! All Kuryr CRDs, as objects and as the YAML committed under `deploy/crds/`.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use kube::CustomResourceExt;

use crate::{Error, KuryrLoadBalancer, KuryrNetwork, KuryrNetworkPolicy, KuryrPort};

/// Path of the committed YAML, relative to the workspace root.
pub const CRDS_YAML_PATH: &str = "deploy/crds/kuryr-crds.yaml";

const HEADER: &str = "# Kuryr CRDs (openstack.org/v1). Generated; do not edit:\n\
                      #   cargo run -p kuryr-api --bin crdgen > deploy/crds/kuryr-crds.yaml\n";

/// The four CRDs in a stable order, ready to apply. Use these rather than `KuryrPort::crd()` & co., which
/// lack the fix-up below.
pub fn crds() -> Vec<CustomResourceDefinition> {
    let mut crds = vec![
        KuryrPort::crd(),
        KuryrNetwork::crd(),
        KuryrLoadBalancer::crd(),
        KuryrNetworkPolicy::crd(),
    ];
    for crd in &mut crds {
        for version in &mut crd.spec.versions {
            if let Some(schema) = version
                .schema
                .as_mut()
                .and_then(|s| s.open_api_v3_schema.as_mut())
            {
                drop_null_enum_values(schema);
            }
        }
    }
    crds
}

/// schemars lists `null` among the values of an `Option<enum>` (next to `nullable: true`). kube-apiserver 1.20
/// then rejects the whole CRD ("per-version schemas may not all be set to identical values"), and kubectl's
/// client-side validation rejects the file. `nullable` alone already allows null.
fn drop_null_enum_values(schema: &mut JSONSchemaProps) {
    if let Some(values) = schema.enum_.as_mut() {
        values.retain(|v| !v.0.is_null());
    }
    for prop in schema.properties.iter_mut().flat_map(|p| p.values_mut()) {
        drop_null_enum_values(prop);
    }
    match schema.items.as_mut() {
        Some(JSONSchemaPropsOrArray::Schema(items)) => drop_null_enum_values(items),
        Some(JSONSchemaPropsOrArray::Schemas(items)) => items.iter_mut().for_each(drop_null_enum_values),
        None => {}
    }
    if let Some(JSONSchemaPropsOrBool::Schema(add)) = schema.additional_properties.as_mut() {
        drop_null_enum_values(add);
    }
}

/// All CRDs as one multi-document YAML stream.
pub fn crds_yaml() -> Result<String, Error> {
    let mut out = String::from(HEADER);
    for crd in crds() {
        out.push_str("---\n");
        out.push_str(&serde_yaml::to_string(&crd)?);
    }
    Ok(out)
}
