//! A pod's extra networks (`k8s.v1.cni.cncf.io/networks`): its NetworkAttachmentDefinitions read and
//! resolved ([`kuryr_core::attachments`]) when its KuryrPort is made. What is refused (a definition
//! missing, not kuryr's, or naming a subnet outside `--additional-subnets`; an annotation that does not
//! parse) is told with a Warning Event on the Pod, once per change; the pod is wired without it.

use std::collections::BTreeMap;

use kuryr_api::{annotations, AdditionalNetwork, Api, NetworkAttachmentDefinition, SlimPod};
use kuryr_core::attachments::{parse, resolve, unreadable};

use crate::context::Context;
use crate::errors::{Error, Result};
use crate::toolkit::Topic;

/// The Events' action.
const ACTION: &str = "ReadNetworks";

/// The extra interfaces of `pod` (in namespace `ns`); none unless `--additional-subnets` is set.
pub async fn of_pod(ctx: &Context, pod: &SlimPod, ns: &str) -> Result<Vec<AdditionalNetwork>> {
    if ctx.config.additional_subnets.is_empty() {
        return Ok(Vec::new());
    }
    let Some(value) = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(annotations::NPWG_NETWORKS))
    else {
        return Ok(Vec::new());
    };
    let requests = match parse(value) {
        Ok(r) => r,
        Err(why) => {
            ctx.tell(pod, Topic::Networks, ACTION, &[unreadable(&why)]).await;
            return Ok(Vec::new());
        }
    };
    let mut found = BTreeMap::new();
    for r in &requests {
        let def_ns = r.namespace.clone().unwrap_or_else(|| ns.to_owned());
        let api: Api<NetworkAttachmentDefinition> = Api::namespaced(ctx.client.clone(), &def_ns);
        let def = match api.get_opt(&r.name).await {
            Ok(d) => d,
            // No such CRD installed: no definition exists.
            Err(kube::Error::Api(s)) if s.code == 404 => None,
            Err(e) => return Err(Error::kube("get_network_attachment_definition")(e)),
        };
        found.insert(
            (def_ns, r.name.clone()),
            def.map(|d| d.metadata.annotations.unwrap_or_default()),
        );
    }
    let (networks, problems) = resolve(&requests, ns, &found, &ctx.config.additional_subnets);
    ctx.tell(pod, Topic::Networks, ACTION, &problems).await;
    Ok(networks)
}
