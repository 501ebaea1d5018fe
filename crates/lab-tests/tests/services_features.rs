//! Service features end to end, on cloudsim and on the lab's real Octavia: TCP and UDP on one port plus
//! SCTP, sessionAffinity (SOURCE_IP persistence; on ovn with an Event: the provider applies none to TCP pools;
//! a UDP pool's timeout becomes OVN's affinity_timeout), type=LoadBalancer with a
//! floating IP on the VIP, not-ready endpoints (and publishNotReadyAddresses), a selector-less Service with
//! manual Endpoints, and a listener timeout annotation change; plus the feature gates of an old Octavia
//! (cloudsim at API 2.22: SCTP refused with an Event and a condition while the other port is served); and two
//! controllers with disjoint `--namespace-selector`s each serving only their own namespace's Services.

mod simnets;
mod svc_common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context as _};
use kuryr_api::k8s_openapi::api::core::v1::{
    ClientIPConfig, EndpointAddress, EndpointPort, EndpointSubset, SessionAffinityConfig,
};
use kuryr_api::{annotations, Api, Endpoints, ObjectMeta, Patch, PatchParams, PostParams};
use kuryr_openstack::neutron::floating_ips;
use kuryr_openstack::octavia::{listeners, pools};
use lab_tests::{Lab, LabDns};
use serde_json::json;
use svc_common::{delta, lb_id, mk_service, pod_ips, shape, supported, Backend, Harness};

#[tokio::test]
async fn features_on_cloudsim_amphora() -> anyhow::Result<()> {
    let lab = Lab::require();
    run(&lab, Backend::sim("amphora", |_| {}).await?).await
}

#[tokio::test]
async fn features_on_cloudsim_ovn() -> anyhow::Result<()> {
    let lab = Lab::require();
    run(&lab, Backend::sim("ovn", |_| {}).await?).await
}

#[tokio::test]
async fn features_on_real_octavia_ovn() -> anyhow::Result<()> {
    let lab = Lab::require();
    run(&lab, Backend::lab(&lab, "ovn").await?).await
}

#[tokio::test]
async fn features_on_real_octavia_amphora() -> anyhow::Result<()> {
    let lab = Lab::require();
    run(&lab, Backend::lab(&lab, "amphora").await?).await
}

/// Octavia 2.22 has no SCTP: that port is refused (Event + `Supported=False`), the TCP port is served.
#[tokio::test]
async fn sctp_is_gated_on_old_octavia_cloudsim() -> anyhow::Result<()> {
    let lab = Lab::require();
    let backend = Backend::sim("amphora", |p| p.octavia.max_version = "2.22".into()).await?;
    let h = Harness::start(&lab, backend, |_| {}).await?;
    let result = async {
        let app = [("app", "gated")];
        let ips = pod_ips(2);
        h.ready_pods(
            &[("g0".into(), ips[0].clone()), ("g1".into(), ips[1].clone())],
            &app,
            true,
        )
        .await?;
        h.services()
            .create(
                &PostParams::default(),
                &mk_service(
                    "gated",
                    &[("web", 80, "TCP", 8080), ("sig", 9, "SCTP", 9)],
                    Some(&app),
                ),
            )
            .await?;
        let k = h
            .wait_klb("gated", "the TCP port served", |k| shape(k) == (1, 1, 2))
            .await?;
        ensure!(
            supported(&k) == Some(("False".into(), "SctpUnsupported".into())),
            "condition {:?}",
            supported(&k)
        );
        let ev = h.events("SctpUnsupported").await?;
        ensure!(
            ev.iter()
                .any(|e| e.involved_object.kind.as_deref() == Some("Service")),
            "Warning Event on the Service"
        );
        ensure!(
            ev.iter()
                .any(|e| e.message.as_deref().unwrap_or_default().contains("2.23")),
            "the Event names the API version needed"
        );
        h.services().delete("gated", &Default::default()).await?;
        h.wait_gone("gated").await
    }
    .await;
    h.finish(result).await
}

