//! The scenarios. Each takes a [`Ctx`], registers what it creates for cleanup, and checks with
//! `ensure!` (not panics), so cleanup always runs.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context};
use kuryr_openstack::client::Request;
use kuryr_openstack::neutron::ports::{self, CreatePort};
use kuryr_openstack::neutron::routers::{self, CreateRouter, GatewayInfo, Interface};
use kuryr_openstack::neutron::security_groups::{self, CreateRule, CreateSecurityGroup};
use kuryr_openstack::neutron::subnets::{self, CreateSubnet};
use kuryr_openstack::neutron::trunks::{self, CreateTrunk, SubPort};
use kuryr_openstack::neutron::{floating_ips, networks, quotas, Filter};
use kuryr_openstack::octavia::healthmonitors::{self, CreateHealthMonitor};
use kuryr_openstack::octavia::listeners::{self, CreateListener};
use kuryr_openstack::octavia::loadbalancers::{self, CreateLoadBalancer, LoadBalancer};
use kuryr_openstack::octavia::members::{self, CreateMember};
use kuryr_openstack::octavia::pools::CreatePool;
use kuryr_openstack::octavia::quotas as octavia_quotas;
use kuryr_openstack::{waiter, Cloud, ErrorKind, RetryPolicy, Service};
use reqwest::Method;
use serde_json::json;

use super::backend::{Ctx, Item, Kind};

fn uniq_octet() -> u8 {
    fastrand::u8(2..250)
}

// === Neutron ===

/// Network + subnet (no DHCP, tagged) + router with an external gateway; interface add/remove; tag filters.
pub async fn network_subnet_router(x: Ctx) -> anyhow::Result<()> {
    let (b, c) = (&x.b, &x.c);
    let cloud = &b.cloud;
    let owner = b.owner("namespace");
    let tags = owner.tags()?;
    let net = networks::create(cloud, &networks::CreateNetwork::named(b.name("net")), &tags).await?;
    c.push(Item::Network(net.id.clone()));
    ensure!(net.tags.len() == 3, "network tags: {:?}", net.tags);
    let cidr = format!("10.{}.{}.0/24", uniq_octet(), uniq_octet());
    let sub = subnets::create(cloud, &CreateSubnet::v4(&net.id, &cidr), &tags).await?;
    c.push(Item::Subnet(sub.id.clone()));
    ensure!(
        sub.cidr == cidr && !sub.enable_dhcp && sub.network_id == net.id,
        "{sub:?}"
    );
    // Updates: name, description, MTU; subnet name and DNS. Read-only attributes are 400.
    let nu = networks::UpdateNetwork {
        name: Some(b.name("net-renamed")),
        description: Some("renamed".into()),
        mtu: Some(1400),
        ..networks::UpdateNetwork::default()
    };
    let got = networks::update(cloud, &net.id, &nu).await?;
    ensure!(
        got.name == b.name("net-renamed") && got.mtu == Some(1400) && got.description == "renamed",
        "{got:?}"
    );
    ensure!(got.tags.len() == 3, "tags lost on update: {:?}", got.tags);
    let su = subnets::UpdateSubnet {
        name: Some(b.name("sub-renamed")),
        dns_nameservers: Some(vec!["10.0.0.53".into()]),
        ..subnets::UpdateSubnet::default()
    };
    let got = subnets::update(cloud, &sub.id, &su).await?;
    ensure!(
        got.name == b.name("sub-renamed") && got.dns_nameservers == ["10.0.0.53"] && got.cidr == cidr,
        "{got:?}"
    );
    for (path, body) in [
        (
            format!("subnets/{}", sub.id),
            json!({"subnet": {"cidr": "10.250.0.0/24"}}),
        ),
        (
            format!("networks/{}", net.id),
            json!({"network": {"status": "DOWN"}}),
        ),
        (format!("networks/{}", net.id), json!({"network": {"mtu": 9000}})),
    ] {
        let err = match cloud
            .execute(Request::new(Service::Network, "neutron.update", Method::PUT, path).json(body.clone()))
            .await
        {
            Ok(r) => bail!(
                "{body} accepted: {} {}",
                r.status,
                String::from_utf8_lossy(&r.body)
            ),
            Err(e) => e,
        };
        ensure!(err.status() == Some(400), "{body}: {err}");
    }
    let router = routers::create(
        cloud,
        &CreateRouter {
            name: b.name("router"),
            external_gateway_info: Some(GatewayInfo {
                network_id: b.external_network_id.clone(),
                enable_snat: None,
            }),
            project_id: None,
        },
        &tags,
    )
    .await?;
    c.push(Item::Router(router.id.clone()));
    ensure!(
        router
            .external_gateway_info
            .as_ref()
            .map(|g| g.network_id.as_str())
            == Some(b.external_network_id.as_str()),
        "gateway: {router:?}"
    );
    let iface = routers::add_interface(cloud, &router.id, &Interface::Subnet(sub.id.clone())).await?;
    c.push(Item::RouterInterface {
        router: router.id.clone(),
        subnet: sub.id.clone(),
    });
    ensure!(
        iface.subnet_id == sub.id && !iface.port_id.is_empty(),
        "{iface:?}"
    );
    let gw_port = ports::get(cloud, &iface.port_id).await?;
    ensure!(
        gw_port.device_id == router.id,
        "interface port device_id {}",
        gw_port.device_id
    );
    // Tag filters find exactly what this owner made, of each kind.
    let f = || Filter::new().tags(&owner.filter());
    ensure!(networks::list(cloud, f()).await?.len() == 1);
    ensure!(subnets::list(cloud, f()).await?.len() == 1);
    ensure!(routers::list(cloud, f()).await?.len() == 1);
    // A network with a router interface cannot go.
    let err = networks::delete(cloud, &net.id)
        .await
        .err()
        .context("network in use was deleted")?;
    ensure!(err.kind() == Some(ErrorKind::Conflict), "{err}");
    routers::remove_interface(cloud, &router.id, &Interface::Subnet(sub.id.clone())).await?;
    routers::remove_interface(cloud, &router.id, &Interface::Subnet(sub.id.clone())).await?;
    ensure!(ports::get(cloud, &iface.port_id)
        .await
        .err()
        .is_some_and(|e| e.is_not_found()));
    routers::delete(cloud, &router.id).await?;
    subnets::delete(cloud, &sub.id).await?;
    networks::delete(cloud, &net.id).await?;
    ensure!(networks::get(cloud, &net.id)
        .await
        .err()
        .is_some_and(|e| e.is_not_found()));
    Ok(())
}

