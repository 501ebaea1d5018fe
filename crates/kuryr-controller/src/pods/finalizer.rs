//! Adding and removing the pod finalizer with JSON patches that `test` the list first, so a concurrent
//! writer's finalizer is never lost (the apiserver refuses the patch instead and we retry).

use json_patch_ops::{add_ops, remove_ops};
use kuryr_api::{finalizers, Api, Patch, PatchParams, Pod};

use crate::errors::{Error, Result};

pub const MANAGER: &str = "kuryr-controller";

pub fn has(pod: &Pod) -> bool {
    pod.metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == finalizers::POD))
}

/// Adds the finalizer; `false` when the list on the server is not the one `pod` shows (the patch's `test`
/// failed, 422). That is mostly the watch cache behind our own add of a moment ago (a 500-pod burst: a third
/// of the pods, each then logged as a failure and retried after the error backoff); the caller looks again
/// shortly instead.
pub async fn add(api: &Api<Pod>, pod: &Pod) -> Result<bool> {
    let name = pod
        .metadata
        .name
        .as_deref()
        .ok_or(Error::MissingField("metadata.name"))?;
    let ops = add_ops(pod.metadata.finalizers.as_deref());
    match patch(api, name, ops).await {
        Ok(()) => Ok(true),
        Err(Error::Kube {
            source: kube::Error::Api(s),
            ..
        }) if s.code == 422 => Ok(false),
        Err(e) => Err(e),
    }
}

pub async fn remove(api: &Api<Pod>, pod: &Pod) -> Result<()> {
    let name = pod
        .metadata
        .name
        .as_deref()
        .ok_or(Error::MissingField("metadata.name"))?;
    let Some(ops) = remove_ops(pod.metadata.finalizers.as_deref()) else {
        return Ok(());
    };
    match patch(api, name, ops).await {
        // Already gone (no kubelet, grace period 0): nothing left to hold.
        Err(Error::Kube {
            source: kube::Error::Api(s),
            ..
        }) if s.code == 404 => Ok(()),
        other => other,
    }
}

async fn patch(api: &Api<Pod>, name: &str, ops: serde_json::Value) -> Result<()> {
    let patch: json_patch::Patch = serde_json::from_value(ops)?;
    api.patch(name, &PatchParams::default(), &Patch::<()>::Json(patch))
        .await
        .map_err(Error::kube("patch_pod_finalizer"))?;
    Ok(())
}

mod json_patch_ops {
    use kuryr_api::finalizers;
    use serde_json::{json, Value};

    /// Append the finalizer, after checking the list is still what we saw (or absent).
    pub fn add_ops(current: Option<&[String]>) -> Value {
        match current {
            None | Some([]) => json!([
                {"op": "test", "path": "/metadata/finalizers", "value": current.map(<[String]>::to_vec)},
                {"op": "add", "path": "/metadata/finalizers", "value": [finalizers::POD]},
            ]),
            Some(list) => json!([
                {"op": "test", "path": "/metadata/finalizers", "value": list},
                {"op": "add", "path": "/metadata/finalizers/-", "value": finalizers::POD},
            ]),
        }
    }

    /// Remove the finalizer at its index, after checking it is still there; `None` when it is not.
    pub fn remove_ops(current: Option<&[String]>) -> Option<Value> {
        let i = current?.iter().position(|f| f == finalizers::POD)?;
        let path = format!("/metadata/finalizers/{i}");
        Some(json!([
            {"op": "test", "path": path, "value": finalizers::POD},
            {"op": "remove", "path": path},
        ]))
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn adding_to_an_absent_list_tests_for_null_then_sets_the_list() {
            let ops = add_ops(None);
            assert_eq!(ops[0]["value"], Value::Null);
            assert_eq!(ops[1]["value"], json!([finalizers::POD]));
        }

        #[test]
        fn adding_to_a_list_appends_after_testing_the_whole_list() {
            let current = vec!["other/keep".to_owned()];
            let ops = add_ops(Some(&current));
            assert_eq!(ops[0]["value"], json!(["other/keep"]));
            assert_eq!(ops[1]["path"], "/metadata/finalizers/-");
        }

        #[test]
        fn removal_targets_the_finalizers_own_index() {
            let current = vec!["other/keep".to_owned(), finalizers::POD.to_owned()];
            let ops = remove_ops(Some(&current)).unwrap();
            assert_eq!(ops[1]["path"], "/metadata/finalizers/1");
            assert!(remove_ops(Some(&["other/keep".to_owned()])).is_none());
            assert!(remove_ops(None).is_none());
        }
    }
}
