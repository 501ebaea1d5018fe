//! Which link of the node's namespace a nested VIF's VLAN/macvlan device hangs off. Cloud images name the
//! VM's NIC differently (eth0, ens3, enp1s0) and nodes of one cluster may differ, so the controller records
//! the MAC of the VM's Neutron port (`parentMac`) and each node finds its NIC by it. A name an operator
//! pinned wins when this node has it. Pure: the binder lists the links ([`super::link::list`]).

use kuryr_api::Vif;

/// Upstream's `[binding] link_iface` default: the parent of VIFs that record neither a name nor a MAC
/// (migrated from upstream Kuryr), so such clusters keep working without configuration.
pub const LEGACY_LINK_IFACE: &str = "eth0";

/// A link of the node's namespace, as the choice needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostLink {
    pub index: u32,
    pub name: String,
    /// Lower-case `aa:bb:cc:dd:ee:ff`; `None` for links without a hardware address.
    pub mac: Option<String>,
    /// The bond or bridge this link is enslaved to.
    pub master: Option<u32>,
    /// The device a VLAN/macvlan/ipvlan link is stacked on, when that device is in this namespace.
    pub lower: Option<u32>,
}

/// What decided the choice (for the log).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChosenBy {
    /// The daemon's `--link-iface`: this node's own pin, the most specific setting.
    NodePin,
    /// The VIF's `parentIfname`: the controller's `link_iface`, pinned for every node.
    VifPin,
    /// The VIF's `parentMac`: the VM port's MAC.
    Mac,
    /// The VIF records neither: [`LEGACY_LINK_IFACE`].
    Legacy,
}

/// The chosen parent link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chosen<'a> {
    pub link: &'a HostLink,
    pub by: ChosenBy,
    /// Pinned names this node does not have (passed over for the MAC).
    pub absent_pins: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParentError {
    #[error(
        "no link has MAC {mac} (the VM's Neutron port){}; links here: {}",
        absent(.absent_pins),
        seen(.links)
    )]
    NoMacMatch {
        mac: String,
        absent_pins: Vec<String>,
        links: Vec<HostLink>,
    },
    #[error("links {} all carry MAC {mac} (the VM's Neutron port): pin one with --link-iface", .names.join(", "))]
    AmbiguousMac { mac: String, names: Vec<String> },
    #[error(
        "parent link {} not found and the VIF has no parentMac to find it by; links here: {}",
        .wanted.join(" or "),
        seen(.links)
    )]
    NotFound {
        wanted: Vec<String>,
        links: Vec<HostLink>,
    },
}

fn absent(pins: &[String]) -> String {
    if pins.is_empty() {
        String::new()
    } else {
        format!(" and pinned {} is not here", pins.join(", "))
    }
}

fn seen(links: &[HostLink]) -> String {
    links
        .iter()
        .map(|l| format!("{} {}", l.name, l.mac.as_deref().unwrap_or("(no MAC)")))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The parent of `vif` among `links`: a pinned name this node has (`node_pin`, then the VIF's
/// `parentIfname`), else the link carrying the VIF's `parentMac`, else (VIFs recording neither name nor
/// MAC) [`LEGACY_LINK_IFACE`].
pub fn choose<'a>(
    links: &'a [HostLink],
    vif: &Vif,
    node_pin: Option<&str>,
) -> Result<Chosen<'a>, ParentError> {
    let pins = [
        (node_pin, ChosenBy::NodePin),
        (vif.parent_ifname.as_deref(), ChosenBy::VifPin),
    ];
    let mut absent_pins = Vec::new();
    for (name, by) in pins {
        let Some(name) = name.filter(|n| !n.is_empty()) else {
            continue;
        };
        match links.iter().find(|l| l.name == name) {
            Some(link) => {
                return Ok(Chosen {
                    link,
                    by,
                    absent_pins,
                })
            }
            None => absent_pins.push(name.to_owned()),
        }
    }
    match vif.parent_mac.as_deref().filter(|m| !m.is_empty()) {
        Some(mac) => by_mac(links, mac, absent_pins),
        None if absent_pins.is_empty() => match links.iter().find(|l| l.name == LEGACY_LINK_IFACE) {
            Some(link) => Ok(Chosen {
                link,
                by: ChosenBy::Legacy,
                absent_pins,
            }),
            None => Err(ParentError::NotFound {
                wanted: vec![LEGACY_LINK_IFACE.to_owned()],
                links: links.to_vec(),
            }),
        },
        None => Err(ParentError::NotFound {
            wanted: absent_pins,
            links: links.to_vec(),
        }),
    }
}