/// One bulk call makes N ports with ownership tags; filters by tags, fixed IP and repeated ids find them.
pub async fn bulk_ports_with_tags(x: Ctx) -> anyhow::Result<()> {
    let (b, c) = (&x.b, &x.c);
    let cloud = &b.cloud;
    let owner = b.owner("pool");
    let tags = owner.tags()?;
    let reqs: Vec<_> = (0..8)
        .map(|i| CreatePort {
            name: Some(b.name(&format!("bulk-{i}"))),
            device_owner: Some("compute:kuryr".into()),
            ..CreatePort::on_subnet(&b.pod_network_id, &b.pod_subnet_id).tagged(tags.clone())
        })
        .collect();
    let created = ports::bulk_create(cloud, &reqs).await?;
    for p in &created {
        c.push(Item::Port(p.id.clone()));
    }
    ensure!(created.len() == 8, "bulk made {}", created.len());
    let ips: BTreeSet<_> = created.iter().filter_map(|p| p.ip().map(str::to_owned)).collect();
    ensure!(ips.len() == 8, "distinct IPs: {ips:?}");
    ensure!(created.iter().all(|p| p.tags.len() == 3), "tags on create answer");
    let listed = ports::list(cloud, Filter::new().tags(&owner.filter())).await?;
    ensure!(listed.len() == 8, "tag filter found {}", listed.len());
    // Pages of 3 (limit/marker, `ports_links` rel=next) add up to the same 8.
    let paged = ports::list(cloud, Filter::new().tags(&owner.filter()).eq("limit", "3")).await?;
    let ids: BTreeSet<_> = paged.iter().map(|p| p.id.clone()).collect();
    ensure!(ids.len() == 8, "paged list found {}", ids.len());
    for p in &listed {
        ensure!(
            kuryr_openstack::Owner::from_tags(&p.tags).as_ref() == Some(&owner),
            "{:?}",
            p.tags
        );
    }
    let one = created[3].ip().context("no ip")?.to_owned();
    let by_ip = ports::list(
        cloud,
        Filter::new().eq("network_id", &b.pod_network_id).fixed_ip(&one),
    )
    .await?;
    ensure!(
        by_ip.len() == 1 && by_ip[0].id == created[3].id,
        "fixed_ips filter: {by_ip:?}"
    );
    let by_any = ports::list(cloud, Filter::new().tags_any(&[tags[2].clone(), "nope".into()])).await?;
    ensure!(by_any.len() == 8, "tags-any found {}", by_any.len());
    // Reads of several ports at once become lists by repeated `id`: each reader gets its own port; a
    // missing one among them is the server's 404.
    let reads = ports::PortReads::new(cloud);
    let missing = "00000000-0000-4000-8000-00000000dead".to_owned();
    let wanted: Vec<String> = created
        .iter()
        .map(|p| p.id.clone())
        .chain([missing.clone()])
        .collect();
    let got = futures::future::join_all(wanted.iter().map(|id| reads.get(id))).await;
    for (id, r) in wanted.iter().zip(&got) {
        match r {
            Ok(p) => ensure!(&p.id == id && id != &missing, "asked {id}, got {}", p.id),
            Err(e) => ensure!(id == &missing && e.is_not_found(), "{id}: {e}"),
        }
    }
    let by_ids = ports::list(
        cloud,
        Filter::new().eq("id", &created[1].id).eq("id", &created[6].id),
    )
    .await?;
    let by_ids: BTreeSet<_> = by_ids.into_iter().map(|p| p.id).collect();
    ensure!(
        by_ids == BTreeSet::from([created[1].id.clone(), created[6].id.clone()]),
        "repeated id filter: {by_ids:?}"
    );
    // Updates: name and device owner survive a round trip.
    let upd = ports::update(
        cloud,
        &created[0].id,
        &ports::UpdatePort {
            device_id: Some("pod-uid-1".into()),
            ..ports::UpdatePort::default()
        },
    )
    .await?;
    ensure!(
        upd.device_id == "pod-uid-1" && upd.device_owner == "compute:kuryr",
        "{upd:?}"
    );
    futures::future::try_join_all(created.iter().map(|p| ports::delete(cloud, &p.id))).await?;
    ensure!(ports::list(cloud, Filter::new().tags(&owner.filter()))
        .await?
        .is_empty());
    Ok(())
}

/// Trunk with subports, trunk_details on the parent, a VLAN id used twice is a 409 (not retried).
pub async fn trunk_subports_and_vlan_conflict(x: Ctx) -> anyhow::Result<()> {
    let (b, c) = (&x.b, &x.c);
    let cloud = &b.cloud;
    let tags = b.owner("node").tags()?;
    let mk = |n: &str| CreatePort {
        name: Some(b.name(n)),
        ..CreatePort::on_subnet(&b.pod_network_id, &b.pod_subnet_id).tagged(tags.clone())
    };
    let made = ports::bulk_create(cloud, &[mk("parent"), mk("sub1"), mk("sub2"), mk("sub3")]).await?;
    for p in &made {
        c.push(Item::Port(p.id.clone()));
    }
    let (parent, s1, s2, s3) = (&made[0], &made[1], &made[2], &made[3]);
    let trunk = trunks::create(
        cloud,
        &CreateTrunk {
            port_id: parent.id.clone(),
            name: Some(b.name("trunk")),
            sub_ports: vec![SubPort::vlan(&s1.id, 101)],
            ..CreateTrunk::default()
        },
        &tags,
    )
    .await?;
    c.push(Item::Trunk(trunk.id.clone()));
    ensure!(trunk.sub_ports.len() == 1 && trunk.tags.len() == 3, "{trunk:?}");
    let t = trunks::add_subports(cloud, &trunk.id, &[SubPort::vlan(&s2.id, 102)]).await?;
    ensure!(trunks::used_vlans(&t) == BTreeSet::from([101, 102]), "{t:?}");
    let subs = trunks::get_subports(cloud, &trunk.id).await?;
    ensure!(subs.len() == 2, "get_subports: {subs:?}");
    if cloud.neutron_features().await?.trunk_details() {
        let p = ports::get(cloud, &parent.id).await?;
        let d = p
            .trunk_details
            .as_ref()
            .context("no trunk_details on the parent")?;
        ensure!(d.trunk_id == trunk.id && d.sub_ports.len() == 2, "{d:?}");
        ensure!(ports::subports_of(&p).iter().any(|s| s.segmentation_id == 102));
    }
    // VLAN 101 is taken on this trunk.
    let strict = Cloud::connect(b.config(&b.password).with_retry(RetryPolicy::none())).await?;
    let err = trunks::add_subports(&strict, &trunk.id, &[SubPort::vlan(&s3.id, 101)])
        .await
        .err()
        .context("a duplicate VLAN id was accepted")?;
    ensure!(
        err.status() == Some(409) && err.kind() == Some(ErrorKind::Conflict),
        "{err}"
    );
    ensure!(err.api().map(|a| a.attempts) == Some(1));
    // A port that already is a subport cannot be added again.
    let err = trunks::add_subports(cloud, &trunk.id, &[SubPort::vlan(&s1.id, 103)])
        .await
        .err()
        .context("a subport was added twice")?;
    ensure!(err.status() == Some(409), "{err}");
    // Neither a subport nor the parent can be deleted while the trunk holds them.
    let err = ports::delete(cloud, &s2.id)
        .await
        .err()
        .context("a subport was deleted")?;
    ensure!(
        err.api().map(|a| (a.status, a.code.as_str())) == Some((409, "PortInUseAsSubPort")),
        "{err}"
    );
    let err = ports::delete(cloud, &parent.id)
        .await
        .err()
        .context("a trunk parent was deleted")?;
    ensure!(
        err.api().map(|a| (a.status, a.code.as_str())) == Some((409, "PortInUseAsTrunkParent")),
        "{err}"
    );
    let t = trunks::remove_subports(cloud, &trunk.id, std::slice::from_ref(&s1.id)).await?;
    ensure!(t.sub_ports.len() == 1, "{t:?}");
    ensure!(
        trunks::list(cloud, Filter::new().eq("port_id", &parent.id))
            .await?
            .len()
            == 1
    );
    // A trunk whose parent is unbound can be deleted with subports still on it; they are released.
    trunks::delete(cloud, &trunk.id).await?;
    let freed = ports::get(cloud, &s2.id).await?;
    ensure!(
        freed.device_owner.is_empty() && freed.device_id.is_empty(),
        "{freed:?}"
    );
    ports::delete(cloud, &s2.id).await?;
    ensure!(trunks::get(cloud, &trunk.id)
        .await
        .err()
        .is_some_and(|e| e.is_not_found()));
    Ok(())
}

