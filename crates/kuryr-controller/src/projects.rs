//! The project a namespace's pods, network and security groups are made in, read off its Namespace's
//! `openstack.org/kuryr-project` annotation and held to `--namespace-projects`
//! ([`kuryr_core::projects`]). Without that list no Namespace is read: everything is the controller's.

use std::collections::BTreeMap;
use std::time::Instant;

use kuryr_api::{Api, Namespace};
use kuryr_core::projects::ProjectChoice;

use crate::config::networks::SubnetMode;
use crate::context::Context;
use crate::errors::{Error, Result};
use crate::toolkit::Topic;

/// Where a Namespace with `annotations` has its resources made (and why not where it asked).
pub fn choice(ctx: &Context, annotations: Option<&BTreeMap<String, String>>) -> ProjectChoice {
    ctx.config
        .namespace_projects
        .for_namespace(annotations, &ctx.project_id)
}

/// The project of namespace `ns`'s resources (a gone Namespace: the controller's).
pub async fn of_namespace(ctx: &Context, ns: &str) -> Result<String> {
    let projects = &ctx.config.namespace_projects;
    if !projects.enabled() {
        return Ok(ctx.project_id.clone());
    }
    if let Some(p) = ctx.namespace_projects.get(ns, Instant::now()) {
        return Ok(p);
    }
    let found = Api::<Namespace>::all(ctx.client.clone())
        .get_opt(ns)
        .await
        .map_err(Error::kube("get_namespace"))?;
    let choice = choice(ctx, found.as_ref().and_then(|n| n.metadata.annotations.as_ref()));
    // With namespace networks, the Namespace controller tells it (with the other annotations).
    if let (Some(n), Some(p)) = (&found, &choice.refused) {
        if ctx.config.networks.mode != SubnetMode::Namespace {
            ctx.tell(n, Topic::Project, "ReadNamespace", std::slice::from_ref(p))
                .await;
        }
    }
    ctx.namespace_projects
        .put(ns, choice.project_id.clone(), Instant::now());
    Ok(choice.project_id)
}

/// The project a KuryrPort or KuryrNetwork spec records, held to the list (the field is operator-only,
/// but a stale one must not outlive the list's change).
pub fn recorded<'a>(ctx: &'a Context, recorded: Option<&'a str>) -> &'a str {
    ctx.config
        .namespace_projects
        .recorded(recorded.filter(|p| !p.is_empty()), &ctx.project_id)
}
