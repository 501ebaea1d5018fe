//! Real Service traffic through the lab's OVN load balancers (Octavia ovn provider), driven by
//! kuryr-controller. Backends and the client are network namespaces plugged into OVN exactly like the
//! lab's VMs (lab/lib/bootstrap.sh): a veth whose host end is a br-int port with
//! `external_ids:iface-id` = a Neutron port on the pod network bound to the lab's chassis. Each backend
//! runs a small server answering with its name (TCP 8080, UDP 5353, and TCP 8081 for the health-monitored
//! Service). The Services have no selector; their Endpoints are written by the test.
//!
//! Checked: the VIP answers from every backend; after a scale-down no request reaches the removed
//! backend; a UDP Service answers; a health-monitored Service stops sending to a backend whose server
//! was killed. Namespaces, OVS ports and Neutron ports are removed whatever happens.

mod plugged;
mod simnets;
mod svc_common;

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure};
use kuryr_api::k8s_openapi::api::core::v1::{EndpointAddress, EndpointPort, EndpointSubset};
use kuryr_api::{annotations, Api, Endpoints, ObjectMeta, PostParams};
use kuryr_openstack::neutron::ports;
use kuryr_openstack::neutron::security_groups;
use kuryr_openstack::Owner;
use lab_tests::Lab;
use plugged::{plug, Attach, Plugged};
use svc_common::{mk_service, shape, Backend, Harness};

const SERVER: &str = r#"
import socket, sys, threading
name = sys.argv[1]
def tcp(port):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port)); s.listen(64)
    while True:
        c, _ = s.accept()
        try: c.sendall((name + "\n").encode())
        finally: c.close()
def udp(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("0.0.0.0", port))
    while True:
        _, a = s.recvfrom(2048); s.sendto((name + "\n").encode(), a)
ports = sys.argv[2:]
for p in ports[1:]:
    proto, n = p.split(":")
    threading.Thread(target=tcp if proto == "tcp" else udp, args=(int(n),), daemon=True).start()
proto, n = ports[0].split(":")
(tcp if proto == "tcp" else udp)(int(n))
"#;

const CLIENT: &str = r#"
import socket, sys
proto, host, port, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
for _ in range(n):
    try:
        if proto == "tcp":
            s = socket.create_connection((host, port), timeout=1.0); s.settimeout(1.0)
            print(s.recv(100).decode().strip() or "EMPTY")
        else:
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(1.0)
            s.sendto(b"hi", (host, port)); print(s.recv(100).decode().strip())
        s.close()
    except Exception as e:
        print("ERR")
"#;

fn serve(p: &mut Plugged, name: &str, ports: &[&str], dir: &std::path::Path) -> anyhow::Result<usize> {
    let script = dir.join("server.py");
    let mut args = vec!["netns".to_owned(), "exec".into(), p.ns.clone(), "python3".into()];
    args.push(script.display().to_string());
    args.push(name.into());
    args.extend(ports.iter().map(|s| s.to_string()));
    let child = Command::new("ip")
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    p.servers.push(child);
    Ok(p.servers.len() - 1)
}

/// `n` requests from the client namespace; the answers (backend names, or `ERR`).
fn ask(
    client: &Plugged,
    dir: &std::path::Path,
    proto: &str,
    vip: &str,
    port: u16,
    n: usize,
) -> anyhow::Result<Vec<String>> {
    let out = Command::new("ip")
        .args(["netns", "exec", &client.ns, "python3"])
        .arg(dir.join("client.py"))
        .args([proto, vip, &port.to_string(), &n.to_string()])
        .output()?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect())
}

fn endpoints(name: &str, ips: &[&str], port: i32, proto: &str) -> Endpoints {
    Endpoints {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        subsets: Some(vec![EndpointSubset {
            addresses: Some(
                ips.iter()
                    .map(|ip| EndpointAddress {
                        ip: (*ip).into(),
                        ..Default::default()
                    })
                    .collect(),
            ),
            not_ready_addresses: None,
            ports: Some(vec![EndpointPort {
                name: Some("p".into()),
                port,
                protocol: Some(proto.into()),
                ..Default::default()
            }]),
        }]),
    }
}