/// SG + bulk rules; duplicate rule is a 409; a port gets the SG; an SG in use cannot be deleted.
pub async fn security_groups_and_rules(x: Ctx) -> anyhow::Result<()> {
    let (b, c) = (&x.b, &x.c);
    let cloud = &b.cloud;
    let tags = b.owner("networkpolicy").tags()?;
    let sg = security_groups::create(
        cloud,
        &CreateSecurityGroup {
            name: b.name("np"),
            description: Some("conformance".into()),
            ..CreateSecurityGroup::default()
        },
        &tags,
    )
    .await?;
    c.push(Item::SecurityGroup(sg.id.clone()));
    ensure!(sg.tags.len() == 3);
    let defaults = sg.security_group_rules.len();
    let rules = security_groups::bulk_create_rules(
        cloud,
        &[
            CreateRule::ingress(&sg.id).tcp(80, 80).from_cidr("198.18.0.0/18"),
            CreateRule::ingress(&sg.id).udp(53, 53).from_cidr("198.18.0.0/18"),
            CreateRule::ingress(&sg.id).tcp(8000, 8080),
        ],
    )
    .await?;
    ensure!(
        rules.len() == 3 && rules.iter().all(|r| r.security_group_id == sg.id),
        "{rules:?}"
    );
    let listed = security_groups::list_rules(cloud, Filter::new().eq("security_group_id", &sg.id)).await?;
    ensure!(listed.len() == defaults + 3, "rules listed: {}", listed.len());
    let dup = security_groups::create_rule(
        cloud,
        &CreateRule::ingress(&sg.id).tcp(80, 80).from_cidr("198.18.0.0/18"),
    )
    .await
    .err()
    .context("duplicate rule accepted")?;
    ensure!(dup.status() == Some(409), "{dup}");
    // A bulk with one duplicate makes nothing.
    let err = security_groups::bulk_create_rules(
        cloud,
        &[
            CreateRule::egress(&sg.id).tcp(443, 443),
            CreateRule::ingress(&sg.id).tcp(80, 80).from_cidr("198.18.0.0/18"),
        ],
    )
    .await
    .err()
    .context("bulk with a duplicate accepted")?;
    ensure!(err.status() == Some(409), "{err}");
    let after = security_groups::list_rules(cloud, Filter::new().eq("security_group_id", &sg.id)).await?;
    ensure!(
        after.len() == defaults + 3,
        "bulk was not atomic: {}",
        after.len()
    );
    security_groups::delete_rule(cloud, &rules[2].id).await?;
    let port = ports::create(cloud, &CreatePort::on_subnet(&b.pod_network_id, &b.pod_subnet_id)).await?;
    c.push(Item::Port(port.id.clone()));
    let port = ports::set_security_groups(cloud, &port.id, std::slice::from_ref(&sg.id)).await?;
    ensure!(
        port.security_groups == vec![sg.id.clone()],
        "{:?}",
        port.security_groups
    );
    let err = security_groups::delete(cloud, &sg.id)
        .await
        .err()
        .context("SG in use deleted")?;
    ensure!(err.status() == Some(409), "{err}");
    ports::delete(cloud, &port.id).await?;
    security_groups::delete(cloud, &sg.id).await?;
    ensure!(security_groups::get(cloud, &sg.id)
        .await
        .err()
        .is_some_and(|e| e.is_not_found()));
    Ok(())
}

/// FIP on the external network, associated to a pod-network port behind the router, then disassociated.
pub async fn floating_ip_associate(x: Ctx) -> anyhow::Result<()> {
    let (b, c) = (&x.b, &x.c);
    let cloud = &b.cloud;
    let tags = b.owner("service").tags()?;
    let port = ports::create(cloud, &CreatePort::on_subnet(&b.pod_network_id, &b.pod_subnet_id)).await?;
    c.push(Item::Port(port.id.clone()));
    let fip = floating_ips::create(
        cloud,
        &floating_ips::CreateFloatingIp {
            floating_network_id: b.external_network_id.clone(),
            description: Some(b.name("fip")),
            ..floating_ips::CreateFloatingIp::default()
        },
        &tags,
    )
    .await?;
    c.push(Item::FloatingIp(fip.id.clone()));
    ensure!(fip.floating_ip_address.starts_with("203.0.113."), "{fip:?}");
    ensure!(fip.port_id.is_none() && fip.tags.len() == 3, "{fip:?}");
    let f = floating_ips::associate(cloud, &fip.id, &port.id, None).await?;
    ensure!(f.port_id.as_deref() == Some(port.id.as_str()), "{f:?}");
    ensure!(f.fixed_ip_address.as_deref() == port.ip(), "{f:?}");
    ensure!(f.router_id.is_some(), "no router on an associated FIP: {f:?}");
    let listed = floating_ips::list(cloud, Filter::new().eq("port_id", &port.id)).await?;
    ensure!(listed.len() == 1 && listed[0].id == fip.id);
    let f = floating_ips::disassociate(cloud, &fip.id).await?;
    ensure!(f.port_id.is_none() && f.fixed_ip_address.is_none(), "{f:?}");
    floating_ips::delete(cloud, &fip.id).await?;
    ensure!(floating_ips::get(cloud, &fip.id)
        .await
        .err()
        .is_some_and(|e| e.is_not_found()));
    Ok(())
}

// === Octavia ===

fn algorithm(provider: &str) -> &'static str {
    if provider == "ovn" {
        "SOURCE_IP_PORT"
    } else {
        "ROUND_ROBIN"
    }
}

/// `n` pod-subnet addresses in a random /24 out of `range` (callers use disjoint ranges, so a batch never
/// names one address twice: Octavia refuses that with 400).
fn member_ips(n: usize, range: std::ops::Range<u8>) -> Vec<String> {
    let base = fastrand::u8(range);
    (0..n).map(|i| format!("198.18.{base}.{}", 10 + i)).collect()
}

async fn fully_populated(x: &Ctx, provider: &str) -> anyhow::Result<LoadBalancer> {
    let b = &x.b;
    let subnet = &b.pod_subnet_id;
    let mut pool = CreatePool::new(b.name("pool-80"), "TCP", algorithm(provider));
    pool.members = member_ips(2, 40..50)
        .into_iter()
        .map(|ip| CreateMember::new(ip, 8080).on_subnet(subnet))
        .collect();
    pool.healthmonitor = Some(CreateHealthMonitor::tcp(5, 3, 3));
    let req = CreateLoadBalancer {
        name: b.name(&format!("lb-{provider}")),
        vip_subnet_id: Some(b.service_subnet_id.clone()),
        // A Service's clusterIP is its VIP (the service subnet is the cluster IP range).
        vip_address: Some(format!(
            "198.19.{}.{}",
            fastrand::u8(200..250),
            fastrand::u8(2..250)
        )),
        provider: Some(provider.to_owned()),
        tags: b.owner("service").tags()?,
        listeners: vec![CreateListener::new(b.name("l-80"), "TCP", 80).with_pool(pool)],
        ..CreateLoadBalancer::default()
    };
    let lb = loadbalancers::create(&b.cloud, &req).await?;
    x.c.push(Item::LoadBalancer(lb.id.clone()));
    ensure!(
        req.vip_address.as_deref() == Some(lb.vip_address.as_str()),
        "VIP {} asked {:?}",
        lb.vip_address,
        req.vip_address
    );
    Ok(lb)
}