/// Two controllers with disjoint `--namespace-selector`s on one API server, on the lab's real Octavia (ovn):
/// each builds the load balancer of its own namespace's Service only (tagged with its cluster id), and
/// deleting one Service releases that one alone.
#[tokio::test]
async fn two_controllers_with_disjoint_namespace_selectors_serve_only_their_own_services(
) -> anyhow::Result<()> {
    let lab = Lab::require();
    let a = Harness::start_selecting(&lab, Backend::lab(&lab, "ovn").await?, |_| {}).await?;
    let b = Harness::start_selecting(&lab, Backend::lab(&lab, "ovn").await?, |_| {}).await?;
    let result = disjoint(&a, &b).await;
    let b_result = if result.is_ok() {
        Ok(())
    } else {
        Err(anyhow::anyhow!("see the other harness"))
    };
    let b_done = b.finish(b_result).await;
    a.finish(result).await?;
    b_done
}

async fn disjoint(a: &Harness, b: &Harness) -> anyhow::Result<()> {
    let app = [("app", "web")];
    for (h, ip) in [a, b].into_iter().zip(pod_ips(2)) {
        h.ready_pods(&[("web-0".into(), ip)], &app, true).await?;
        h.services()
            .create(
                &PostParams::default(),
                &mk_service("web", &[("http", 80, "TCP", 8080)], Some(&app)),
            )
            .await?;
    }
    for h in [a, b] {
        h.wait_klb("web", "Ready with its member", |k| shape(k) == (1, 1, 1))
            .await?;
    }
    for (h, other) in [(a, b), (b, a)] {
        let vip = h.cluster_ip("web").await?;
        let lbs: Vec<(String, String)> = h
            .tagged_lbs()
            .await?
            .into_iter()
            .map(|lb| (lb.name, lb.vip_address))
            .collect();
        ensure!(
            lbs.len() == 1 && lbs[0].1 == vip,
            "{}: its cluster id tags {lbs:?}, want exactly the load balancer of its own Service ({vip}); the \
             other controller's namespace is {}",
            h.ns,
            other.ns
        );
    }
    // Deleting a's Service releases a's load balancer; b's stays.
    a.services().delete("web", &Default::default()).await?;
    a.wait_gone("web").await?;
    ensure!(
        a.tagged_lbs().await?.is_empty(),
        "a's load balancer left after its Service went"
    );
    ensure!(
        b.tagged_lbs().await?.len() == 1,
        "b's load balancer went with a's Service"
    );
    b.wait_klb("web", "still Ready", |k| shape(k) == (1, 1, 1))
        .await?;
    // Released by its controller before that stops (Harness::finish strips finalizers only after a failure).
    b.services().delete("web", &Default::default()).await?;
    b.wait_gone("web").await?;
    ensure!(
        b.tagged_lbs().await?.is_empty(),
        "b's load balancer left after its Service went"
    );
    Ok(())
}

/// sessionAffinity: ClientIP on a Service with a UDP and a TCP port, on the lab's real Octavia (ovn): the UDP
/// pool carries the Service's `timeoutSeconds` as `persistence_timeout` and the ovn provider puts it on OVN's
/// UDP Load_Balancer as `affinity_timeout`; the TCP pool has none (Octavia takes none there), nor has OVN's
/// TCP Load_Balancer. A changed `timeoutSeconds` reaches OVN through a pool update.
#[tokio::test]
async fn client_ip_affinity_on_udp_is_ovn_affinity_with_the_service_timeout() -> anyhow::Result<()> {
    let lab = Lab::require();
    let h = Harness::start(&lab, Backend::lab(&lab, "ovn").await?, |_| {}).await?;
    let result = udp_affinity(&h).await;
    h.finish(result).await
}

