//! Deleting the very object a reconcile saw, not a namesake made since.

use kube::api::{DeleteParams, Preconditions};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use std::fmt::Debug;

/// Deletes `obj` only while its uid is the one read (a namesake created since is left alone). Gone already
/// (404) or replaced (409, the uid precondition failed) both mean there is nothing of ours left to delete.
pub async fn delete_exact<K>(api: &Api<K>, obj: &K) -> Result<bool, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let dp = DeleteParams {
        preconditions: Some(Preconditions {
            uid: obj.meta().uid.clone(),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(&obj.name_any(), &dp).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(false),
        Err(e) => Err(e),
    }
}