async fn lb_lifecycle(x: Ctx, provider: &str) -> anyhow::Result<()> {
    let b = &x.b;
    let cloud = &b.cloud;
    if !b.providers.iter().any(|p| p == provider) {
        bail!("provider {provider} is not enabled on this backend");
    }
    let t0 = Instant::now();
    let lb = fully_populated(&x, provider).await?;
    ensure!(lb.provider == provider && !lb.vip_address.is_empty(), "{lb:?}");
    let tree = waiter::wait_lb_active(cloud, &lb.id, &b.wait()).await?;
    let took = t0.elapsed();
    let l = tree
        .loadbalancer
        .listeners
        .first()
        .context("no listener in the tree")?;
    let p = l.pools.first().context("no pool in the tree")?;
    ensure!(p.members.len() == 2, "members in tree: {}", p.members.len());
    ensure!(p.health_monitor.is_some(), "no health monitor in the tree");
    eprintln!(
        "{:?} {provider}: fully-populated LB ACTIVE (whole tree) in {took:?}",
        b.kind
    );
    let tagged = loadbalancers::list(cloud, vec![("tags".into(), b.owner("x").filter()[0].clone())]).await?;
    ensure!(tagged.iter().any(|x| x.id == lb.id), "tag filter on LBs");
    let vip_port = lb.vip_port_id.clone();
    ensure!(
        ports::get(cloud, &vip_port).await.is_ok(),
        "VIP port {vip_port} missing in Neutron"
    );

    // Listener update (the per-Service timeout annotations); both providers take it.
    let upd = listeners::UpdateListener {
        timeout_client_data: Some(120_000),
        ..listeners::UpdateListener::default()
    };
    listeners::update(cloud, &l.node.id, &upd).await?;
    waiter::wait_lb_active(cloud, &lb.id, &b.wait()).await?;
    let got = listeners::get(cloud, &l.node.id).await?;
    ensure!(got.timeout_client_data == Some(120_000), "{got:?}");

    // Per-object updates: a member (name, weight) and the health monitor (timings).
    let pool_id = p.node.id.clone();
    let first = members::list(cloud, &pool_id).await?;
    let m0 = first.first().context("no members")?.clone();
    let mu = members::UpdateMember {
        name: Some(b.name("m0")),
        weight: Some(5),
        ..members::UpdateMember::default()
    };
    let strict = Cloud::connect(b.config(&b.password).with_retry(RetryPolicy::none())).await?;
    // Right after an update, with no retries: the pool is PENDING_UPDATE on the real servers, so 409. The
    // ovn provider settles in milliseconds, so the second call may come after it: the pair is tried a few
    // times and the ovn provider must refuse at least one (cloudsim's zero-latency profile and the lab's
    // noop amphora may settle before every second call).
    let mut refused = false;
    for attempt in 0..5 {
        members::update(cloud, &pool_id, &m0.id, &mu).await?;
        let mu2 = members::UpdateMember {
            weight: Some(6),
            ..members::UpdateMember::default()
        };
        let second = members::update(&strict, &pool_id, &m0.id, &mu2).await;
        waiter::wait_lb_active(cloud, &lb.id, &b.wait()).await?;
        match second {
            Err(e) => {
                ensure!(
                    e.status() == Some(409) && e.api().map(|a| a.attempts) == Some(1),
                    "{e}"
                );
                refused = true;
                break;
            }
            Ok(_) => println!(
                "{:?} {provider}: try {attempt}: the second member update came after the pool settled",
                b.kind
            ),
        }
    }
    ensure!(
        refused || b.kind == Kind::Sim || provider == "amphora",
        "member update while PENDING_UPDATE was accepted on each of 5 tries"
    );
    let got = members::get(cloud, &pool_id, &m0.id).await?;
    ensure!(
        got.weight.is_some_and(|w| w == 5 || w == 6) && got.name == b.name("m0"),
        "{got:?}"
    );
    let bad = json!({"member": {"address": "198.18.0.250"}});
    let err = strict
        .execute(
            Request::new(
                Service::LoadBalancer,
                "octavia.members.update",
                Method::PUT,
                format!("lbaas/pools/{pool_id}/members/{}", m0.id),
            )
            .json(bad),
        )
        .await
        .err()
        .context("member address changed")?;
    ensure!(err.status() == Some(400), "{err}");
    // ovn 19 leaves the listener PENDING_UPDATE for good after a health monitor update (seen on the lab),
    // so that one is checked on amphora only.
    if provider == "amphora" {
        let hm_id = p.health_monitor.as_ref().context("no HM")?.id.clone();
        let hu = healthmonitors::UpdateHealthMonitor {
            delay: Some(7),
            timeout: Some(4),
            max_retries: Some(2),
            ..healthmonitors::UpdateHealthMonitor::default()
        };
        healthmonitors::update(cloud, &hm_id, &hu).await?;
        waiter::wait_lb_active(cloud, &lb.id, &b.wait()).await?;
        let hm = healthmonitors::get(cloud, &hm_id).await?;
        ensure!((hm.delay, hm.timeout, hm.max_retries) == (7, 4, 2), "{hm:?}");
    }

    // Batch replace: one kept, one dropped, two new.
    let old = members::list(cloud, &pool_id).await?;
    let kept = old.first().context("no members")?.address.clone();
    let mut want: Vec<String> = member_ips(2, 50..60);
    want.push(kept.clone());
    let body: Vec<_> = want
        .iter()
        .map(|ip| CreateMember::new(ip.clone(), 8080).on_subnet(&b.pod_subnet_id))
        .collect();
    let t1 = Instant::now();
    members::batch_replace(cloud, &pool_id, &body).await?;
    // The tree alone is not enough (ovn reads ACTIVE before a removed member is gone): wait for the set.
    let want_set: Vec<(String, u32)> = want.iter().map(|ip| (ip.clone(), 8080)).collect();
    let now = waiter::wait_members(cloud, &lb.id, &pool_id, &want_set, &b.wait()).await?;
    eprintln!("{provider}: batch member replace ACTIVE in {:?}", t1.elapsed());
    let got: BTreeSet<_> = now.iter().map(|m| m.address.clone()).collect();
    ensure!(
        got == want.iter().cloned().collect::<BTreeSet<_>>(),
        "members after replace: {got:?}, want {want:?}"
    );
    let kept_id = old.iter().find(|m| m.address == kept).map(|m| m.id.clone());
    ensure!(
        now.iter().any(|m| Some(&m.id) == kept_id.as_ref()),
        "the kept member was recreated"
    );

    // Octavia's page links: a full page always has `next` (even the last one), and the links keep only
    // `limit` and `marker`: the filters are dropped (a client following `next` as given lists unfiltered).
    let next_of = |v: &serde_json::Value| -> Option<String> {
        v["members_links"]
            .as_array()?
            .iter()
            .find(|l| l["rel"] == "next")
            .and_then(|l| l["href"].as_str())
            .map(str::to_owned)
    };
    let full = members_page(&strict, &pool_id, 1).await?;
    let next = next_of(&full).context(format!("a full page without a next link: {full}"))?;
    ensure!(
        next.contains("limit=1") && next.contains("marker=") && !next.contains("protocol_port"),
        "next link {next}"
    );
    let all = members_page(&strict, &pool_id, 3).await?;
    ensure!(
        all["members"].as_array().map(Vec::len) == Some(3) && next_of(&all).is_some(),
        "the last page, full: {all}"
    );
    let short = members_page(&strict, &pool_id, 5).await?;
    ensure!(
        next_of(&short).is_none(),
        "a page that is not full has a next link: {short}"
    );

    // Plain delete of an LB with children is refused; cascade removes the tree and the VIP port.
    let err = loadbalancers::delete(&strict, &lb.id, false)
        .await
        .err()
        .context("LB with children deleted")?;
    ensure!(err.status() == Some(400), "{err}");
    let t2 = Instant::now();
    loadbalancers::delete(cloud, &lb.id, true).await?;
    waiter::wait_lb_deleted(cloud, &lb.id, &b.wait()).await?;
    eprintln!("{provider}: cascade delete done in {:?}", t2.elapsed());
    ensure!(loadbalancers::get(cloud, &lb.id)
        .await
        .err()
        .is_some_and(|e| e.is_not_found()));
    ensure!(
        ports::get(cloud, &vip_port)
            .await
            .err()
            .is_some_and(|e| e.is_not_found()),
        "VIP port {vip_port} left behind"
    );
    Ok(())
}

