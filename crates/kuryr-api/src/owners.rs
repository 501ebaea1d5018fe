//! The uids of every live object a kuryr ownership tag may name (`kuryr.uid=`), cluster-wide: what the
//! garbage collector (and `kuryrctl gc`) holds tagged cloud objects against. Any failed list is an
//! error (a partial view would make live objects look orphaned); only a Kuryr CRD that is not installed
//! counts as empty.

use std::collections::HashSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta;
use kube::core::Request;
use kube::{Client, Resource};
use serde::Deserialize;

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

/// Items per list page: kubectl's chunk size. One unpaginated list of 10,000 KuryrPorts was an 8 MB body,
/// parsed whole with every managedFields document: ~140 MB held at once, the controller's peak.
const PAGE: u32 = 500;

/// A metadata list page as the collector reads it: the items' uids and the continue token. Every other
/// field (managedFields above all) is skipped unparsed.
#[derive(Deserialize)]
struct UidPage {
    #[serde(default)]
    metadata: ListMeta,
    /// `null` when the list is empty (the API server's Go nil slice).
    #[serde(default)]
    items: Option<Vec<UidItem>>,
}

#[derive(Deserialize)]
struct UidItem {
    metadata: UidMeta,
}

#[derive(Deserialize)]
struct UidMeta {
    uid: Option<String>,
}

async fn uids_of<K>(client: &Client, crd: bool) -> Result<Vec<String>, kube::Error>
where
    K: Resource<DynamicType = ()>,
{
    let request = Request::new(K::url_path(&(), None));
    let mut uids = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let mut lp = ListParams::default().limit(PAGE);
        if let Some(t) = &token {
            lp = lp.continue_token(t);
        }
        let mut req = request.list_metadata(&lp).map_err(kube::Error::BuildRequest)?;
        req.extensions_mut().insert("list_metadata");
        let page = match client.request::<UidPage>(req).await {
            Ok(page) => page,
            Err(kube::Error::Api(e)) if crd && e.code == 404 => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        uids.extend(page.items.into_iter().flatten().filter_map(|i| i.metadata.uid));
        match page.metadata.continue_.filter(|t| !t.is_empty()) {
            Some(t) => token = Some(t),
            None => return Ok(uids),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{Request, Response};
    use kube::client::Body;
    use serde_json::json;

    /// A KuryrPort as the API server lists its metadata: with a managedFields document.
    fn item(uid: &str) -> serde_json::Value {
        json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": {
            "name": uid, "namespace": "ns", "uid": uid,
            "managedFields": [{"manager": "m", "operation": "Update", "fieldsType": "FieldsV1",
                               "fieldsV1": {"f:metadata": {"f:finalizers": {".": {}}}}}]}})
    }

    /// The uids of a kind come page by page (a page limit on every request, the continue token of
    /// the previous answer on the next), an empty list's `null` items are none, and an uninstalled CRD
    /// counts as none.
    #[tokio::test]
    async fn uids_are_listed_page_by_page() {
        let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let server = tokio::spawn(async move {
            let mut queries = Vec::new();
            let gone = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                              "reason": "NotFound", "code": 404, "message": "not found"});
            for (status, answer) in [
                (
                    200,
                    json!({"metadata": {"continue": "next"}, "items": [item("a"), item("b")]}),
                ),
                (200, json!({"metadata": {"continue": ""}, "items": [item("c")]})),
                (
                    200,
                    json!({"kind": "PartialObjectMetadataList", "metadata": {}, "items": null}),
                ),
                (404, gone),
            ] {
                let (req, send) = handle.next_request().await.expect("a list request");
                queries.push(req.uri().query().unwrap_or_default().to_owned());
                let body = serde_json::to_vec(&answer).expect("json");
                send.send_response(
                    Response::builder()
                        .status(status)
                        .body(Body::from(body))
                        .expect("response"),
                );
            }
            queries
        });
        let client = Client::new(service, "default");
        let uids = uids_of::<KuryrPort>(&client, true).await.expect("listed");
        assert_eq!(uids, ["a", "b", "c"]);
        let empty = uids_of::<NetworkPolicy>(&client, false)
            .await
            .expect("an empty list's items are null");
        assert!(empty.is_empty());
        let none = uids_of::<KuryrLoadBalancer>(&client, true)
            .await
            .expect("no CRD, no uids");
        assert!(none.is_empty());
        let queries = server.await.expect("server");
        assert!(queries.iter().all(|q| q.contains("limit=500")), "{queries:?}");
        assert!(!queries[0].contains("continue="), "{queries:?}");
        assert!(queries[1].contains("continue=next"), "{queries:?}");
        assert!(!queries[2].contains("continue="), "{queries:?}");
    }
}
