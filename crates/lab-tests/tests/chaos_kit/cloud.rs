//! The chaos suite's cloud: an in-process cloudsim shaped like the lab (pod network, one trunk per lab VM,
//! service subnet = the API server's service range, a router and an external network), and the cloud faults
//! the suite injects into it.

use anyhow::Context as _;
use kuryr_cloudsim::{FaultRule, LbFaultRule, LbOutcome, LbPhase};
use kuryr_openstack::neutron::quotas;
use kuryr_openstack::octavia::quotas as lb_quotas;
use lab_tests::Lab;

use crate::podnet::TestCloud;

pub struct ChaosCloud {
    pub pods: TestCloud,
    pub service_subnet_id: String,
    pub external_network_id: String,
    pub project_id: String,
}

impl ChaosCloud {
    pub async fn start(lab: &Lab) -> anyhow::Result<ChaosCloud> {
        let pods = TestCloud::cloudsim(lab, |p| {
            p.time_scale = 1.0;
            crate::simnets::short_provisioning(p);
        })
        .await?;
        let cloud = &pods.cloud;
        let nets = crate::simnets::services_and_router(cloud, &pods.subnet_id).await?;
        let project_id = cloud.project_id().context("the token's project")?;
        Ok(ChaosCloud {
            pods,
            service_subnet_id: nets.service_subnet_id,
            external_network_id: nets.external_network_id,
            project_id,
        })
    }

    pub fn sim(&self) -> &kuryr_cloudsim::SimHandle {
        self.pods.sim()
    }

    /// Port quota down to what is in use: every port create fails with 409 OverQuota until [`Self::recover_quotas`].
    pub async fn exhaust_port_quota(&self) -> anyhow::Result<i64> {
        let used = quotas::details(&self.pods.cloud, &self.project_id)
            .await?
            .get("port")
            .map(|d| d.used)
            .unwrap_or_default();
        quotas::update(
            &self.pods.cloud,
            &self.project_id,
            &[("port".to_owned(), used)].into(),
        )
        .await?;
        Ok(used)
    }

    /// Octavia's load balancer quota down to the LBs there are: the next LB create is a 403.
    pub async fn exhaust_lb_quota(&self, lbs: i64) -> anyhow::Result<()> {
        lb_quotas::update(
            &self.pods.cloud,
            &self.project_id,
            &[("load_balancer".to_owned(), lbs)].into(),
        )
        .await?;
        Ok(())
    }

    pub async fn recover_quotas(&self) -> anyhow::Result<()> {
        quotas::reset(&self.pods.cloud, &self.project_id).await?;
        lb_quotas::reset(&self.pods.cloud, &self.project_id).await?;
        Ok(())
    }
}

/// One kind of cloud fault the suite injects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// 5xx on a share of Neutron and Octavia calls, some after the call was carried out (lost answers).
    ServerErrors,
    /// 409 IPAM races on port creates.
    IpamConflicts,
    /// Calls held without an answer for seconds (the controller is often killed meanwhile).
    Timeouts,
    /// The next LB update never leaves PENDING_UPDATE.
    LbStuckPendingUpdate,
    /// The next LB update ends in ERROR.
    LbError,
}

impl Fault {
    pub const ALL: [Fault; 5] = [
        Fault::ServerErrors,
        Fault::IpamConflicts,
        Fault::Timeouts,
        Fault::LbStuckPendingUpdate,
        Fault::LbError,
    ];

    /// Injects one burst of this fault; LB faults only hit load balancers named `<ns>/...`.
    pub fn inject(self, sim: &kuryr_cloudsim::SimHandle, ns: &str) {
        let rule = |op: &str, status: Option<u16>, count: u64| FaultRule {
            op: op.into(),
            status,
            count: Some(count),
            ..FaultRule::default()
        };
        match self {
            Fault::ServerErrors => {
                sim.add_fault(FaultRule {
                    rate: 0.3,
                    ..rule("neutron.*", Some(503), 12)
                });
                sim.add_fault(FaultRule {
                    rate: 0.3,
                    ..rule("octavia.*", Some(500), 6)
                });
                // Lost answers: carried out, then a 5xx; the client's retry meets what it already did.
                for (op, n) in [
                    ("neutron.ports.bulk_create", 2),
                    ("neutron.ports.update", 1),
                    ("neutron.ports.delete", 1),
                    ("neutron.trunks.add_subports", 1),
                    ("neutron.trunks.remove_subports", 1),
                    ("octavia.loadbalancers.create", 1),
                    ("octavia.members.batch_update", 1),
                ] {
                    sim.add_fault(FaultRule {
                        execute: true,
                        ..rule(op, Some(502), n)
                    });
                }
            }
            Fault::IpamConflicts => {
                for kind in ["IpAddressGenerationFailure", "IpAddressAlreadyAllocated"] {
                    sim.add_fault(FaultRule {
                        kind: Some(kind.into()),
                        ..rule("neutron.ports.bulk_create", Some(409), 2)
                    });
                }
            }
            Fault::Timeouts => {
                for (op, hold) in [
                    ("neutron.ports.bulk_create", 4000),
                    ("neutron.trunks.add_subports", 3000),
                    ("neutron.trunks.remove_subports", 3000),
                    ("octavia.loadbalancers.create", 3000),
                ] {
                    sim.add_fault(FaultRule {
                        hold_ms: Some(hold),
                        ..rule(op, None, 1)
                    });
                }
            }
            Fault::LbStuckPendingUpdate | Fault::LbError => sim.add_lb_fault(LbFaultRule {
                name: Some(format!("{ns}/*")),
                on: LbPhase::Update,
                outcome: if self == Fault::LbError {
                    LbOutcome::Error
                } else {
                    LbOutcome::Stuck
                },
                count: Some(1),
                ..LbFaultRule::default()
            }),
        }
    }
}