/// One page of `limit` of a pool's members on port 8080, as Octavia answers it (links included).
async fn members_page(cloud: &Cloud, pool_id: &str, limit: usize) -> anyhow::Result<serde_json::Value> {
    let query = vec![
        ("limit".to_owned(), limit.to_string()),
        ("protocol_port".to_owned(), "8080".to_owned()),
    ];
    let r = cloud
        .execute(
            Request::new(
                Service::LoadBalancer,
                "octavia.members.list",
                Method::GET,
                format!("lbaas/pools/{pool_id}/members"),
            )
            .query(query),
        )
        .await?;
    Ok(r.json(Service::LoadBalancer, "raw")?)
}

/// Fully-populated create -> whole tree ACTIVE, batch member replace, cascade delete (ovn provider).
pub async fn lb_lifecycle_ovn(x: Ctx) -> anyhow::Result<()> {
    lb_lifecycle(x, "ovn").await
}

/// The same with the amphora provider.
pub async fn lb_lifecycle_amphora(x: Ctx) -> anyhow::Result<()> {
    lb_lifecycle(x, "amphora").await
}

/// TCP and UDP listeners on the same port (API 2.13+), on both providers.
pub async fn lb_same_port_tcp_and_udp(x: Ctx) -> anyhow::Result<()> {
    let b = &x.b;
    let cloud = &b.cloud;
    let f = cloud.octavia_features().await?.clone();
    if !f.same_port_different_protocol() || !f.udp() {
        eprintln!(
            "skipped: Octavia {:?} lacks same-port-different-protocol",
            f.version
        );
        return Ok(());
    }
    for provider in ["ovn", "amphora"] {
        let listeners = ["TCP", "UDP"]
            .iter()
            .map(|proto| {
                let mut pool =
                    CreatePool::new(b.name(&format!("pool-53-{proto}")), *proto, algorithm(provider));
                pool.members =
                    vec![CreateMember::new(member_ips(1, 60..70).remove(0), 53).on_subnet(&b.pod_subnet_id)];
                CreateListener::new(b.name(&format!("l-53-{proto}")), *proto, 53).with_pool(pool)
            })
            .collect();
        let req = CreateLoadBalancer {
            name: b.name(&format!("dns-{provider}")),
            vip_subnet_id: Some(b.service_subnet_id.clone()),
            provider: Some(provider.into()),
            listeners,
            ..CreateLoadBalancer::default()
        };
        let lb = loadbalancers::create(cloud, &req).await?;
        x.c.push(Item::LoadBalancer(lb.id.clone()));
        let tree = waiter::wait_lb_active(cloud, &lb.id, &b.wait()).await?;
        ensure!(tree.loadbalancer.listeners.len() == 2, "{provider}: {tree:?}");
        let ls = listeners::list(cloud, vec![("loadbalancer_id".into(), lb.id.clone())]).await?;
        let protos: BTreeSet<_> = ls.iter().map(|l| (l.protocol.clone(), l.protocol_port)).collect();
        ensure!(
            protos == BTreeSet::from([("TCP".to_owned(), 53), ("UDP".to_owned(), 53)]),
            "{provider}: {protos:?}"
        );
        loadbalancers::delete(cloud, &lb.id, true).await?;
        waiter::wait_lb_deleted(cloud, &lb.id, &b.wait()).await?;
    }
    Ok(())
}

