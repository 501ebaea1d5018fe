//! What OVN itself says of a Neutron port: its Southbound `Port_Binding` (bound to which chassis, `up`).
//! On ML2/OVN this is what decides whether the port carries traffic; Neutron's `status` field is only a copy
//! of it, which can lag (docs/lab.md, "Neutron's port status on ML2/OVN"). And what the ovn Octavia provider
//! made of a load balancer: its Northbound `Load_Balancer` rows.

use std::collections::{BTreeMap, HashSet};
use std::process::Command;

use anyhow::{ensure, Context as _};

/// The lab's OVN Southbound database (lab/lib/common.sh `P_SB`).
pub const SB_DB: &str = "tcp:127.0.0.1:26642";

/// The lab's OVN Northbound database (lab/lib/common.sh `P_NB`).
pub const NB_DB: &str = "tcp:127.0.0.1:26641";

/// A port's `Port_Binding` row, as `ovn-sbctl` reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortBinding {
    /// `up` (OVN ≥ 21.03): ovn-controller has installed the port's flows.
    pub up: bool,
    /// The name of the chassis the port is bound to; `None` when unbound.
    pub chassis: Option<String>,
}

fn sbctl(args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new("ovn-sbctl")
        .arg(format!("--db={SB_DB}"))
        .args(["--bare", "--no-leader-only"])
        .args(args)
        .output()
        .context("running ovn-sbctl")?;
    ensure!(
        out.status.success(),
        "ovn-sbctl {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// The `Port_Binding` of Neutron port `port_id` (its logical port has the port's id as name).
pub fn port_binding(port_id: &str) -> anyhow::Result<PortBinding> {
    let lp = format!("logical_port={port_id}");
    let up = sbctl(&["--columns=up", "find", "Port_Binding", &lp])?;
    ensure!(!up.is_empty(), "OVN has no Port_Binding for port {port_id}");
    let chassis = sbctl(&["--columns=chassis", "find", "Port_Binding", &lp])?;
    let chassis = if chassis.is_empty() {
        None
    } else {
        Some(sbctl(&["--columns=name", "list", "Chassis", &chassis])?)
    };
    Ok(PortBinding {
        up: up == "true",
        chassis,
    })
}

/// The Neutron ports OVN has up: the `logical_port` of every `Port_Binding` whose `up` is true.
pub fn up_ports() -> anyhow::Result<HashSet<String>> {
    let names = sbctl(&["--columns=logical_port", "find", "Port_Binding", "up=true"])?;
    Ok(names
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect())
}

/// A Northbound `Load_Balancer` row. The ovn provider makes one per protocol of an Octavia load balancer,
/// named after its id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NbLoadBalancer {
    pub name: String,
    /// `tcp`, `udp`, `sctp`; `None` when unset.
    pub protocol: Option<String>,
    /// `VIP:port` → backends (`IP:port,...`).
    pub vips: BTreeMap<String, String>,
    /// e.g. `affinity_timeout` (sessionAffinity ClientIP), `hairpin_snat_ip`.
    pub options: BTreeMap<String, String>,
}

/// The Northbound `Load_Balancer` rows named `name` (an Octavia load balancer's id, for the ovn provider).
pub fn nb_load_balancers(name: &str) -> anyhow::Result<Vec<NbLoadBalancer>> {
    let out = Command::new("ovn-nbctl")
        .arg(format!("--db={NB_DB}"))
        .args([
            "--no-leader-only",
            "--format=json",
            "--columns=name,protocol,vips,options",
        ])
        .args(["find", "Load_Balancer", &format!("name=\"{name}\"")])
        .output()
        .context("running ovn-nbctl")?;
    ensure!(
        out.status.success(),
        "ovn-nbctl find Load_Balancer name={name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table: serde_json::Value = serde_json::from_slice(&out.stdout).context("ovn-nbctl's JSON")?;
    let rows = table["data"].as_array().context("no data in ovn-nbctl's JSON")?;
    rows.iter()
        .map(|row| {
            let col = |i: usize| row.get(i).context("a column missing in ovn-nbctl's JSON");
            Ok(NbLoadBalancer {
                name: col(0)?.as_str().unwrap_or_default().to_owned(),
                // An optional column is a string when set, `["set", []]` when not.
                protocol: col(1)?.as_str().map(str::to_owned),
                vips: ovsdb_map(col(2)?)?,
                options: ovsdb_map(col(3)?)?,
            })
        })
        .collect()
}

/// An OVSDB map in JSON: `["map", [[key, value], ...]]`.
fn ovsdb_map(v: &serde_json::Value) -> anyhow::Result<BTreeMap<String, String>> {
    let pairs = v
        .get(1)
        .and_then(serde_json::Value::as_array)
        .with_context(|| format!("not an OVSDB map: {v}"))?;
    Ok(pairs
        .iter()
        .filter_map(|p| Some((p.get(0)?.as_str()?.to_owned(), p.get(1)?.as_str()?.to_owned())))
        .collect())
}