/// Polls with `n` requests per round until `ok` holds for a round.
fn until(
    what: &str,
    timeout: Duration,
    mut round: impl FnMut() -> anyhow::Result<Vec<String>>,
    ok: impl Fn(&[String]) -> bool,
) -> anyhow::Result<(Vec<String>, Duration)> {
    let t0 = Instant::now();
    loop {
        let answers = round()?;
        if ok(&answers) {
            return Ok((answers, t0.elapsed()));
        }
        if t0.elapsed() > timeout {
            bail!("{what}: not within {timeout:?}; last answers {answers:?}");
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

#[tokio::test]
async fn ovn_load_balancers_carry_real_traffic() -> anyhow::Result<()> {
    let lab = Lab::require();
    let backend = Backend::lab(&lab, "ovn").await?;
    let h = Harness::start(&lab, backend, |_| {}).await?;
    let run_id = format!("{:04x}", fastrand::u16(..));
    let owner = Owner::new(&h.cluster_id, "test", "traffic");
    let dir = std::env::temp_dir().join(format!("kuryr-traffic-{}-{run_id}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("server.py"), SERVER)?;
    std::fs::write(dir.join("client.py"), CLIENT)?;
    let mut plugged: Vec<Plugged> = Vec::new();
    let result = traffic(&lab, &h, &owner, &run_id, &dir, &mut plugged).await;
    let cloud = h.backend.check.clone();
    let port_ids: Vec<String> = plugged.iter().map(|p| p.port_id.clone()).collect();
    drop(plugged);
    let leftovers = ports::list(
        &cloud,
        kuryr_openstack::neutron::Filter::new().tags(&owner.filter()),
    )
    .await?;
    for id in port_ids.iter().chain(leftovers.iter().map(|p| &p.id)) {
        let _ = ports::delete(&cloud, id).await;
    }
    let filter = kuryr_openstack::neutron::Filter::new().tags(&owner.filter());
    for sg in security_groups::list(&cloud, filter).await.unwrap_or_default() {
        let _ = security_groups::delete(&cloud, &sg.id).await;
    }
    let _ = std::fs::remove_dir_all(&dir);
    h.finish(result).await
}

async fn traffic(
    lab: &Lab,
    h: &Harness,
    owner: &Owner,
    run_id: &str,
    dir: &std::path::Path,
    plugged: &mut Vec<Plugged>,
) -> anyhow::Result<()> {
    let cloud = &h.backend.check;
    let sg = security_groups::create(
        cloud,
        &security_groups::CreateSecurityGroup {
            name: format!("svc-traffic-{run_id}"),
            ..Default::default()
        },
        &owner.tags()?,
    )
    .await?;
    security_groups::create_rule(
        cloud,
        &security_groups::CreateRule::ingress(&sg.id).from_cidr(&lab.pod_subnet_cidr),
    )
    .await?;
    let at = Attach::pod_network(lab);
    let prefix = format!("ksv{run_id}");
    for name in ["b0", "b1", "b2", "c"] {
        plugged.push(
            plug(
                lab,
                cloud,
                owner,
                std::slice::from_ref(&sg.id),
                &at,
                &prefix,
                name,
            )
            .await?,
        );
    }
    let mut hm_server = 0;
    for (i, name) in ["b0", "b1", "b2"].iter().enumerate() {
        serve(&mut plugged[i], name, &["tcp:8080", "udp:5353"], dir)?;
        hm_server = serve(&mut plugged[i], name, &["tcp:8081"], dir)?;
    }
    let ips: Vec<String> = plugged[..3].iter().map(|p| p.ip.clone()).collect();
    let ip: Vec<&str> = ips.iter().map(String::as_str).collect();
    let client = &plugged[3];

    let pp = PostParams::default();
    let eps: Api<Endpoints> = Api::namespaced(h.client.clone(), &h.ns);
    let svcs = h.services();
    let t0 = Instant::now();
    svcs.create(&pp, &mk_service("tcp", &[("p", 80, "TCP", 8080)], None))
        .await?;
    svcs.create(&pp, &mk_service("udp", &[("p", 53, "UDP", 5353)], None))
        .await?;
    let mut hm = mk_service("hm", &[("p", 80, "TCP", 8081)], None);
    hm.metadata.annotations = Some(BTreeMap::from([(
        annotations::HEALTH_MONITOR.to_owned(),
        r#"{"type":"TCP","delaySeconds":1,"timeoutSeconds":1,"maxRetries":1,"maxRetriesDown":1}"#.to_owned(),
    )]));
    svcs.create(&pp, &hm).await?;
    eps.create(&pp, &endpoints("tcp", &ip, 8080, "TCP")).await?;
    eps.create(&pp, &endpoints("udp", &ip, 5353, "UDP")).await?;
    eps.create(&pp, &endpoints("hm", &ip, 8081, "TCP")).await?;
    let vip = |k: &kuryr_api::KuryrLoadBalancer| k.spec.ip.clone().unwrap_or_default();
    let tcp = h.wait_klb("tcp", "3 members", |k| shape(k) == (1, 1, 3)).await?;
    eprintln!(
        "[lab-ovn] Service create -> Ready (tree ACTIVE): {} ms",
        t0.elapsed().as_millis()
    );
    let udp = h.wait_klb("udp", "3 members", |k| shape(k) == (1, 1, 3)).await?;
    let hmk = h.wait_klb("hm", "3 members", |k| shape(k) == (1, 1, 3)).await?;
    let (tcp_vip, udp_vip, hm_vip) = (vip(&tcp), vip(&udp), vip(&hmk));

    // Every backend answers through the VIP.
    let all: BTreeSet<String> = ["b0", "b1", "b2"].iter().map(|s| s.to_string()).collect();
    let (answers, took) = until(
        "TCP VIP reaches all 3 backends",
        Duration::from_secs(60),
        || ask(client, dir, "tcp", &tcp_vip, 80, 30),
        |a| a.iter().cloned().collect::<BTreeSet<_>>() == all,
    )?;
    eprintln!(
        "[lab-ovn] TCP {tcp_vip}:80 answered by {:?} ({} ms after Ready)",
        count(&answers),
        took.as_millis()
    );

    // UDP answers.
    let (answers, _) = until(
        "UDP VIP answers",
        Duration::from_secs(60),
        || ask(client, dir, "udp", &udp_vip, 53, 10),
        |a| a.iter().any(|s| all.contains(s)),
    )?;
    eprintln!("[lab-ovn] UDP {udp_vip}:53 answered by {:?}", count(&answers));

    // Scale down to b0, b1: after the KuryrLoadBalancer is Ready again, b2 gets nothing.
    let mut down = endpoints("tcp", &ip[..2], 8080, "TCP");
    down.metadata.resource_version = eps.get("tcp").await?.metadata.resource_version;
    eps.replace("tcp", &pp, &down).await?;
    h.wait_klb("tcp", "2 members", |k| shape(k) == (1, 1, 2)).await?;
    let (_, took) = until(
        "b2 out of the TCP Service",
        Duration::from_secs(30),
        || ask(client, dir, "tcp", &tcp_vip, 80, 30),
        |a| !a.iter().any(|s| s == "b2"),
    )?;
    let answers = ask(client, dir, "tcp", &tcp_vip, 80, 40)?;
    ensure!(
        !answers.iter().any(|s| s == "b2" || s == "ERR"),
        "after the scale-down: {:?}",
        count(&answers)
    );
    ensure!(
        answers.iter().any(|s| s == "b0") && answers.iter().any(|s| s == "b1"),
        "{:?}",
        count(&answers)
    );
    eprintln!(
        "[lab-ovn] scale-down: b2 out {} ms after Ready; then {:?}",
        took.as_millis(),
        count(&answers)
    );

    // Health monitor: b2's server on 8081 dies; the LB stops sending to it.
    let reached = until(
        "HM Service reaches all 3",
        Duration::from_secs(60),
        || ask(client, dir, "tcp", &hm_vip, 80, 30),
        |a| a.iter().cloned().collect::<BTreeSet<_>>() == all,
    );
    if let Err(e) = reached {
        let pool = hmk
            .status
            .as_ref()
            .and_then(|s| s.pools.first())
            .map(|p| p.id.clone())
            .unwrap_or_default();
        let members = kuryr_openstack::octavia::members::list(cloud, &pool).await?;
        let sm = Command::new("ovn-sbctl")
            .args([
                "--db=tcp:127.0.0.1:26642",
                "--bare",
                "--columns=ip,port,status,src_ip",
                "list",
                "Service_Monitor",
            ])
            .output()?;
        bail!(
            "{e}\nmembers: {:?}\nService_Monitor: {}",
            members
                .iter()
                .map(|m| (m.address.clone(), m.operating_status.clone()))
                .collect::<Vec<_>>(),
            String::from_utf8_lossy(&sm.stdout)
        );
    }
    {
        let b2 = &mut plugged[2];
        let _ = b2.servers[hm_server].kill();
        let _ = b2.servers[hm_server].wait();
    }
    let client = &plugged[3];
    let t = Instant::now();
    let (_, took) = until(
        "health monitor takes b2 out",
        Duration::from_secs(60),
        || ask(client, dir, "tcp", &hm_vip, 80, 30),
        |a| !a.iter().any(|s| s == "ERR" || s == "b2") && a.len() == 30,
    )?;
    let answers = ask(client, dir, "tcp", &hm_vip, 80, 40)?;
    ensure!(
        answers.iter().all(|s| s == "b0" || s == "b1"),
        "after the health monitor reacted: {:?}",
        count(&answers)
    );
    eprintln!(
        "[lab-ovn] health monitor: b2 out {} ms after its server died; then {:?}",
        took.max(t.elapsed()).as_millis(),
        count(&answers)
    );

    for name in ["tcp", "udp", "hm"] {
        svcs.delete(name, &Default::default()).await?;
    }
    for name in ["tcp", "udp", "hm"] {
        h.wait_gone(name).await?;
    }
    ensure!(h.tagged_lbs().await?.is_empty(), "load balancers left");
    Ok(())
}

fn count(answers: &[String]) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for a in answers {
        *m.entry(a.clone()).or_insert(0) += 1;
    }
    m
}