/// Dual-stack: a network with an IPv4 and an IPv6 subnet (no address mode); a port asking for both gets an
/// address of each; a load balancer with an additional VIP on the IPv6 subnet (API 2.26) has both addresses
/// on its VIP port and serves members of both families; an additional VIP on another network is refused.
pub async fn dual_stack_port_and_lb(x: Ctx) -> anyhow::Result<()> {
    let (b, c) = (&x.b, &x.c);
    let cloud = &b.cloud;
    let net = networks::create(cloud, &networks::CreateNetwork::named(b.name("dual")), &[]).await?;
    c.push(Item::Network(net.id.clone()));
    let (o1, o2) = (uniq_octet(), uniq_octet());
    let v4 = subnets::create(
        cloud,
        &CreateSubnet::v4(&net.id, format!("10.{o1}.{o2}.0/24")),
        &[],
    )
    .await?;
    c.push(Item::Subnet(v4.id.clone()));
    let cidr6 = format!("fd42:{o1:x}:{o2:x}::/64");
    let req6 = CreateSubnet {
        ip_version: 6,
        ..CreateSubnet::v4(&net.id, &cidr6)
    };
    let v6 = subnets::create(cloud, &req6, &[]).await?;
    c.push(Item::Subnet(v6.id.clone()));
    ensure!(v6.cidr == cidr6 && v6.ip_version == 6, "{v6:?}");

    let mut both = CreatePort::on_network(&net.id);
    both.fixed_ips = [&v4.id, &v6.id]
        .iter()
        .map(|s| ports::FixedIpRequest {
            subnet_id: Some((*s).clone()),
            ip_address: None,
        })
        .collect();
    let port = ports::create(cloud, &both).await?;
    c.push(Item::Port(port.id.clone()));
    let by_subnet: BTreeSet<(String, bool)> = port
        .fixed_ips
        .iter()
        .map(|f| (f.subnet_id.clone(), f.ip_address.contains(':')))
        .collect();
    ensure!(
        by_subnet == BTreeSet::from([(v4.id.clone(), false), (v6.id.clone(), true)]),
        "{:?}",
        port.fixed_ips
    );
    // A port asking for the IPv4 subnet only stays single-stack (no SLAAC: nothing added behind its back).
    let single = ports::create(cloud, &CreatePort::on_subnet(&net.id, &v4.id)).await?;
    c.push(Item::Port(single.id.clone()));
    ensure!(single.fixed_ips.len() == 1, "{:?}", single.fixed_ips);

    let f = cloud.octavia_features().await?.clone();
    if f.version < (2, 26) {
        eprintln!(
            "skipped the load balancer part: Octavia {:?} has no additional_vips (2.26)",
            f.version
        );
        return Ok(());
    }
    let six = port
        .fixed_ips
        .iter()
        .find(|f| f.ip_address.contains(':'))
        .map(|f| f.ip_address.clone())
        .context("no IPv6 address")?;
    let four = port.ip().context("no IPv4 address")?.to_owned();
    let mut pool = CreatePool::new(b.name("dual-pool"), "TCP", algorithm("ovn"));
    pool.members = vec![
        CreateMember::new(four, 80).on_subnet(&v4.id),
        CreateMember::new(six, 80).on_subnet(&v6.id),
    ];
    let req = CreateLoadBalancer {
        name: b.name("dual-lb"),
        vip_subnet_id: Some(v4.id.clone()),
        additional_vips: vec![loadbalancers::AdditionalVip {
            subnet_id: v6.id.clone(),
            ip_address: String::new(),
        }],
        provider: Some("ovn".into()),
        listeners: vec![CreateListener::new(b.name("dual-l"), "TCP", 80).with_pool(pool)],
        ..CreateLoadBalancer::default()
    };
    let lb = loadbalancers::create(cloud, &req).await?;
    c.push(Item::LoadBalancer(lb.id.clone()));
    let tree = waiter::wait_lb_active(cloud, &lb.id, &b.wait()).await?;
    let got = loadbalancers::get(cloud, &lb.id).await?;
    ensure!(
        got.additional_vips.len() == 1
            && got.additional_vips[0].subnet_id == v6.id
            && got.additional_vips[0]
                .ip_address
                .starts_with(&format!("fd42:{o1:x}:{o2:x}:")),
        "{got:?}"
    );
    // Amphora puts the additional VIP on the VIP port, the ovn provider on a port of its own: both are
    // ports of device `lb-<id>`.
    let vip_ports = ports::list(cloud, Filter::new().eq("device_id", format!("lb-{}", lb.id))).await?;
    let vip_subnets: BTreeSet<&str> = vip_ports
        .iter()
        .flat_map(|p| p.fixed_ips.iter().map(|f| f.subnet_id.as_str()))
        .collect();
    ensure!(
        vip_subnets == BTreeSet::from([v4.id.as_str(), v6.id.as_str()]),
        "VIP ports {vip_ports:?}"
    );
    let members_in_tree = tree
        .loadbalancer
        .listeners
        .first()
        .and_then(|l| l.pools.first())
        .map(|p| p.members.len());
    ensure!(members_in_tree == Some(2), "{tree:?}");

    // An additional VIP on a subnet of another network: refused, nothing made.
    let other = b.service_subnet_id.clone();
    let bad = CreateLoadBalancer {
        name: b.name("dual-bad"),
        vip_subnet_id: Some(v4.id.clone()),
        additional_vips: vec![loadbalancers::AdditionalVip {
            subnet_id: other,
            ip_address: String::new(),
        }],
        provider: Some("ovn".into()),
        ..CreateLoadBalancer::default()
    };
    match loadbalancers::create(cloud, &bad).await {
        Ok(lb) => {
            c.push(Item::LoadBalancer(lb.id.clone()));
            bail!("an additional VIP on another network was accepted: {lb:?}");
        }
        Err(e) => ensure!(e.status() == Some(400), "{e}"),
    }
    Ok(())
}

// === Errors ===

/// 404 on read is NotFound; on delete it is success; 400 validation is never retried; Neutron refuses tags
/// in a network create body.
pub async fn errors_not_found_and_bad_request(x: Ctx) -> anyhow::Result<()> {
    let (b, c) = (&x.b, &x.c);
    let cloud = Cloud::connect(b.config(&b.password).with_retry(RetryPolicy::default())).await?;
    let missing = "8a4f3b1c-0000-4000-8000-000000000000";
    for err in [
        ports::get(&cloud, missing).await.err(),
        networks::get(&cloud, missing).await.err(),
        trunks::get(&cloud, missing).await.err(),
        loadbalancers::get(&cloud, missing).await.err(),
    ] {
        let err = err.context("a missing object was found")?;
        ensure!(
            err.kind() == Some(ErrorKind::NotFound) && err.api().map(|a| a.attempts) == Some(1),
            "{err}"
        );
    }
    ports::delete(&cloud, missing).await?;
    loadbalancers::delete(&cloud, missing, true).await?;
    // An address that is taken: the same 409 type as an IPAM race, but final (one attempt).
    let first = ports::create(
        &cloud,
        &CreatePort::on_subnet(&b.pod_network_id, &b.pod_subnet_id),
    )
    .await?;
    c.push(Item::Port(first.id.clone()));
    let mut again = CreatePort::on_network(&b.pod_network_id);
    again.fixed_ips = vec![ports::FixedIpRequest {
        subnet_id: Some(b.pod_subnet_id.clone()),
        ip_address: first.ip().map(str::to_owned),
    }];
    let err = ports::create(&cloud, &again)
        .await
        .err()
        .context("a taken address was given twice")?;
    let api = err.api().context("not an API error")?;
    ensure!(
        api.status == 409 && api.code == "IpAddressAlreadyAllocated" && api.attempts == 1,
        "{err}"
    );
    trunks::delete(&cloud, missing).await?;

    let net = networks::create(&cloud, &networks::CreateNetwork::named(b.name("bad")), &[]).await?;
    c.push(Item::Network(net.id.clone()));
    let before = cloud.metrics().snapshot().count("neutron.subnets.create");
    let err = subnets::create(&cloud, &CreateSubnet::v4(&net.id, "10.0.0.0/33"), &[])
        .await
        .err()
        .context("a /33 was accepted")?;
    ensure!(
        err.status() == Some(400) && err.kind() == Some(ErrorKind::BadRequest),
        "{err}"
    );
    ensure!(
        cloud.metrics().snapshot().count("neutron.subnets.create") == before + 1,
        "400 was retried"
    );
    // UUID-typed attributes are validated before any lookup: 400, not 404.
    let err = subnets::create(&cloud, &CreateSubnet::v4("not-a-uuid", "10.0.0.0/24"), &[])
        .await
        .err()
        .context("a subnet on network 'not-a-uuid' was made")?;
    ensure!(err.status() == Some(400), "{err}");
    let err = ports::create(&cloud, &CreatePort::on_network("not-a-uuid"))
        .await
        .err()
        .context("a port on network 'not-a-uuid' was made")?;
    ensure!(err.status() == Some(400), "{err}");
    // Octavia: a listener on a port out of range.
    let mut req = CreateLoadBalancer {
        name: b.name("bad-lb"),
        vip_subnet_id: Some(b.service_subnet_id.clone()),
        provider: Some("amphora".into()),
        ..CreateLoadBalancer::default()
    };
    req.listeners = vec![CreateListener::new("l", "TCP", 70000).with_pool(CreatePool::new(
        b.name("p"),
        "TCP",
        "ROUND_ROBIN",
    ))];
    let err = loadbalancers::create(&cloud, &req)
        .await
        .err()
        .context("port 70000 accepted")?;
    ensure!(err.status() == Some(400), "{err}");
    // Neutron 29 refuses tags in create bodies of networks (only ports, with the bulk tagging extension).
    let resp = cloud
        .execute(
            Request::new(
                Service::Network,
                "raw.networks.create_with_tags",
                Method::POST,
                "networks",
            )
            .json(json!({"network": {"name": b.name("tagged-in-body"), "tags": ["a"]}})),
        )
        .await;
    match resp {
        Ok(r) => {
            let v = r.json(Service::Network, "raw")?;
            if let Some(id) = v["network"]["id"].as_str() {
                c.push(Item::Network(id.to_owned()));
            }
            bail!("a network create with tags in the body was accepted: {v}");
        }
        Err(e) => ensure!(e.status() == Some(400), "{e}"),
    }
    // An explicit null where Neutron wants a boolean is a 400, not "unset".
    let err = cloud
        .execute(
            Request::new(
                Service::Network,
                "raw.routers.create_null_snat",
                Method::POST,
                "routers",
            )
            .json(json!({
                "router": {"name": b.name("null-snat"), "external_gateway_info":
                    {"network_id": b.external_network_id, "enable_snat": null}}})),
        )
        .await;
    match err {
        Ok(r) => {
            let v = r.json(Service::Network, "raw")?;
            if let Some(id) = v["router"]["id"].as_str() {
                c.push(Item::Router(id.to_owned()));
            }
            bail!("a router with enable_snat null was accepted: {v}");
        }
        Err(e) => ensure!(e.status() == Some(400), "{e}"),
    }
    Ok(())
}

