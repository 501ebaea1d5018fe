//! Services → Octavia, as pure functions.
//!
//! - [`allow`]: the operator's allow-lists (providers, VIP subnet, project, floating IPs): what a Service
//!   asked for outside them is refused, with a [`Problem`] each.
//! - [`service`]: a Service (+ its endpoints) → the desired KuryrLoadBalancer spec, or the reason it gets none
//!   (headless, ExternalName, unknown types, `default/kubernetes` when the operator turned it off).
//! - [`endpoints`]: EndpointSlices discovery.k8s.io/v1 → the spec's `endpointSlices`; which endpoints become members.
//! - [`desired`]: spec + what the cloud's Octavia can do (API version, provider) → the load balancer tree to
//!   build, and the [`Problem`]s (unsupported combinations) that become an Event and a condition while the
//!   rest of the Service is still served.
//! - [`plan`]: desired tree vs the observed one → the fewest Octavia writes ([`Op`]): one fully-populated create
//!   for a new Service, one batch member replace per pool whose members changed.
//! - [`fit`]: the same writes shaped to the cloud's request-size limit (members in several bodies).
//! - [`member_subnet`]: which subnet members are declared on (pods: the pod subnet; the API servers of
//!   `default/kubernetes` and other non-pod backends: the subnet holding them).
//! - [`health`]: provisioning states → wait, go on, or replace the load balancer (ERROR, PENDING_* too long).
//! - [`schedule`]: when to look at a load balancer again (polls while pending, endpoint bursts coalesced,
//!   our own status write's echo skipped, strays swept), from the clock the caller passes in.
//! - [`landing`]: whether a cleanup must wait for a create a killed process sent, which may still land.
//! - [`index`]: the cluster's load balancers as a few list calls per tick show them, and which reconciles
//!   to wake (settled after a wait, drift, gone, strays): one observer instead of a poll per load balancer.
//!
//! No I/O: the controller reads Kubernetes and Octavia, and carries the ops out.

pub mod allow;
pub mod desired;
pub mod endpoints;
pub mod fit;
pub mod health;
pub mod index;
pub mod landing;
pub mod member_subnet;
pub mod model;
pub mod names;
pub mod plan;
pub mod schedule;
pub mod service;

#[cfg(test)]
mod tests;

pub use allow::{claim_floating_ip, enforce, AllowList, Enforced, ExistingFip, FipClaim};
pub use desired::{desired_lb, OctaviaCaps, ProviderFeature};
pub use fit::{Fit, Unlimited};
pub use health::{assess, Assessment, ProvisioningStatus, RepairKind};
pub use index::{AttrsDigest, IndexConfig, LbIndex, Part, Sighting, Wake, WakeReason};
pub use landing::cleanup_hold;
pub use model::{
    AdditionalVip, DesiredHm, DesiredLb, DesiredListener, DesiredPool, ListenerKey, MemberKey, MemberSubnets,
    ObservedHm, ObservedLb, ObservedListener, ObservedPool, PersistenceKind, Problem, SessionPersistence,
};
pub use plan::{create_op, plan, Op};
pub use schedule::{RoundStart, Schedule, ScheduleConfig};
pub use service::{service_spec, Skip, SpecDefaults};
