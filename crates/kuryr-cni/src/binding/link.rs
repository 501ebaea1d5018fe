//! Link lookups and small changes shared by the drivers.

use futures::TryStreamExt;
use rtnetlink::packet_route::link::{LinkAttribute, LinkMessage};
use rtnetlink::{Handle, LinkUnspec};

use super::error::errno;
use super::parent::HostLink;
use super::BindError;

pub async fn get_by_name(h: &Handle, name: &str) -> Result<Option<LinkMessage>, BindError> {
    let res = h
        .link()
        .get()
        .match_name(name.to_string())
        .execute()
        .try_next()
        .await;
    match res {
        Ok(m) => Ok(m),
        Err(e) => {
            let e = BindError::netlink(format!("get link {name}"))(e);
            if matches!(e.errno(), Some(errno::ENODEV | errno::ENOENT)) {
                Ok(None)
            } else {
                Err(e)
            }
        }
    }
}

/// Every link of the namespace, for choosing a parent ([`super::parent::choose`]).
pub async fn list(h: &Handle) -> Result<Vec<HostLink>, BindError> {
    let links: Vec<LinkMessage> = h
        .link()
        .get()
        .execute()
        .try_collect()
        .await
        .map_err(BindError::netlink("list links"))?;
    Ok(links.iter().map(host_link).collect())
}

/// A link as the parent choice sees it. IFLA_LINK with IFLA_LINK_NETNSID is an index in another namespace
/// (a veth's peer, a pod's macvlan parent), so it is no lower device here.
pub fn host_link(m: &LinkMessage) -> HostLink {
    let attrs = &m.attributes;
    let foreign = attrs.iter().any(|a| matches!(a, LinkAttribute::LinkNetNsId(_)));
    HostLink {
        index: m.header.index,
        name: attrs
            .iter()
            .find_map(|a| match a {
                LinkAttribute::IfName(n) => Some(n.clone()),
                _ => None,
            })
            .unwrap_or_default(),
        mac: mac_of(m),
        master: attrs.iter().find_map(|a| match a {
            LinkAttribute::Controller(i) => Some(*i),
            _ => None,
        }),
        lower: attrs.iter().find_map(|a| match a {
            LinkAttribute::Link(i) if !foreign => Some(*i),
            _ => None,
        }),
    }
}

pub async fn index_of(h: &Handle, name: &str) -> Result<Option<u32>, BindError> {
    Ok(get_by_name(h, name).await?.map(|m| m.header.index))
}

/// Deletes `name` if present; true when something was deleted.
pub async fn delete_by_name(h: &Handle, name: &str) -> Result<bool, BindError> {
    let Some(index) = index_of(h, name).await? else {
        return Ok(false);
    };
    match h.link().del(index).execute().await {
        Ok(()) => Ok(true),
        Err(e) => {
            let e = BindError::netlink(format!("delete link {name}"))(e);
            // Gone meanwhile (a veth peer deleted with its other end).
            if matches!(e.errno(), Some(errno::ENODEV | errno::ENOENT)) {
                Ok(false)
            } else {
                Err(e)
            }
        }
    }
}

pub async fn set_up(h: &Handle, index: u32, name: &str) -> Result<(), BindError> {
    h.link()
        .set(LinkUnspec::new_with_index(index).up().build())
        .execute()
        .await
        .map_err(BindError::netlink(format!("set {name} up")))
}

/// A name for a device on its way into a pod (`kt` + the port ID's first 12 alphanumerics): unique per port,
/// so neither the parent's namespace nor the pod's holds it already.
pub fn temp_name(port_id: &str) -> String {
    let id: String = port_id
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(12)
        .collect();
    format!("kt{id}")
}

/// Renames `from` (down, as just created) to `to`.
pub async fn rename(h: &Handle, from: &str, to: &str) -> Result<(), BindError> {
    let index = index_of(h, from)
        .await?
        .ok_or_else(|| BindError::NotFound(format!("{from} in the pod namespace")))?;
    h.link()
        .set(LinkUnspec::new_with_index(index).name(to).build())
        .execute()
        .await
        .map_err(BindError::netlink(format!("rename {from} to {to}")))
}

/// Six colon-separated octets of exactly two hex digits (`u8::from_str_radix` alone also takes `+d`).
pub fn parse_mac(s: &str) -> Result<Vec<u8>, BindError> {
    let octet = |b: &str| {
        (b.len() == 2 && b.bytes().all(|c| c.is_ascii_hexdigit()))
            .then(|| u8::from_str_radix(b, 16).ok())
            .flatten()
    };
    match s.split(':').map(octet).collect::<Option<Vec<u8>>>() {
        Some(b) if b.len() == 6 => Ok(b),
        _ => Err(BindError::InvalidVif(format!("bad MAC address {s:?}"))),
    }
}

pub fn format_mac(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect::<Vec<_>>().join(":")
}

pub fn mac_of(m: &LinkMessage) -> Option<String> {
    m.attributes.iter().find_map(|a| match a {
        LinkAttribute::Address(b) => Some(format_mac(b)),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temporary_names_are_short_unique_per_port_and_never_eth0() {
        let a = temp_name("0123e456-7e89-b12d-3a45-6426614174000");
        assert_eq!(a, "kt0123e4567e89");
        assert!(a.len() <= 15);
        assert_ne!(a, temp_name("9999e456-7e89-b12d-3a45-6426614174000"));
    }

    #[test]
    fn a_link_message_gives_name_mac_master_and_a_lower_device_only_in_this_namespace() {
        let mut m = LinkMessage::default();
        m.header.index = 5;
        m.attributes = vec![
            LinkAttribute::IfName("bond0.100".into()),
            LinkAttribute::Address(vec![0xfa, 0x16, 0x3e, 0, 0, 5]),
            LinkAttribute::Controller(9),
            LinkAttribute::Link(4),
        ];
        assert_eq!(
            host_link(&m),
            HostLink {
                index: 5,
                name: "bond0.100".into(),
                mac: Some("fa:16:3e:00:00:05".into()),
                master: Some(9),
                lower: Some(4),
            }
        );
        // The lab VM's veth: its IFLA_LINK is the peer's index in the root namespace.
        m.attributes = vec![
            LinkAttribute::IfName("eth0".into()),
            LinkAttribute::Link(4),
            LinkAttribute::LinkNetNsId(0),
        ];
        let h = host_link(&m);
        assert_eq!((h.lower, h.master, h.mac), (None, None, None));
    }

    #[test]
    fn macs_parse_and_format() {
        let b = parse_mac("FA:16:3e:00:0a:ff").unwrap();
        assert_eq!(b, vec![0xfa, 0x16, 0x3e, 0, 0x0a, 0xff]);
        assert_eq!(format_mac(&b), "fa:16:3e:00:0a:ff");
        for bad in [
            "",
            "fa:16:3e:00:0a",
            "fa:16:3e:00:0a:ff:01",
            "zz:16:3e:00:0a:ff",
            // Found by fuzz/fuzz_targets/crd_status.rs: read as fa:16:3e:0d:21:9b before.
            "fa:16:3e:+d:21:9b",
            "f:16:3e:00:0a:ff",
        ] {
            assert!(parse_mac(bad).is_err(), "{bad}");
        }
    }
}