/// OverQuota is classified (retried a bounded number of times, then reported as such). Runs in a project of
/// Octavia quota: a project (admin creates on its behalf) with `load_balancer: 0`; a create is 403 "Quota
/// has been met", classified OverQuota and given up after `over_quota_attempts`. The quota is reset
/// afterwards whatever happened.
pub async fn errors_octavia_quota(x: Ctx) -> anyhow::Result<()> {
    let b = &x.b;
    let project = format!("{:032x}", fastrand::u128(..));
    let limits = [("load_balancer".to_owned(), 0)].into_iter().collect();
    let set = octavia_quotas::update(&b.cloud, &project, &limits).await;
    let result = match set {
        Ok(q) => octavia_quota_refuses(&x, &project, &q).await,
        Err(e) => Err(e.into()),
    };
    let reset = octavia_quotas::reset(&b.cloud, &project).await;
    let after = octavia_quotas::get(&b.cloud, &project).await;
    result?;
    reset?;
    let after = after?;
    ensure!(after.get("load_balancer") == Some(&-1), "after reset: {after:?}");
    Ok(())
}

async fn octavia_quota_refuses(
    x: &Ctx,
    project: &str,
    q: &kuryr_openstack::neutron::quotas::Quota,
) -> anyhow::Result<()> {
    let b = &x.b;
    ensure!(
        q.get("load_balancer") == Some(&0) && q.get("loadbalancer") == Some(&0),
        "{q:?}"
    );
    let req = CreateLoadBalancer {
        name: b.name("lb-quota"),
        vip_subnet_id: Some(b.service_subnet_id.clone()),
        provider: Some("ovn".to_owned()),
        project_id: Some(project.to_owned()),
        ..CreateLoadBalancer::default()
    };
    let err = match loadbalancers::create(&b.cloud, &req).await {
        Ok(lb) => {
            x.c.push(Item::LoadBalancer(lb.id.clone()));
            bail!("LB created over a quota of 0: {lb:?}");
        }
        Err(e) => e,
    };
    let attempts = err.api().map(|a| a.attempts);
    ensure!(
        err.status() == Some(403)
            && err.is_over_quota()
            && attempts == Some(RetryPolicy::default().over_quota_attempts),
        "{err} (attempts {attempts:?})"
    );
    ensure!(
        err.api()
            .is_some_and(|a| a.message.contains("Quota has been met")),
        "{err}"
    );
    Ok(())
}

/// its own (admin creates on its behalf) so the low quota cannot disturb other tests.
pub async fn errors_over_quota(x: Ctx) -> anyhow::Result<()> {
    let (b, c) = (&x.b, &x.c);
    let project = format!("{:032x}", fastrand::u128(..));
    let cloud = Cloud::connect(b.config(&b.password).with_retry(RetryPolicy {
        over_quota_attempts: 2,
        base_delay: Duration::from_millis(20),
        ..RetryPolicy::default()
    }))
    .await?;
    let net = networks::create(
        &cloud,
        &networks::CreateNetwork {
            project_id: Some(project.clone()),
            ..networks::CreateNetwork::named(b.name("quota"))
        },
        &[],
    )
    .await?;
    c.push(Item::Network(net.id.clone()));
    ensure!(
        net.project_id == project,
        "admin could not create for another project: {net:?}"
    );
    let mut sub = CreateSubnet::v4(&net.id, "10.99.0.0/24");
    sub.project_id = Some(project.clone());
    let sub = subnets::create(&cloud, &sub, &[]).await?;
    c.push(Item::Subnet(sub.id.clone()));
    let limits = kuryr_openstack::neutron::quotas::Quota::from([("port".to_owned(), 2)]);
    let q = quotas::update(&cloud, &project, &limits).await?;
    let result = async {
        ensure!(q.get("port") == Some(&2), "quota not set: {q:?}");
        let mk = || CreatePort {
            project_id: Some(project.clone()),
            ..CreatePort::on_subnet(&net.id, &sub.id)
        };
        let err = ports::bulk_create(&cloud, &[mk(), mk(), mk()])
            .await
            .err()
            .context("3 ports under a quota of 2")?;
        ensure!(err.is_over_quota(), "{err}");
        ensure!(err.api().map(|a| a.attempts) == Some(2), "attempts: {err}");
        ensure!(
            ports::list(&cloud, Filter::new().eq("network_id", &net.id))
                .await?
                .is_empty(),
            "bulk not atomic"
        );
        for _ in 0..2 {
            let p = ports::create(&cloud, &mk()).await?;
            c.push(Item::Port(p.id.clone()));
        }
        let err = ports::create(&cloud, &mk())
            .await
            .err()
            .context("3rd port under a quota of 2")?;
        ensure!(err.status() == Some(409) && err.is_over_quota(), "{err}");
        if cloud.neutron_features().await?.quota_details() {
            let d = quotas::details(&cloud, &project).await?;
            let port = d.get("port").context("no port quota detail")?;
            ensure!(
                port.limit == 2 && port.used == 2 && port.free() == Some(0),
                "{port:?}"
            );
        }
        Ok(())
    }
    .await;
    quotas::reset(&cloud, &project).await?;
    result
}

// === Auth ===

async fn smoke(cloud: &Cloud) -> anyhow::Result<()> {
    networks::list(cloud, Filter::new().eq("router:external", "true")).await?;
    loadbalancers::list(cloud, vec![("name".into(), "nothing-by-this-name".into())]).await?;
    Ok(())
}

pub async fn auth_password(x: Ctx) -> anyhow::Result<()> {
    let b = &x.b;
    let cloud = Cloud::connect(b.config(&b.password)).await?;
    smoke(&cloud).await?;
    ensure!(cloud.project_id().as_deref() == Some(b.project_id.as_str()));
    Ok(())
}

pub async fn auth_application_credential(x: Ctx) -> anyhow::Result<()> {
    let b = &x.b;
    let cloud = Cloud::connect(b.config(&b.appcred)).await?;
    smoke(&cloud).await?;
    ensure!(
        cloud.project_id().as_deref() == Some(b.project_id.as_str()),
        "app credential scoped to {:?}",
        cloud.project_id()
    );
    Ok(())
}

