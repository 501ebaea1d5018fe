//! Adding and removing our finalizers with JSON patches that `test` the list first, so a concurrent
//! writer's finalizer is never lost: the API server refuses the patch instead (422) and we look again.

use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::Resource;
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use crate::errors::{Error, Result};

/// Field manager of our writes to other controllers' objects.
pub const MANAGER: &str = "kuryr-controller";

pub fn has<K: Resource>(obj: &K, finalizer: &str) -> bool {
    obj.meta()
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == finalizer))
}

/// Adds `finalizer` (a no-op when the object shows it); `false` when it was not added because the list on
/// the server is not the one `obj` shows (the patch's `test` failed, 422) or the object is gone. The former
/// is mostly a watch cache behind our own add of a moment ago (a 500-pod burst: a third of the pods): the
/// caller looks again shortly instead of counting a failure.
pub async fn add<K>(api: &Api<K>, obj: &K, finalizer: &str) -> Result<bool>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    if has(obj, finalizer) {
        return Ok(true);
    }
    let ops = add_ops(obj.meta().finalizers.as_deref(), finalizer);
    match patch(api, name(obj)?, ops).await {
        Ok(()) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 422 || s.code == 404 => Ok(false),
        Err(e) => Err(Error::kube("add_finalizer")(e)),
    }
}

/// When kube's `finalizer` helper could not add its finalizer because the list on the server is not the
/// one the cached object shows (its patch's `test` failed, 422), the reconcile looks again after this,
/// without counting a failure: mostly a watch cache behind the helper's own add of a moment ago (a second
/// trigger that came while the first reconcile ran: ~1 in 20 KuryrLoadBalancers at 2,000 Services), whose
/// event usually wakes the reconcile sooner.
pub const LOOK_AGAIN: std::time::Duration = std::time::Duration::from_secs(1);

/// A reconcile's result from kube's `finalizer` helper: a refused add (see [`LOOK_AGAIN`]) is a look again,
/// any other error is `Error::Finalizer`.
pub fn outcome(
    result: std::result::Result<Action, kube::runtime::finalizer::Error<Error>>,
) -> Result<Action> {
    match result {
        Err(kube::runtime::finalizer::Error::AddFinalizer(kube::Error::Api(s))) if s.code == 422 => {
            tracing::debug!("finalizer list changed since the cached object: looking again");
            Ok(Action::requeue(LOOK_AGAIN))
        }
        other => other.map_err(|e| Error::Finalizer(Box::new(e))),
    }
}

/// Removes `finalizer`; done when the object does not show it or is gone.
pub async fn remove<K>(api: &Api<K>, obj: &K, finalizer: &str) -> Result<()>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let Some(ops) = remove_ops(obj.meta().finalizers.as_deref(), finalizer) else {
        return Ok(());
    };
    match patch(api, name(obj)?, ops).await {
        // Already gone (no kubelet, grace period 0): nothing left to hold.
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        other => other.map_err(Error::kube("remove_finalizer")),
    }
}

fn name<K: Resource>(obj: &K) -> Result<&str> {
    obj.meta()
        .name
        .as_deref()
        .ok_or(Error::MissingField("metadata.name"))
}

async fn patch<K>(api: &Api<K>, name: &str, ops: Value) -> kube::Result<()>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let patch: json_patch::Patch = serde_json::from_value(ops).map_err(kube::Error::SerdeError)?;
    api.patch(name, &PatchParams::default(), &Patch::<()>::Json(patch))
        .await
        .map(drop)
}

/// Append the finalizer, after checking the list is still what we saw (or absent).
fn add_ops(current: Option<&[String]>, finalizer: &str) -> Value {
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

/// Remove the finalizer at its index, after checking it is still there; `None` when it is not.
fn remove_ops(current: Option<&[String]>, finalizer: &str) -> Option<Value> {
    let i = current?.iter().position(|f| f == finalizer)?;
    let path = format!("/metadata/finalizers/{i}");
    Some(json!([
        {"op": "test", "path": path, "value": finalizer},
        {"op": "remove", "path": path},
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adding_to_an_absent_list_tests_for_null_then_sets_the_list() {
        let ops = add_ops(None, "f");
        assert_eq!(ops[0]["value"], Value::Null);
        assert_eq!(ops[1]["value"], json!(["f"]));
    }

    #[test]
    fn adding_to_a_list_appends_after_testing_the_whole_list() {
        let current = vec!["other/keep".to_owned()];
        let ops = add_ops(Some(&current), "f");
        assert_eq!(ops[0]["value"], json!(["other/keep"]));
        assert_eq!(ops[1]["path"], "/metadata/finalizers/-");
    }

    #[test]
    fn removal_targets_the_finalizers_own_index() {
        let current = vec!["other/keep".to_owned(), "f".to_owned()];
        let ops = remove_ops(Some(&current), "f").unwrap();
        assert_eq!(ops[0]["value"], "f");
        assert_eq!(ops[1]["path"], "/metadata/finalizers/1");
        assert!(remove_ops(Some(&["other/keep".to_owned()]), "f").is_none());
        assert!(remove_ops(None, "f").is_none());
    }
}
