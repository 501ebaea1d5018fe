//! When a pod's ports count as up: the short wait after a port is made, before the first status write
//! ([`settle`]), and the polls of the ports a written status names as not ACTIVE yet ([`poll`]).

use std::time::Duration;

use kuryr_api::{KuryrPortStatus, Vif, VifType};
use kuryr_core::neutron::PortStatus;
use kuryr_openstack::neutron::ports::Port;
use tracing::debug;

use crate::context::Context;
use crate::errors::Result;
use crate::ports::macvlan;

/// How long a new port may take to go ACTIVE before the status is written without it (ML2/OVN subports:
/// 0.05-1.3 s).
const SETTLE: Duration = Duration::from_secs(2);

/// Polls every port not ACTIVE yet (macvlan: the VM port, the pod port stays DOWN); whether any went up.
pub async fn poll(ctx: &Context, st: &mut KuryrPortStatus) -> Result<bool> {
    let mut changed = false;
    for entry in st.vifs.values_mut().filter(|v| !v.vif.active) {
        let port = ctx.port_reads.get(polled_port(&entry.vif)).await?;
        if is_up(&entry.vif, &port) {
            entry.vif.active = true;
            changed = true;
        }
    }
    Ok(changed)
}

/// The port whose status says the VIF is up (macvlan: the VM port; the pod's own port stays DOWN).
fn polled_port(vif: &Vif) -> &str {
    match (vif.vif_type, &vif.parent_port_id) {
        (VifType::NestedMacvlan, Some(vm_port)) => vm_port,
        _ => &vif.port_id,
    }
}

/// Whether the polled port says the VIF carries traffic. A macvlan pod's VM port counts once bound and up:
/// ML2/OVN's Neutron status of it lags OVN by minutes after address-pair updates (docs/pod-networking.md).
fn is_up(vif: &Vif, polled: &Port) -> bool {
    match (vif.vif_type, &vif.parent_port_id) {
        (VifType::NestedMacvlan, Some(_)) => macvlan::vm_port_up(polled),
        _ => PortStatus::parse(&polled.status).is_active(),
    }
}

/// Waits up to [`SETTLE`] for a new port to go ACTIVE before its first status write. The CNI daemon binds
/// only once every VIF is active, so a status naming a port still DOWN serves no one, and writing it costs
/// the apiserver a second patch per pod and the pod a requeue (a 500-pod burst from fresh pool ports: 500
/// patches). A crash meanwhile loses nothing: a pool port no status names goes back to its pool at the
/// rebuild, a port of the pod's own is found by its ownership tags. A failed read only ends the wait.
///
/// Polled every `active_poll_min`, not growing: a subport goes ACTIVE within ~1.3 s, and a growing poll
/// saw it up to ~0.5 s late (a 500-pod burst: settle p99 1.7 s). The reads of every pod settling share one
/// `GET /ports?id=…` a round ([`kuryr_openstack::neutron::ports::PortReads`]), so the cadence costs
/// Neutron a list per round, not a read per pod.
pub async fn settle(ctx: &Context, mut vif: Vif) -> Vif {
    let deadline = tokio::time::Instant::now() + SETTLE;
    let delay = ctx.config.active_poll_min;
    while !vif.active {
        if tokio::time::Instant::now() + delay > deadline {
            break;
        }
        tokio::time::sleep(delay).await;
        match ctx.port_reads.get(polled_port(&vif)).await {
            Ok(port) => vif.active = is_up(&vif, &port),
            Err(e) => {
                debug!(
                    error = &e as &dyn std::error::Error,
                    "ACTIVE read failed; writing the status now"
                );
                break;
            }
        }
    }
    vif
}
