//! Adding and removing a finalizer with JSON patches that `test` the list first, so a concurrent writer's
//! finalizer is never lost (the API server refuses the patch instead and the reconcile is retried).

use kube::api::{Api, Patch, PatchParams};
use kube::Resource;
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use crate::errors::{Error, Result};

pub fn has<K: Resource>(obj: &K, finalizer: &str) -> bool {
    obj.meta()
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == finalizer))
}

pub fn add_ops(current: Option<&[String]>, finalizer: &str) -> Value {
    match current {
        None | Some([]) => json!([
            {"op": "test", "path": "/metadata/finalizers", "value": current.map(<[String]>::to_vec)},
            {"op": "add", "path": "/metadata/finalizers", "value": [finalizer]},
        ]),
        Some(list) => json!([
            {"op": "test", "path": "/metadata/finalizers", "value": list},
            {"op": "add", "path": "/metadata/finalizers/-", "value": finalizer},
        ]),
    }
}

pub fn remove_ops(current: Option<&[String]>, finalizer: &str) -> Option<Value> {
    let i = current?.iter().position(|f| f == finalizer)?;
    let path = format!("/metadata/finalizers/{i}");
    Some(json!([
        {"op": "test", "path": path, "value": finalizer},
        {"op": "remove", "path": path},
    ]))
}

async fn patch<K>(api: &Api<K>, name: &str, ops: Value) -> Result<()>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let patch: json_patch::Patch = serde_json::from_value(ops)?;
    match api
        .patch(name, &PatchParams::default(), &Patch::<()>::Json(patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(Error::kube("patch_finalizer")(e)),
    }
}

pub async fn add<K>(api: &Api<K>, obj: &K, finalizer: &str) -> Result<()>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    if has(obj, finalizer) {
        return Ok(());
    }
    let name = obj
        .meta()
        .name
        .as_deref()
        .ok_or(Error::MissingField("metadata.name"))?;
    patch(api, name, add_ops(obj.meta().finalizers.as_deref(), finalizer)).await
}

pub async fn remove<K>(api: &Api<K>, obj: &K, finalizer: &str) -> Result<()>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let name = obj
        .meta()
        .name
        .as_deref()
        .ok_or(Error::MissingField("metadata.name"))?;
    match remove_ops(obj.meta().finalizers.as_deref(), finalizer) {
        Some(ops) => patch(api, name, ops).await,
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_test_the_list_they_change() {
        assert_eq!(add_ops(None, "f")[1]["value"], json!(["f"]));
        let cur = vec!["other".to_owned(), "f".to_owned()];
        assert_eq!(add_ops(Some(&cur[..1]), "f")[1]["path"], "/metadata/finalizers/-");
        assert_eq!(
            remove_ops(Some(&cur), "f").unwrap()[1]["path"],
            "/metadata/finalizers/1"
        );
        assert!(remove_ops(Some(&cur[..1]), "f").is_none());
    }
}