/// The one link carrying `mac`. Stacked devices share their NIC's MAC (a VLAN on it, the slaves of a bond,
/// the port of a bridge that took its MAC): among the carriers, a link whose master or lower device also
/// carries it is passed over for that one, so a bond or bridge wins over its ports, a NIC over its VLANs.
fn by_mac<'a>(links: &'a [HostLink], mac: &str, absent_pins: Vec<String>) -> Result<Chosen<'a>, ParentError> {
    let carriers: Vec<&HostLink> = links
        .iter()
        .filter(|l| l.mac.as_deref().is_some_and(|m| m.eq_ignore_ascii_case(mac)))
        .collect();
    let carries = |index: Option<u32>| index.is_some_and(|i| carriers.iter().any(|c| c.index == i));
    let top: Vec<&HostLink> = carriers
        .iter()
        .copied()
        .filter(|l| !carries(l.master) && !carries(l.lower))
        .collect();
    match top.as_slice() {
        [link] => Ok(Chosen {
            link,
            by: ChosenBy::Mac,
            absent_pins,
        }),
        [] => Err(ParentError::NoMacMatch {
            mac: mac.to_owned(),
            absent_pins,
            links: links.to_vec(),
        }),
        many => Err(ParentError::AmbiguousMac {
            mac: mac.to_owned(),
            names: many.iter().map(|l| l.name.clone()).collect(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::mk_vif;

    const VM_MAC: &str = "fa:16:3e:12:34:56";

    fn l(index: u32, name: &str, mac: Option<&str>) -> HostLink {
        HostLink {
            index,
            name: name.into(),
            mac: mac.map(Into::into),
            master: None,
            lower: None,
        }
    }

    /// A VM whose NIC is `ens3` (no `eth0`), with loopback and a bridge of some other tool.
    fn ens3_vm() -> Vec<HostLink> {
        vec![
            l(1, "lo", Some("00:00:00:00:00:00")),
            l(2, "ens3", Some(VM_MAC)),
            l(3, "docker0", Some("02:42:ac:11:00:01")),
        ]
    }

    fn vif(pin: Option<&str>, mac: Option<&str>) -> Vif {
        let mut v = mk_vif(true);
        v.parent_ifname = pin.map(Into::into);
        v.parent_mac = mac.map(Into::into);
        v
    }

    fn name<'a>(r: &'a Result<Chosen<'_>, ParentError>) -> (&'a str, ChosenBy) {
        let c = r.as_ref().unwrap();
        (c.link.name.as_str(), c.by)
    }

    #[test]
    fn the_nic_is_found_by_the_vm_ports_mac_whatever_its_name() {
        let links = ens3_vm();
        let r = choose(&links, &vif(None, Some(VM_MAC)), None);
        assert_eq!(name(&r), ("ens3", ChosenBy::Mac));
        let upper = vif(None, Some(&VM_MAC.to_uppercase()));
        assert_eq!(name(&choose(&links, &upper, None)), ("ens3", ChosenBy::Mac));
    }

    #[test]
    fn a_pinned_name_the_node_has_wins_the_nodes_own_first() {
        let mut links = ens3_vm();
        links.push(l(4, "ens4", Some("fa:16:3e:00:00:04")));
        let v = vif(Some("docker0"), Some(VM_MAC));
        assert_eq!(
            name(&choose(&links, &v, Some("ens4"))),
            ("ens4", ChosenBy::NodePin)
        );
        assert_eq!(name(&choose(&links, &v, None)), ("docker0", ChosenBy::VifPin));
        // An empty pin (`KURYR_LINK_IFACE=`) is no pin.
        assert_eq!(name(&choose(&links, &v, Some(""))), ("docker0", ChosenBy::VifPin));
    }

    #[test]
    fn pinned_names_the_node_lacks_give_way_to_the_mac() {
        let links = ens3_vm();
        let r = choose(&links, &vif(Some("eth0"), Some(VM_MAC)), Some("enp1s0"));
        assert_eq!(name(&r), ("ens3", ChosenBy::Mac));
        assert_eq!(r.unwrap().absent_pins, vec!["enp1s0", "eth0"]);
    }

    #[test]
    fn a_bond_or_bridge_wins_over_its_ports_and_a_nic_over_its_vlans() {
        let slave = |index, name: &str, master| HostLink {
            master: Some(master),
            ..l(index, name, Some(VM_MAC))
        };
        let bond = vec![
            slave(2, "ens3", 4),
            slave(3, "ens4", 4),
            l(4, "bond0", Some(VM_MAC)),
            HostLink {
                lower: Some(4),
                ..l(5, "bond0.100", Some(VM_MAC))
            },
        ];
        assert_eq!(
            name(&choose(&bond, &vif(None, Some(VM_MAC)), None)),
            ("bond0", ChosenBy::Mac)
        );
        let bridge = vec![slave(2, "ens3", 3), l(3, "br0", Some(VM_MAC))];
        assert_eq!(
            name(&choose(&bridge, &vif(None, Some(VM_MAC)), None)),
            ("br0", ChosenBy::Mac)
        );
        // A bridge port whose bridge has another MAC is the carrier itself.
        let other = vec![slave(2, "ens3", 3), l(3, "br0", Some("02:00:00:00:00:03"))];
        assert_eq!(
            name(&choose(&other, &vif(None, Some(VM_MAC)), None)),
            ("ens3", ChosenBy::Mac)
        );
    }

    #[test]
    fn two_unrelated_links_with_the_mac_are_ambiguous() {
        let links = vec![l(2, "ens3", Some(VM_MAC)), l(3, "ens4", Some(VM_MAC))];
        let err = choose(&links, &vif(None, Some(VM_MAC)), None).unwrap_err();
        assert_eq!(
            err,
            ParentError::AmbiguousMac {
                mac: VM_MAC.into(),
                names: vec!["ens3".into(), "ens4".into()],
            }
        );
        assert!(err.to_string().contains("pin one with --link-iface"), "{err}");
    }

    #[test]
    fn no_link_with_the_mac_is_an_error_naming_the_mac_and_the_links_seen() {
        let mut links = ens3_vm();
        links.push(l(9, "wg0", None));
        let err = choose(&links, &vif(Some("eth0"), Some("fa:16:3e:99:99:99")), None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "no link has MAC fa:16:3e:99:99:99 (the VM's Neutron port) and pinned eth0 is not here; links \
             here: lo 00:00:00:00:00:00, ens3 fa:16:3e:12:34:56, docker0 02:42:ac:11:00:01, wg0 (no MAC)"
        );
    }

    #[test]
    fn a_vif_recording_neither_name_nor_mac_hangs_off_eth0_like_upstream() {
        let mut links = ens3_vm();
        links.push(l(7, "eth0", Some("fa:16:3e:00:00:07")));
        assert_eq!(
            name(&choose(&links, &vif(None, None), None)),
            ("eth0", ChosenBy::Legacy)
        );
        let err = choose(&ens3_vm(), &vif(None, None), None).unwrap_err();
        assert!(
            matches!(&err, ParentError::NotFound { wanted, .. } if wanted == &["eth0"]),
            "{err}"
        );
        assert!(err.to_string().contains("ens3 fa:16:3e:12:34:56"), "{err}");
    }

    #[test]
    fn a_pinned_name_the_node_lacks_without_a_mac_is_not_found_not_eth0() {
        let mut links = ens3_vm();
        links.push(l(7, "eth0", Some("fa:16:3e:00:00:07")));
        let err = choose(&links, &vif(Some("ens9"), None), None).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("parent link ens9 not found and the VIF has no parentMac to find it by"),
            "{err}"
        );
    }
}
