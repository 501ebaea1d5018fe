//! `kuryrctl pools`: ports per trunk and network, from the cloud's tags: pool ports (`kuryr.kind=pool`,
//! ready for pods) and ports in use by pods.

use std::collections::BTreeMap;

use kuryr_openstack::neutron::{ports, trunks, Filter};
use kuryr_openstack::Owner;
use serde::Serialize;

use crate::cli::Cli;
use crate::output::{emit, Format, Progress, Table};

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PoolRow {
    /// Trunk id, or `-` for ports on no trunk.
    pub trunk: String,
    pub trunk_name: String,
    pub network: String,
    pub pooled: usize,
    pub in_use: usize,
}

/// A tagged port as far as pools care.
#[derive(Debug, Clone)]
pub struct PortFact {
    pub id: String,
    pub network: String,
    pub owner_kind: String,
}

/// Rows per (trunk, network): `subports` maps a port id to its trunk (id, name).
pub fn rows(ports: &[PortFact], subports: &BTreeMap<String, (String, String)>) -> Vec<PoolRow> {
    let mut m: BTreeMap<(String, String), PoolRow> = BTreeMap::new();
    for p in ports {
        let (trunk, name) = subports
            .get(&p.id)
            .cloned()
            .unwrap_or_else(|| ("-".into(), "-".into()));
        let row = m
            .entry((trunk.clone(), p.network.clone()))
            .or_insert_with(|| PoolRow {
                trunk,
                trunk_name: name,
                network: p.network.clone(),
                ..PoolRow::default()
            });
        if p.owner_kind.eq_ignore_ascii_case("pool") {
            row.pooled += 1;
        } else {
            row.in_use += 1;
        }
    }
    m.into_values().collect()
}

pub async fn run(cli: &Cli, fmt: Format, out: &mut dyn std::io::Write) -> anyhow::Result<i32> {
    let mut progress = Progress::new(3);
    let cloud = crate::connect::cloud(cli).await?;
    progress.step("connected to OpenStack");
    let tagged = ports::list(
        &cloud,
        Filter::new().tags(&Owner::cluster_filter(&cli.cluster_id)),
    )
    .await?;
    progress.step("listed tagged ports");
    let mut project = Filter::new();
    if let Some(p) = crate::connect::project(cli, &cloud) {
        project = project.project(p);
    }
    let trunk_list = trunks::list(&cloud, project).await?;
    progress.step("listed trunks");
    progress.finish();
    let subports: BTreeMap<String, (String, String)> = trunk_list
        .iter()
        .flat_map(|t| {
            t.sub_ports
                .iter()
                .map(move |s| (s.port_id.clone(), (t.id.clone(), t.name.clone())))
        })
        .collect();
    let facts: Vec<PortFact> = tagged
        .into_iter()
        .filter_map(|p| {
            Some(PortFact {
                owner_kind: Owner::from_tags(&p.tags)?.kind,
                id: p.id,
                network: p.network_id,
            })
        })
        .collect();
    let rows = rows(&facts, &subports);
    let mut t = Table::new(vec!["TRUNK", "TRUNK NAME", "NETWORK", "POOLED", "IN USE"]);
    for r in &rows {
        t.row(vec![
            r.trunk.clone().into(),
            r.trunk_name.clone().into(),
            r.network.clone().into(),
            r.pooled.to_string().into(),
            r.in_use.to_string().into(),
        ]);
    }
    emit(out, fmt, &t, &rows)?;
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_grouped_per_trunk_and_network_pooled_apart_from_used() {
        let p = |id: &str, net: &str, kind: &str| PortFact {
            id: id.into(),
            network: net.into(),
            owner_kind: kind.into(),
        };
        let ports = vec![
            p("a", "n1", "pool"),
            p("b", "n1", "pool"),
            p("c", "n1", "KuryrPort"),
            p("d", "n2", "pool"),
            p("e", "n1", "pool"),
        ];
        let subports = BTreeMap::from([
            ("a".to_owned(), ("t1".to_owned(), "vm1".to_owned())),
            ("b".to_owned(), ("t1".to_owned(), "vm1".to_owned())),
            ("c".to_owned(), ("t1".to_owned(), "vm1".to_owned())),
            ("d".to_owned(), ("t2".to_owned(), "vm2".to_owned())),
        ]);
        let r = rows(&ports, &subports);
        assert_eq!(r.len(), 3);
        assert_eq!((r[0].trunk.as_str(), r[0].pooled, r[0].in_use), ("-", 1, 0));
        assert_eq!(
            (
                r[1].trunk.as_str(),
                r[1].network.as_str(),
                r[1].pooled,
                r[1].in_use
            ),
            ("t1", "n1", 2, 1)
        );
        assert_eq!((r[2].trunk_name.as_str(), r[2].pooled), ("vm2", 1));
    }
}
