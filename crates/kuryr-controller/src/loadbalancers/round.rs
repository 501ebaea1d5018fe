//! What the steps of one KuryrLoadBalancer round share: [`prepare`] makes the [`Round`] (the spec held to
//! the allow-lists, the tree it asks for, the status being built) that [`locate`](super::locate),
//! [`create`](super::create), [`converge`](super::converge) and [`expose`](super::expose) work on, and
//! each ends the round with a [`Next`].

use std::time::{Duration, Instant};

use kube::runtime::events::EventType;
use kuryr_api::loadbalancer::KuryrLoadBalancerStatus;
use kuryr_api::{Api, KuryrLoadBalancer, Resource, ResourceExt};
use kuryr_core::lb::{
    desired_lb, enforce, AllowList, DesiredLb, Enforced, MemberSubnets, OctaviaCaps, Problem,
};
use kuryr_openstack::Owner;

use super::observer::LbKey;
use super::service::{owner, service_ref};
use super::status;
use crate::errors::Result;
use crate::services::context::LbContext;
use crate::toolkit::{Topic, Uid};

/// What a round leaves: when the next one is due, and the resourceVersion of its status write if it made
/// one (its watch echo then needs no look before that).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Next {
    pub after: Duration,
    pub written: Option<String>,
}

impl Next {
    /// Look again right away (the load balancer changed under the round).
    pub fn now() -> Self {
        Self::default()
    }

    /// Wait `after` without having written.
    pub fn wait(after: Duration) -> Self {
        Self { after, written: None }
    }
}

/// What every step works from.
pub struct Round<'a> {
    pub api: &'a Api<KuryrLoadBalancer>,
    pub klb: &'a KuryrLoadBalancer,
    pub ctx: &'a LbContext,
    pub uid: Uid,
    pub generation: Option<i64>,
    pub owner: Owner,
    pub tags: Vec<String>,
    pub allow: AllowList,
    /// The spec with whatever the allow-lists refuse taken out.
    pub enforced: Enforced,
    pub desired: DesiredLb,
    pub member_subnet: Option<String>,
    /// The status being built; written once per round.
    pub st: KuryrLoadBalancerStatus,
}

impl Round<'_> {
    /// Records the `Ready` condition and writes the status; the round ends with the next look `after`.
    pub async fn finish(
        &mut self,
        after: Duration,
        ready: bool,
        reason: &str,
        message: String,
    ) -> Result<Next> {
        status::ready(&mut self.st, self.generation, ready, reason, message);
        self.write(after).await
    }

    /// Writes the status as it stands; the round ends with the next look `after`.
    pub async fn write(&mut self, after: Duration) -> Result<Next> {
        let written = status::write(self.api, self.klb, &self.st).await?;
        Ok(Next { after, written })
    }

    /// Which reconcile this is, for the observer.
    pub fn key(&self) -> LbKey {
        LbKey::of(self.klb, self.uid.as_str())
    }

    /// `lb_id` is left PENDING_* (by our write: `wrote`): the observer wakes this reconcile once a
    /// listing shows it settled. The next look of our own is then only the stuck check, `left` from now;
    /// before the observer has listed anything, it is the poll `poll`.
    pub fn pending_look(&self, lb_id: &str, wrote: bool, poll: Duration, left: Duration) -> Duration {
        let observer = &self.ctx.observer;
        observer.await_settle(lb_id, self.key(), wrote);
        if observer.observing() {
            left.max(poll)
        } else {
            poll
        }
    }

    /// How long to let an endpoints burst gather before acting on this generation; `None`: act now. A
    /// Service with no load balancer yet whose every port has a backend gets one at once: what follows
    /// is gathered into member writes as any change is (a port without one waits, for its slice may come).
    pub fn coalesce(&self) -> Option<Duration> {
        if self.st.loadbalancer.is_none() && self.desired.has_backends() {
            return None;
        }
        self.ctx.schedule().coalesce(
            self.uid.as_str(),
            self.generation.unwrap_or_default(),
            Instant::now(),
        )
    }

    /// Unsupported or refused parts of the Service: a Warning Event each on the KuryrLoadBalancer and its
    /// Service, unless the same set was told on `topic` last time.
    pub async fn tell(&self, topic: Topic, problems: &[Problem]) {
        let messages = problems
            .iter()
            .map(|p| format!("{}: {}", p.reason, p.message))
            .collect();
        if !self.ctx.ledger.news(&self.uid, topic, messages) {
            return;
        }
        for p in &Problem::by_reason(problems) {
            for obj in [self.klb.object_ref(&()), service_ref(self.klb)] {
                self.ctx
                    .events
                    .publish(
                        &obj,
                        EventType::Warning,
                        p.reason,
                        "BuildLoadBalancer",
                        p.message.clone(),
                    )
                    .await;
            }
        }
    }
}

/// The spec held to the operator's allow-lists first (nothing outside them reaches the cloud), the tree it
/// asks for of this cloud's Octavia, and the problems with it told.
pub async fn prepare<'a>(
    api: &'a Api<KuryrLoadBalancer>,
    klb: &'a KuryrLoadBalancer,
    ctx: &'a LbContext,
    uid: Uid,
) -> Result<Round<'a>> {
    let ns = klb.namespace().unwrap_or_default();
    let name = klb.name_any();
    let generation = klb.metadata.generation;
    let owner = owner(ctx, klb);
    let tags = owner.tags()?;
    let features = ctx.cloud.octavia_features().await?;
    let project = ctx.project_id.clone().or_else(|| ctx.cloud.project_id());
    let allow = ctx.config.allow_list(project);
    let enforced = enforce(&klb.spec, &allow);
    let spec = &enforced.spec;
    let provider = spec
        .provider
        .clone()
        .unwrap_or_else(|| ctx.config.default_provider.clone());
    let caps = OctaviaCaps {
        version: features.version,
        refused: ctx.refused_by(&provider),
        provider,
    };
    // Pods go on the pod subnet; the API servers of default/kubernetes (and other non-pod backends) on the
    // subnet holding them.
    let addresses: Vec<&str> = spec
        .endpoint_slices
        .iter()
        .flat_map(|s| &s.endpoints)
        .flat_map(|e| e.addresses.iter().map(String::as_str))
        .collect();
    // One subnet per family: a dual-stack pool holds members of both.
    let (v6, v4): (Vec<&str>, Vec<&str>) = addresses.iter().partition(|a| a.contains(':'));
    let member_subnet = ctx
        .subnets
        .member_subnet(&ctx.cloud, &v4, ctx.config.member_subnet_id.as_deref())
        .await;
    let v6_default = ctx
        .config
        .secondary_member_subnet_id
        .as_deref()
        .or(ctx.config.member_subnet_id.as_deref());
    let member_subnets = MemberSubnets {
        v4: member_subnet.clone(),
        v6: ctx.subnets.member_subnet(&ctx.cloud, &v6, v6_default).await,
    };
    let (desired, problems) = desired_lb(&ns, &name, spec, &caps, &member_subnets);
    let mut st = klb.status.clone().unwrap_or_default();
    status::supported(&mut st, generation, &problems);
    status::allowed(&mut st, generation, &enforced.refused);
    let round = Round {
        api,
        klb,
        ctx,
        uid,
        generation,
        owner,
        tags,
        allow,
        desired,
        member_subnet,
        st,
        enforced,
    };
    let told: Vec<Problem> = round.enforced.refused.iter().chain(&problems).cloned().collect();
    round.tell(Topic::Spec, &told).await;
    Ok(round)
}
