//! The project a namespace's pods, network and security groups are made in, read off its Namespace's
//! `openstack.org/kuryr-project` annotation and held to `--namespace-projects`
//! ([`kuryr_core::projects`]). Without that list no Namespace is read: everything is the controller's.

use std::time::Instant;

use crate::networks::SubnetMode;
use kube::runtime::events::EventType;
use kuryr_api::{Api, Namespace, Resource};

use crate::context::Context;
use crate::errors::{Error, Result};
use crate::toolkit::{Topic, Uid};

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
    let choice = projects.for_namespace(
        found.as_ref().and_then(|n| n.metadata.annotations.as_ref()),
        &ctx.project_id,
    );
    // With namespace networks, the Namespace controller tells it (with the other annotations).
    if let (Some(n), Some(p)) = (&found, &choice.refused) {
        let told = vec![p.message.clone()];
        if ctx.config.networks.mode != SubnetMode::Namespace
            && ctx.ledger.news(&Uid::of(n), Topic::Project, told)
        {
            ctx.events
                .publish(
                    &n.object_ref(&()),
                    EventType::Warning,
                    p.reason,
                    "ReadNamespace",
                    p.message.clone(),
                )
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
