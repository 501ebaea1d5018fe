//! All Kuryr CRDs, as objects and as the YAML committed under `deploy/crds/`.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

use crate::{Error, KuryrLoadBalancer, KuryrNetwork, KuryrNetworkPolicy, KuryrPort};

/// Path of the committed YAML, relative to the workspace root.
pub const CRDS_YAML_PATH: &str = "deploy/crds/kuryr-crds.yaml";

const HEADER: &str = "# Kuryr CRDs (openstack.org/v1). Generated; do not edit:\n\
                      #   cargo run -p kuryr-api --bin crdgen > deploy/crds/kuryr-crds.yaml\n";

/// The four CRDs in a stable order.
pub fn crds() -> Vec<CustomResourceDefinition> {
    vec![
        KuryrPort::crd(),
        KuryrNetwork::crd(),
        KuryrLoadBalancer::crd(),
        KuryrNetworkPolicy::crd(),
    ]
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
