//! The uids of every live object a kuryr ownership tag may name (`kuryr.uid=`), cluster-wide: what the
//! garbage collector (and `kuryrctl gc`) holds tagged cloud objects against. Any failed list is an
//! error (a partial view would make live objects look orphaned); only a Kuryr CRD that is not installed
//! counts as empty.

use std::collections::HashSet;

use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;

use crate::{
    KuryrLoadBalancer, KuryrNetwork, KuryrNetworkPolicy, KuryrPort, ListParams, Namespace, NetworkPolicy,
    Pod, Service,
};

/// Uids of every Pod, Service, Namespace, NetworkPolicy and Kuryr object.
pub async fn live_uids(client: &Client) -> Result<HashSet<String>, kube::Error> {
    let mut uids = HashSet::new();
    uids.extend(uids_of::<Pod>(client, false).await?);
    uids.extend(uids_of::<Service>(client, false).await?);
    uids.extend(uids_of::<Namespace>(client, false).await?);
    uids.extend(uids_of::<NetworkPolicy>(client, false).await?);
    uids.extend(uids_of::<KuryrPort>(client, true).await?);
    uids.extend(uids_of::<KuryrLoadBalancer>(client, true).await?);
    uids.extend(uids_of::<KuryrNetwork>(client, true).await?);
    uids.extend(uids_of::<KuryrNetworkPolicy>(client, true).await?);
    Ok(uids)
}

async fn uids_of<K>(client: &Client, crd: bool) -> Result<Vec<String>, kube::Error>
where
    K: Resource<DynamicType = ()> + Clone + std::fmt::Debug + DeserializeOwned,
{
    let api: Api<K> = Api::all(client.clone());
    match api.list_metadata(&ListParams::default()).await {
        Ok(list) => Ok(list.items.into_iter().filter_map(|m| m.metadata.uid).collect()),
        Err(kube::Error::Api(e)) if crd && e.code == 404 => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}