/// Tokens that expire every few seconds: calls for more than twice the lifetime, none may fail.
pub async fn auth_token_expires_mid_run(x: Ctx) -> anyhow::Result<()> {
    let b = &x.b;
    let cloud = Cloud::connect(b.config(&b.short_token)).await?;
    let first = cloud.credentials();
    let lifetime = first
        .expires_at
        .map(|e| (e - chrono::Utc::now()).num_milliseconds())
        .context("no expiry on the token")?;
    ensure!(
        lifetime <= i64::try_from(b.short_token_ttl.as_millis())? + 1000,
        "token lives {lifetime} ms, expected about {:?}",
        b.short_token_ttl
    );
    let run = b.short_token_ttl * 2 + Duration::from_secs(3);
    let t0 = Instant::now();
    let (mut ok, mut failed) = (0u32, Vec::new());
    while t0.elapsed() < run {
        match smoke(&cloud).await {
            Ok(()) => ok += 1,
            Err(e) => failed.push(format!("{:?}: {e:#}", t0.elapsed())),
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let m = cloud.metrics().snapshot();
    let gen = cloud.credentials().generation - first.generation;
    eprintln!(
        "short token: {ok} rounds over {run:?}, {gen} renewals, {} reactive re-auths, {} 401 answers",
        m.reauths,
        m.calls
            .iter()
            .filter(|((_, o), _)| o == "401")
            .map(|(_, s)| s.count)
            .sum::<u64>()
    );
    ensure!(failed.is_empty(), "calls failed: {failed:?}");
    ensure!(gen >= 2, "token renewed only {gen} times in {run:?}");
    Ok(())
}

/// The request-size limit. Octavia wraps its API in oslo.middleware's sizelimit (`max_request_body_size`,
/// 112 KiB by default): a body over it is 413 before the API sees it (nothing changed, never retried,
/// `RequestTooLarge`, not a quota). Neutron's pipeline has no such filter (a proxy in front may add one):
/// the client's own limit splits its bulk bodies; member sets too large for one body grow with additive
/// batches.
pub async fn errors_request_too_large(x: Ctx) -> anyhow::Result<()> {
    let (b, c) = (&x.b, &x.c);
    // A client that sends whatever it is given, so the server's own limit answers.
    let raw = Cloud::connect(b.config(&b.password).with_max_request_body(usize::MAX)).await?;
    let owner = b.owner("toolarge");
    let tags = owner.tags()?;
    let long = "d".repeat(255);
    let big: Vec<CreatePort> = (0..12)
        .map(|i| CreatePort {
            name: Some(b.name(&format!("big-{i}-{}", "n".repeat(150)))),
            description: Some(long.clone()),
            ..CreatePort::on_subnet(&b.pod_network_id, &b.pod_subnet_id).tagged(tags.clone())
        })
        .collect();
    // The client's own limit (4 KiB here, so a few ports make several bodies without using up the
    // project's port quota): the ports in bodies that fit, all made.
    let limit = 4 * 1024;
    let small = Cloud::connect(b.config(&b.password).with_max_request_body(limit)).await?;
    let some = &big[..];
    let runs = kuryr_openstack::fit::split(
        some,
        kuryr_openstack::fit::envelope("ports"),
        limit,
        Service::Network,
        "t",
    )?;
    ensure!(runs.len() > 1, "12 ports fit one {limit}-byte body");
    let made = ports::bulk_create(&small, some).await?;
    for p in &made {
        c.push(Item::Port(p.id.clone()));
    }
    ensure!(made.len() == some.len(), "made {} of {}", made.len(), some.len());
    futures::future::try_join_all(made.iter().map(|p| ports::delete(&b.cloud, &p.id))).await?;

    // Octavia: a member batch over the limit is 413 and the pool keeps its members; additive batches
    // under the limit grow it to the whole set.
    if !b.providers.iter().any(|p| p == "ovn") {
        bail!("provider ovn is not enabled on this backend");
    }
    // No health monitor: with one, the ovn provider looks each member's switch port up (about a second
    // per member on the lab), which is the provider's cost, not the limit's.
    let req = CreateLoadBalancer {
        name: b.name("lb-toolarge"),
        vip_subnet_id: Some(b.service_subnet_id.clone()),
        provider: Some("ovn".into()),
        tags: b.owner("service").tags()?,
        listeners: vec![
            CreateListener::new(b.name("l-80"), "TCP", 80).with_pool(CreatePool::new(
                b.name("pool-80"),
                "TCP",
                algorithm("ovn"),
            )),
        ],
        ..CreateLoadBalancer::default()
    };
    let lb = loadbalancers::create(&b.cloud, &req).await?;
    x.c.push(Item::LoadBalancer(lb.id.clone()));
    let tree = waiter::wait_lb_active(&b.cloud, &lb.id, &b.wait()).await?;
    let pool_id = tree
        .loadbalancer
        .listeners
        .first()
        .and_then(|l| l.pools.first())
        .map(|p| p.node.id.clone())
        .context("no pool in the tree")?;
    let base = fastrand::u8(60..120);
    let many: Vec<CreateMember> = (0..1200u32)
        .map(|i| {
            CreateMember::new(format!("198.18.{}.{}", base + (i / 250) as u8, i % 250 + 2), 8080)
                .on_subnet(&b.pod_subnet_id)
                .named(format!("ns/pod-{i}-{}", "x".repeat(40)))
        })
        .collect();
    let err = members::batch_replace(&raw, &pool_id, &many)
        .await
        .err()
        .context("a member batch over the limit was accepted")?;
    ensure!(err.status() == Some(413) && err.is_request_too_large(), "{err}");
    // The client refuses it itself, without a call.
    let local = members::batch_replace(&b.cloud, &pool_id, &many)
        .await
        .err()
        .context("the client sent a body over its limit")?;
    ensure!(
        local.is_request_too_large() && local.api().map(|a| a.attempts) == Some(0),
        "{local}"
    );
    // Additive batches under a limit (2 KiB here: the ovn provider adds members one by one, seconds each
    // on a busy host, so a few members make several bodies): the pool grows to the whole set, a body at a
    // time; then one replace takes it back to three.
    let limit = 2 * 1024;
    let some = &many[..24];
    let runs = kuryr_openstack::fit::split(
        some,
        kuryr_openstack::fit::envelope("members"),
        limit,
        Service::LoadBalancer,
        "t",
    )?;
    ensure!(runs.len() > 1, "24 members fit one {limit}-byte body");
    let t0 = Instant::now();
    for run in &runs {
        members::batch_add(&b.cloud, &pool_id, run).await?;
        waiter::wait_lb_active(&b.cloud, &lb.id, &b.wait()).await?;
    }
    eprintln!(
        "{:?}: {} members in {} additive batches, ACTIVE after {:?}",
        b.kind,
        some.len(),
        runs.len(),
        t0.elapsed()
    );
    let have: BTreeSet<String> = members::list(&b.cloud, &pool_id)
        .await?
        .into_iter()
        .map(|m| m.address)
        .collect();
    let want: BTreeSet<String> = some.iter().map(|m| m.address.clone()).collect();
    ensure!(
        have == want,
        "{} members after {} additive batches",
        have.len(),
        runs.len()
    );
    members::batch_replace(&b.cloud, &pool_id, &some[..3]).await?;
    let three: Vec<(String, u32)> = some[..3].iter().map(|m| (m.address.clone(), 8080)).collect();
    waiter::wait_members(&b.cloud, &lb.id, &pool_id, &three, &b.wait()).await?;
    Ok(())
}
