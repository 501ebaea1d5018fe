//! The tag API (`/v2.0/{resource}/{id}/tags[/{tag}]`) for every taggable resource. Tag changes bump
//! the resource's revision, as in Neutron.

use std::collections::{BTreeSet, HashSet};
use std::sync::{Arc, Mutex, OnceLock};

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::Json;
use serde_json::{json, Value};

use super::model::Std;
use super::parse_json;
use crate::errors::{ApiError, ApiResult};
use crate::routes::{Routes, NEUTRON};
use crate::state::{lock, Shared};
use crate::world::World;

/// (collection in the URL, resource name in errors, Neutron NotFound type)
const TAGGABLE: &[(&str, &str, &str)] = &[
    ("networks", "Network", "NetworkNotFound"),
    ("subnets", "Subnet", "SubnetNotFound"),
    ("ports", "Port", "PortNotFound"),
    ("routers", "Router", "RouterNotFound"),
    ("security-groups", "Security group", "SecurityGroupNotFound"),
    ("floatingips", "Floating IP", "FloatingIPNotFound"),
    ("subnetpools", "Subnet pool", "SubnetPoolNotFound"),
    ("trunks", "Trunk", "TrunkNotFound"),
];

/// Op names are built at registration; interned so repeated router builds don't leak.
fn intern(s: String) -> &'static str {
    static NAMES: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut set = lock(NAMES.get_or_init(Default::default));
    if let Some(existing) = set.get(s.as_str()) {
        return existing;
    }
    let leaked: &'static str = Box::leak(s.into_boxed_str());
    set.insert(leaked);
    leaked
}

fn with_std<R>(w: &mut World, coll: &str, id: &str, f: impl FnOnce(&mut Std) -> R) -> Option<R> {
    match coll {
        "ports" => w.update_port(id, |p| f(&mut p.std)),
        "networks" => w.networks.get_mut(id).map(|x| f(&mut x.std)),
        "subnets" => w.subnets.get_mut(id).map(|x| f(&mut x.std)),
        "routers" => w.routers.get_mut(id).map(|x| f(&mut x.std)),
        "security-groups" => w.security_groups.get_mut(id).map(|x| f(&mut x.std)),
        "floatingips" => w.fips.get_mut(id).map(|x| f(&mut x.std)),
        "subnetpools" => w.subnetpools.get_mut(id).map(|x| f(&mut x.std)),
        "trunks" => w.trunks.get_mut(id).map(|x| f(&mut x.std)),
        _ => None,
    }
}

fn missing(coll: &str, id: &str) -> ApiError {
    let (_, what, kind) = TAGGABLE
        .iter()
        .find(|(c, _, _)| *c == coll)
        .copied()
        .unwrap_or(("", "Resource", "NotFound"));
    ApiError::not_found(kind, format!("{what} {id} could not be found."))
}

fn tag_not_found(tag: &str) -> ApiError {
    ApiError::not_found("TagNotFound", format!("Tag {tag} could not be found."))
}

fn validate(tag: &str) -> ApiResult<()> {
    if tag.is_empty() || tag.len() > 255 {
        return Err(ApiError::bad_request(format!(
            "Invalid input for tags. Reason: '{tag}' is not a valid tag."
        )));
    }
    Ok(())
}

fn tags_json(t: &BTreeSet<String>) -> Value {
    json!({ "tags": t })
}

pub fn register(r: &mut Routes) {
    for (coll, _, _) in TAGGABLE {
        let c: &'static str = coll;
        let base = c.replace('-', "_");
        let name = |verb: &str| intern(format!("neutron.{base}.tags.{verb}"));
        let path = format!("/v2.0/{c}/{{id}}/tags");
        let path_tag = format!("/v2.0/{c}/{{id}}/tags/{{tag}}");

        r.get(
            NEUTRON,
            &path,
            name("list"),
            move |State(sh): State<Arc<Shared>>, Path(id): Path<String>| async move {
                let mut w = sh.world();
                with_std(&mut w, c, &id, |s| Json(tags_json(&s.tags)).into_response())
                    .ok_or_else(|| missing(c, &id))
            },
        );
        r.put(
            NEUTRON,
            &path,
            name("replace"),
            move |State(sh): State<Arc<Shared>>, Path(id): Path<String>, body: Bytes| async move {
                let v = parse_json(&body)?;
                let tags: Vec<String> = v
                    .get("tags")
                    .and_then(Value::as_array)
                    .ok_or_else(|| {
                        ApiError::bad_request("Invalid input for tags. Reason: 'tags' is not a list.")
                    })?
                    .iter()
                    .map(|t| {
                        t.as_str()
                            .map(str::to_owned)
                            .ok_or_else(|| ApiError::bad_request(format!("Invalid tag {t}")))
                    })
                    .collect::<ApiResult<_>>()?;
                for t in &tags {
                    validate(t)?;
                }
                let mut w = sh.world();
                with_std(&mut w, c, &id, |s| {
                    s.tags = tags.into_iter().collect();
                    s.touch();
                    Json(tags_json(&s.tags)).into_response()
                })
                .ok_or_else(|| missing(c, &id))
            },
        );
        r.delete(
            NEUTRON,
            &path,
            name("remove_all"),
            move |State(sh): State<Arc<Shared>>, Path(id): Path<String>| async move {
                let mut w = sh.world();
                with_std(&mut w, c, &id, |s| {
                    s.tags.clear();
                    s.touch();
                    StatusCode::NO_CONTENT
                })
                .ok_or_else(|| missing(c, &id))
            },
        );
        r.get(
            NEUTRON,
            &path_tag,
            name("check"),
            move |State(sh): State<Arc<Shared>>, Path((id, tag)): Path<(String, String)>| async move {
                let mut w = sh.world();
                match with_std(&mut w, c, &id, |s| s.tags.contains(&tag)) {
                    None => Err(missing(c, &id)),
                    Some(false) => Err(tag_not_found(&tag)),
                    Some(true) => Ok(StatusCode::NO_CONTENT),
                }
            },
        );
        r.put(
            NEUTRON,
            &path_tag,
            name("add"),
            move |State(sh): State<Arc<Shared>>, Path((id, tag)): Path<(String, String)>| async move {
                validate(&tag)?;
                let mut w = sh.world();
                with_std(&mut w, c, &id, |s| {
                    if s.tags.insert(tag) {
                        s.touch();
                    }
                    StatusCode::CREATED
                })
                .ok_or_else(|| missing(c, &id))
            },
        );
        r.delete(
            NEUTRON,
            &path_tag,
            name("remove"),
            move |State(sh): State<Arc<Shared>>, Path((id, tag)): Path<(String, String)>| async move {
                let mut w = sh.world();
                match with_std(&mut w, c, &id, |s| {
                    let removed = s.tags.remove(&tag);
                    if removed {
                        s.touch();
                    }
                    removed
                }) {
                    None => Err(missing(c, &id)),
                    Some(false) => Err(tag_not_found(&tag)),
                    Some(true) => Ok(StatusCode::NO_CONTENT),
                }
            },
        );
    }
}
