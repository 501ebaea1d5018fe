//! What OVN itself says of a Neutron port: its Southbound `Port_Binding` (bound to which chassis, `up`).
//! On ML2/OVN this is what decides whether the port carries traffic; Neutron's `status` field is only a copy
//! of it, which can lag (docs/lab.md, "Neutron's port status on ML2/OVN").

use std::collections::HashSet;
use std::process::Command;

use anyhow::{ensure, Context as _};

/// The lab's OVN Southbound database (lab/lib/common.sh `P_SB`).
pub const SB_DB: &str = "tcp:127.0.0.1:26642";

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