async fn udp_affinity(h: &Harness) -> anyhow::Result<()> {
    let app = [("app", "pinned")];
    let ips = pod_ips(2);
    h.ready_pods(
        &[("p0".into(), ips[0].clone()), ("p1".into(), ips[1].clone())],
        &app,
        true,
    )
    .await?;
    let mut svc = mk_service(
        "pinned",
        &[("dns", 53, "UDP", 5353), ("web", 80, "TCP", 8080)],
        Some(&app),
    );
    let spec = svc.spec.as_mut().context("spec")?;
    spec.session_affinity = Some("ClientIP".into());
    spec.session_affinity_config = Some(SessionAffinityConfig {
        client_ip: Some(ClientIPConfig {
            timeout_seconds: Some(1234),
        }),
    });
    h.services().create(&PostParams::default(), &svc).await?;
    let mut first_lb = None;
    for timeout in [1234, 4321] {
        if timeout != 1234 {
            let patch = json!({"spec": {"sessionAffinityConfig": {"clientIP": {"timeoutSeconds": timeout}}}});
            h.services()
                .patch("pinned", &PatchParams::default(), &Patch::Merge(patch))
                .await?;
        }
        let k = h
            .wait_klb("pinned", "2 listeners, 2 members each", |k| {
                shape(k) == (2, 2, 4) && k.spec.session_affinity_timeout_seconds == Some(timeout)
            })
            .await?;
        // Octavia: the UDP pool has the timeout, the TCP pool none.
        let mut by_protocol = BTreeMap::new();
        for p in k.status.as_ref().map(|s| s.pools.clone()).unwrap_or_default() {
            let pool = pools::get(&h.backend.check, &p.id).await?;
            let sp = pool
                .session_persistence
                .map(|sp| (sp.kind, sp.persistence_timeout));
            by_protocol.insert(pool.protocol, sp);
        }
        let want = |t: Option<u32>| Some(("SOURCE_IP".to_owned(), t));
        ensure!(
            by_protocol.get("UDP") == Some(&want(u32::try_from(timeout).ok()))
                && by_protocol.get("TCP") == Some(&want(None)),
            "pools' session persistence {by_protocol:?}, want the UDP one with {timeout} s"
        );
        // The new timeout is a pool update in place (a pool the provider fails would have the load
        // balancer replaced).
        let lb = lb_id(&k);
        let first = first_lb.get_or_insert_with(|| lb.clone());
        ensure!(*first == lb, "load balancer {first} replaced by {lb}");
        // OVN: the ovn provider writes it as it handles the pool create or update; the Octavia pool may
        // show it a moment before OVN does.
        let deadline = Instant::now() + Duration::from_secs(60);
        let rows = loop {
            let rows = lab_tests::ovn::nb_load_balancers(&lb)?;
            let udp = rows.iter().find(|r| r.protocol.as_deref() == Some("udp"));
            let got = udp.and_then(|r| r.options.get("affinity_timeout").cloned());
            if got == Some(timeout.to_string()) || Instant::now() > deadline {
                break rows;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        };
        for r in &rows {
            eprintln!(
                "OVN Load_Balancer {} {:?}: vips {:?} options {:?}",
                r.name, r.protocol, r.vips, r.options
            );
        }
        let options = |proto: &str| {
            rows.iter()
                .find(|r| r.protocol.as_deref() == Some(proto))
                .map(|r| r.options.clone())
        };
        let udp = options("udp").context("no OVN Load_Balancer for the UDP listener")?;
        ensure!(
            udp.get("affinity_timeout") == Some(&timeout.to_string()),
            "OVN UDP Load_Balancer options {udp:?}, want affinity_timeout={timeout}"
        );
        let tcp = options("tcp").context("no OVN Load_Balancer for the TCP listener")?;
        ensure!(
            !tcp.contains_key("affinity_timeout"),
            "OVN TCP Load_Balancer options {tcp:?}: an affinity nobody asked for"
        );
    }
    // Affinity off: the pools' persistence is cleared in place. (The ovn provider leaves OVN's
    // affinity_timeout as it was on a cleared pool: printed, not asserted.)
    let patch = json!({"spec": {"sessionAffinity": "None", "sessionAffinityConfig": null}});
    h.services()
        .patch("pinned", &PatchParams::default(), &Patch::Merge(patch))
        .await?;
    let k = h
        .wait_klb("pinned", "no affinity", |k| {
            shape(k) == (2, 2, 4) && k.spec.session_affinity.is_none()
        })
        .await?;
    ensure!(
        first_lb.as_deref() == Some(lb_id(&k).as_str()),
        "load balancer replaced when affinity went off"
    );
    for p in k.status.as_ref().map(|s| s.pools.clone()).unwrap_or_default() {
        let pool = pools::get(&h.backend.check, &p.id).await?;
        ensure!(
            pool.session_persistence.is_none() && pool.provisioning_status == "ACTIVE",
            "{} pool after affinity off: {:?} {}",
            pool.protocol,
            pool.session_persistence,
            pool.provisioning_status
        );
    }
    for r in lab_tests::ovn::nb_load_balancers(&lb_id(&k))? {
        eprintln!(
            "affinity off: OVN Load_Balancer {} {:?}: options {:?}",
            r.name, r.protocol, r.options
        );
    }
    // Released by the controller before it stops (Harness::finish strips finalizers only after a failure).
    h.services().delete("pinned", &Default::default()).await?;
    h.wait_gone("pinned").await?;
    ensure!(
        h.tagged_lbs().await?.is_empty(),
        "the load balancer left after its Service went"
    );
    Ok(())
}

/// The lab's cluster DNS (CoreDNS, lab/lib/dns.sh) through a load balancer kuryr-rs builds on the real
/// Octavia (ovn), as for kube-system/kube-dns: a selector-less Service with CoreDNS's address as its endpoint on
/// 53 UDP and 53 TCP. From a VM, each listener answers a Service's name with its clusterIP and an unknown name
/// with NXDOMAIN.
#[tokio::test]
async fn the_cluster_dns_answers_through_its_load_balancer_over_udp_and_tcp() -> anyhow::Result<()> {
    let lab = Lab::require();
    let dns = lab.dns()?;
    let h = Harness::start(&lab, Backend::lab(&lab, "ovn").await?, |_| {}).await?;
    let result = dns_through_lb(&lab, &h, &dns).await;
    h.finish(result).await
}

async fn dns_through_lb(lab: &Lab, h: &Harness, dns: &LabDns) -> anyhow::Result<()> {
    let svc = mk_service("dns", &[("dns", 53, "UDP", 53), ("dns-tcp", 53, "TCP", 53)], None);
    h.services().create(&PostParams::default(), &svc).await?;
    let endpoints: Endpoints = serde_json::from_value(json!({
        "metadata": {"name": "dns"},
        "subsets": [{"addresses": [{"ip": dns.ip}],
            "ports": [{"name": "dns", "port": 53, "protocol": "UDP"}, {"name": "dns-tcp", "port": 53, "protocol": "TCP"}]}]
    }))?;
    Api::<Endpoints>::namespaced(h.client.clone(), &h.ns)
        .create(&PostParams::default(), &endpoints)
        .await?;
    h.wait_klb("dns", "two listeners, each with CoreDNS as member", |k| {
        shape(k) == (2, 2, 2)
    })
    .await?;
    let vip = h.cluster_ip("dns").await?;
    // vm3: a worker VM on the pod network, no pod of this test on it.
    let vm = &lab.vms.last().context("the lab has no VMs")?.netns;
    let name = format!("kubernetes.default.svc.{}", dns.domain);
    let unknown = format!("no-such-service.default.svc.{}", dns.domain);
    for proto in ["udp", "tcp"] {
        // The first answer may take a moment: the load balancer is Ready before OVN has programmed it.
        let deadline = Instant::now() + Duration::from_secs(60);
        let answer = loop {
            let got = dns_query(vm, &vip, proto, &name)?;
            if got.starts_with("A ") || Instant::now() > deadline {
                break got;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        };
        ensure!(
            answer == format!("A {}", lab.apiserver.service_ip),
            "{proto} {vip}:53 {name}: {answer}, want A {}",
            lab.apiserver.service_ip
        );
        let answer = dns_query(vm, &vip, proto, &unknown)?;
        ensure!(
            answer == "NXDOMAIN",
            "{proto} {vip}:53 {unknown}: {answer}, want NXDOMAIN"
        );
        eprintln!("{proto}: {vip}:53 answered {name} and {unknown}");
    }
    // Released by the controller before it stops (Harness::finish strips finalizers only after a failure).
    h.services().delete("dns", &Default::default()).await?;
    h.wait_gone("dns").await?;
    ensure!(
        h.tagged_lbs().await?.is_empty(),
        "the load balancer left after its Service went"
    );
    Ok(())
}

/// One DNS A query for `name` to `server`:53 over `proto` (`udp`, `tcp`) from netns `ns`: `A <address>`,
/// `NXDOMAIN`, or what went wrong. (The lab has no dig; python3 writes the query.)
fn dns_query(ns: &str, server: &str, proto: &str, name: &str) -> anyhow::Result<String> {
    const QUERY: &str = r#"
import socket, struct, sys
server, proto, name = sys.argv[1:4]
q = b"\x4b\x52\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00"
q += b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\x00\x00\x01\x00\x01"
try:
    if proto == "tcp":
        s = socket.create_connection((server, 53), timeout=3)
        s.sendall(struct.pack("!H", len(q)) + q)
        n = struct.unpack("!H", s.recv(2))[0]; r = b""
        while len(r) < n:
            r += s.recv(n - len(r))
    else:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(3)
        s.sendto(q, (server, 53)); r = s.recv(4096)
except OSError as e:
    print("error:", e); sys.exit(0)
rcode, answers = r[3] & 15, struct.unpack("!H", r[6:8])[0]
if rcode == 3:
    print("NXDOMAIN")
elif rcode == 0 and answers >= 1 and r[-6:-4] == b"\x00\x04":
    print("A " + ".".join(str(b) for b in r[-4:]))
else:
    print("rcode", rcode, "answers", answers)
"#;
    let out = lab_tests::netns::exec(ns, "python3", &["-c", QUERY, server, proto, name])?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

async fn run(lab: &Lab, backend: Backend) -> anyhow::Result<()> {
    let h = Harness::start(lab, backend, |_| {}).await?;
    let result = features(&h).await;
    h.finish(result).await
}

async fn features(h: &Harness) -> anyhow::Result<()> {
    let kind = h.backend.kind.clone();
    let ovn = h.backend.provider == "ovn";
    let svcs = h.services();
    let pp = PostParams::default();
    let ips = pod_ips(3);
    let app = [("app", "f")];
    // Two ready pods and one that is not.
    h.ready_pods(
        &[("f0".into(), ips[0].clone()), ("f1".into(), ips[1].clone())],
        &app,
        true,
    )
    .await?;
    h.ready_pods(&[("f2".into(), ips[2].clone())], &app, false)
        .await?;

    // All Services at once; each is checked below.
    svcs.create(
        &pp,
        &mk_service(
            "mixed",
            &[
                ("dns-tcp", 53, "TCP", 5353),
                ("dns-udp", 53, "UDP", 5353),
                ("sig", 9, "SCTP", 9),
            ],
            Some(&app),
        ),
    )
    .await?;
    let mut affinity = mk_service("affinity", &[("web", 80, "TCP", 8080)], Some(&app));
    affinity.spec.as_mut().context("spec")?.session_affinity = Some("ClientIP".into());
    svcs.create(&pp, &affinity).await?;
    let mut public = mk_service("public", &[("web", 80, "TCP", 8080)], Some(&app));
    public.spec.as_mut().context("spec")?.type_ = Some("LoadBalancer".into());
    svcs.create(&pp, &public).await?;
    let mut publish = mk_service("publish", &[("web", 80, "TCP", 8080)], Some(&app));
    publish.spec.as_mut().context("spec")?.publish_not_ready_addresses = Some(true);
    svcs.create(&pp, &publish).await?;
    svcs.create(&pp, &mk_service("ready", &[("web", 80, "TCP", 8080)], Some(&app)))
        .await?;
    let mut timeouts = mk_service("timeouts", &[("web", 80, "TCP", 8080)], Some(&app));
    timeouts.metadata.annotations = Some(BTreeMap::from([(
        annotations::TIMEOUT_CLIENT_DATA.to_owned(),
        "70000".to_owned(),
    )]));
    svcs.create(&pp, &timeouts).await?;
    svcs.create(&pp, &mk_service("manual", &[("web", 80, "TCP", 8080)], None))
        .await?;
    // Selecting no pod: the endpoint slice controller gives it an empty slice.
    svcs.create(
        &pp,
        &mk_service("empty", &[("web", 80, "TCP", 8080)], Some(&[("app", "none")])),
    )
    .await?;
    let eps: kuryr_api::Api<Endpoints> = kuryr_api::Api::namespaced(h.client.clone(), &h.ns);
    eps.create(&pp, &manual_endpoints(&["198.18.63.10", "198.18.63.11"]))
        .await?;

    // Mixed protocols on one port, and SCTP.
    let k = h
        .wait_klb("mixed", "3 listeners", |k| shape(k) == (3, 3, 6))
        .await?;
    let mut protos: Vec<String> = k
        .status
        .as_ref()
        .map(|s| {
            s.listeners
                .iter()
                .map(|l| format!("{:?}/{}", l.protocol, l.port))
                .collect()
        })
        .unwrap_or_default();
    protos.sort();
    ensure!(
        protos == ["Sctp/9", "Tcp/53", "Udp/53"],
        "[{kind}] listeners {protos:?}"
    );

    // sessionAffinity: SOURCE_IP persistence on both; on ovn, where the provider sets no OVN affinity for a
    // TCP pool (Octavia takes no timeout for one), an Event and Supported=False say so. (UDP ports:
    // client_ip_affinity_on_udp_is_ovn_affinity_with_the_service_timeout.)
    let k = h
        .wait_klb("affinity", "2 members", |k| shape(k) == (1, 1, 2))
        .await?;
    let pool_id = k
        .status
        .as_ref()
        .and_then(|s| s.pools.first())
        .map(|p| p.id.clone())
        .unwrap_or_default();
    let pool = pools::get(&h.backend.check, &pool_id).await?;
    ensure!(
        pool.session_persistence
            .as_ref()
            .map(|p| (p.kind.as_str(), p.persistence_timeout))
            == Some(("SOURCE_IP", None)),
        "[{kind}] SOURCE_IP persistence, no timeout on a TCP pool: {:?}",
        pool.session_persistence
    );
    if ovn {
        ensure!(
            supported(&k) == Some(("False".into(), "SessionAffinityUnsupported".into())),
            "{:?}",
            supported(&k)
        );
        ensure!(
            !h.events("SessionAffinityUnsupported").await?.is_empty(),
            "Event on ovn"
        );
    } else {
        ensure!(
            supported(&k) == Some(("True".into(), "AllSupported".into())),
            "{:?}",
            supported(&k)
        );
    }

    // type=LoadBalancer: a floating IP on the VIP port, in the Service's status.
    let k = h
        .wait_klb("public", "a floating IP", |k| {
            k.status.as_ref().is_some_and(|s| s.service_pub_ip_info.is_some())
        })
        .await?;
    let fip_info = k
        .status
        .as_ref()
        .and_then(|s| s.service_pub_ip_info.clone())
        .context("fip")?;
    let fip = svc_common::exposed_floating_ip(h, "public", &k).await?;
    let vip_port = fip.port_id.clone().unwrap_or_default();
    eprintln!(
        "[{kind}] LoadBalancer Service: FIP {} -> VIP port {vip_port}",
        fip.floating_ip_address
    );

    // Not-ready endpoints: excluded, unless the Service publishes them; included once ready.
    h.wait_klb("ready", "2 ready members", |k| shape(k) == (1, 1, 2))
        .await?;
    h.wait_klb("publish", "3 members (publishNotReadyAddresses)", |k| {
        shape(k) == (1, 1, 3)
    })
    .await?;
    h.set_ready("f2", true).await?;
    h.wait_klb("ready", "3 members once f2 is ready", |k| shape(k) == (1, 1, 3))
        .await?;

    // Selector-less Service: members from manual Endpoints, following their changes.
    let k = h
        .wait_klb("manual", "2 manual members", |k| shape(k) == (1, 1, 2))
        .await?;
    ensure!(
        k.status
            .as_ref()
            .is_some_and(|s| s.members.iter().all(|m| m.ip.starts_with("198.18.63."))),
        "manual addresses"
    );
    let ep = eps.get("manual").await?;
    let mut changed = manual_endpoints(&["198.18.63.12"]);
    changed.metadata.resource_version = ep.metadata.resource_version;
    eps.replace("manual", &pp, &changed).await?;
    h.wait_klb("manual", "1 manual member", |k| {
        k.status
            .as_ref()
            .is_some_and(|s| s.members.len() == 1 && s.members[0].ip == "198.18.63.12")
    })
    .await?;

    // No ready endpoint in its slices: Kubernetes refuses a connection, an ovn load balancer drops it; an
    // Event and Supported=False say so there, until an endpoint is ready.
    let k = h
        .wait_klb("empty", "a listener without members", |k| shape(k) == (1, 1, 0))
        .await?;
    if ovn {
        ensure!(
            supported(&k) == Some(("False".into(), "NoEndpointsDropped".into())),
            "{:?}",
            supported(&k)
        );
        ensure!(!h.events("NoEndpointsDropped").await?.is_empty(), "Event on ovn");
    } else {
        ensure!(
            supported(&k) == Some(("True".into(), "AllSupported".into())),
            "{:?}",
            supported(&k)
        );
    }
    svcs.patch(
        "empty",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"selector": {"app": "f"}}})),
    )
    .await?;
    h.wait_klb("empty", "the 3 pods, all ready by now, all supported", |k| {
        shape(k) == (1, 1, 3) && supported(k) == Some(("True".into(), "AllSupported".into()))
    })
    .await?;

    // Listener timeout annotation: set at create, changed with one listener update.
    let k = h.wait_klb("timeouts", "created", |k| shape(k).0 == 1).await?;
    let lid = k
        .status
        .as_ref()
        .and_then(|s| s.listeners.first())
        .map(|l| l.id.clone())
        .unwrap_or_default();
    ensure!(
        listeners::get(&h.backend.check, &lid).await?.timeout_client_data == Some(70000),
        "timeout at create"
    );
    let before = h.backend.octavia_writes();
    svcs.patch(
        "timeouts",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {annotations::TIMEOUT_CLIENT_DATA: "90000"}}})),
    )
    .await?;
    h.wait_klb("timeouts", "timeout 90000 in the status", |k| {
        k.status
            .as_ref()
            .is_some_and(|s| s.listeners.first().and_then(|l| l.timeout_client_data) == Some(90000))
    })
    .await?;
    ensure!(
        listeners::get(&h.backend.check, &lid).await?.timeout_client_data == Some(90000),
        "timeout changed"
    );
    let writes = delta(&before, &h.backend.octavia_writes());
    ensure!(
        writes.get("octavia.listeners.update") == Some(&1),
        "[{kind}] one listener update for the annotation change: {writes:?}"
    );

    // Everything goes away: load balancers and the floating IP.
    for name in [
        "mixed", "affinity", "public", "publish", "ready", "timeouts", "manual", "empty",
    ] {
        svcs.delete(name, &Default::default()).await?;
    }
    for name in [
        "mixed", "affinity", "public", "publish", "ready", "timeouts", "manual", "empty",
    ] {
        h.wait_gone(name).await?;
    }
    ensure!(h.tagged_lbs().await?.is_empty(), "load balancers left");
    match floating_ips::get(&h.backend.check, &fip_info.ip_id).await {
        Err(e) if e.is_not_found() => {}
        other => anyhow::bail!("floating IP still there: {other:?}"),
    }
    Ok(())
}

fn manual_endpoints(ips: &[&str]) -> Endpoints {
    Endpoints {
        metadata: ObjectMeta {
            name: Some("manual".into()),
            ..ObjectMeta::default()
        },
        subsets: Some(vec![EndpointSubset {
            addresses: Some(
                ips.iter()
                    .map(|ip| EndpointAddress {
                        ip: (*ip).into(),
                        ..EndpointAddress::default()
                    })
                    .collect(),
            ),
            not_ready_addresses: None,
            ports: Some(vec![EndpointPort {
                name: Some("web".into()),
                port: 8080,
                protocol: Some("TCP".into()),
                ..EndpointPort::default()
            }]),
        }]),
    }
}
