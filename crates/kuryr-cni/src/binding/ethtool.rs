//! Turning a device's transmit checksum offload off, over ethtool's generic netlink family (what
//! `ethtool -K <dev> tx off` does). Needed for a veth on Open vSwitch's userspace (netdev) datapath: the pod
//! sends TCP/UDP with the checksum left to the device (CHECKSUM_PARTIAL), the datapath reads the frame
//! from a packet socket without that hint, its conntrack counts the checksum as bad and OVN's ACLs drop the
//! packet (ICMP, whose checksum is always complete, passes). The kernel datapath completes them itself.
//!
//! Messages are built by hand (rtnetlink has no ethtool family): a netlink header, a generic netlink
//! header, attributes. The calls run on the caller's thread, so in the namespace that thread is in.

use std::io;

use netlink_sys::{protocols::NETLINK_GENERIC, Socket, SocketAddr};

const NLMSG_ERROR: u16 = 2;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;
const NLA_F_NESTED: u16 = 0x8000;
const GENL_ID_CTRL: u16 = 0x10;
const CTRL_CMD_GETFAMILY: u8 = 3;
const CTRL_ATTR_FAMILY_ID: u16 = 1;
const CTRL_ATTR_FAMILY_NAME: u16 = 2;
const ETHTOOL_MSG_FEATURES_SET: u8 = 12;
const ETHTOOL_A_FEATURES_HEADER: u16 = 1;
const ETHTOOL_A_FEATURES_WANTED: u16 = 3;
const ETHTOOL_A_HEADER_DEV_NAME: u16 = 2;
const ETHTOOL_A_HEADER_FLAGS: u16 = 3;
const ETHTOOL_FLAG_OMIT_REPLY: u32 = 1 << 1;
const ETHTOOL_A_BITSET_BITS: u16 = 3;
const ETHTOOL_A_BITSET_BITS_BIT: u16 = 1;
const ETHTOOL_A_BITSET_BIT_NAME: u16 = 2;

/// The transmit checksum features a veth has (NETIF_F_HW_CSUM); the kernel drops TSO with them.
pub const TX_CHECKSUM: &[&str] = &["tx-checksum-ip-generic"];

/// One netlink attribute: length, type, payload, padding to 4 bytes.
fn attr(kind: u16, payload: &[u8]) -> Vec<u8> {
    let len = 4 + payload.len();
    let mut out = Vec::with_capacity((len + 3) & !3);
    out.extend_from_slice(&(len as u16).to_ne_bytes());
    out.extend_from_slice(&kind.to_ne_bytes());
    out.extend_from_slice(payload);
    out.resize((len + 3) & !3, 0);
    out
}

fn nested(kind: u16, parts: &[Vec<u8>]) -> Vec<u8> {
    attr(kind | NLA_F_NESTED, &parts.concat())
}

fn cstr(s: &str) -> Vec<u8> {
    let mut v = s.as_bytes().to_vec();
    v.push(0);
    v
}

/// A generic netlink request: netlink header (length, type, flags, seq, port 0), command, version 1.
fn request(family: u16, cmd: u8, seq: u32, attrs: &[Vec<u8>]) -> Vec<u8> {
    let body = attrs.concat();
    let len = 16 + 4 + body.len();
    let mut out = Vec::with_capacity(len);
    out.extend_from_slice(&(len as u32).to_ne_bytes());
    out.extend_from_slice(&family.to_ne_bytes());
    out.extend_from_slice(&(NLM_F_REQUEST | NLM_F_ACK).to_ne_bytes());
    out.extend_from_slice(&seq.to_ne_bytes());
    out.extend_from_slice(&0u32.to_ne_bytes());
    out.extend_from_slice(&[cmd, 1, 0, 0]);
    out.extend_from_slice(&body);
    out
}

/// Asks the controller for the ethtool family's id.
pub fn family_request(seq: u32) -> Vec<u8> {
    request(
        GENL_ID_CTRL,
        CTRL_CMD_GETFAMILY,
        seq,
        &[attr(CTRL_ATTR_FAMILY_NAME, &cstr("ethtool"))],
    )
}

/// Sets `features` of `dev` off (a bit named without its value flag is wanted off), no reply but the ack.
pub fn features_off_request(family: u16, seq: u32, dev: &str, features: &[&str]) -> Vec<u8> {
    let header = nested(
        ETHTOOL_A_FEATURES_HEADER,
        &[
            attr(ETHTOOL_A_HEADER_DEV_NAME, &cstr(dev)),
            attr(ETHTOOL_A_HEADER_FLAGS, &ETHTOOL_FLAG_OMIT_REPLY.to_ne_bytes()),
        ],
    );
    let bits: Vec<Vec<u8>> = features
        .iter()
        .map(|f| {
            nested(
                ETHTOOL_A_BITSET_BITS_BIT,
                &[attr(ETHTOOL_A_BITSET_BIT_NAME, &cstr(f))],
            )
        })
        .collect();
    let wanted = nested(ETHTOOL_A_FEATURES_WANTED, &[nested(ETHTOOL_A_BITSET_BITS, &bits)]);
    request(family, ETHTOOL_MSG_FEATURES_SET, seq, &[header, wanted])
}

/// The messages of one datagram: (type, payload after the netlink header).
fn messages(buf: &[u8]) -> Vec<(u16, &[u8])> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 16 <= buf.len() {
        let len = u32::from_ne_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]]) as usize;
        if len < 16 || at + len > buf.len() {
            break;
        }
        out.push((
            u16::from_ne_bytes([buf[at + 4], buf[at + 5]]),
            &buf[at + 16..at + len],
        ));
        at += (len + 3) & !3;
    }
    out
}

/// The attributes of a payload: (type without flags, value).
fn attrs(mut buf: &[u8]) -> Vec<(u16, &[u8])> {
    let mut out = Vec::new();
    while buf.len() >= 4 {
        let len = u16::from_ne_bytes([buf[0], buf[1]]) as usize;
        if len < 4 || len > buf.len() {
            break;
        }
        out.push((u16::from_ne_bytes([buf[2], buf[3]]) & 0x3fff, &buf[4..len]));
        buf = &buf[((len + 3) & !3).min(buf.len())..];
    }
    out
}

/// The family id in the controller's answer.
pub fn family_id(answer: &[u8]) -> Option<u16> {
    messages(answer)
        .into_iter()
        .find(|(t, _)| *t == GENL_ID_CTRL)
        .and_then(|(_, p)| p.get(4..))
        .and_then(|a| {
            attrs(a)
                .into_iter()
                .find(|(t, _)| *t == CTRL_ATTR_FAMILY_ID)
                .and_then(|(_, v)| Some(u16::from_ne_bytes([*v.first()?, *v.get(1)?])))
        })
}

/// The errno of the ack in `answer` (0: done), `None` when it holds none.
pub fn ack(answer: &[u8]) -> Option<i32> {
    messages(answer)
        .into_iter()
        .find(|(t, _)| *t == NLMSG_ERROR)
        .and_then(|(_, p)| {
            Some(-i32::from_ne_bytes([
                *p.first()?,
                *p.get(1)?,
                *p.get(2)?,
                *p.get(3)?,
            ]))
        })
}

/// One request, then datagrams until the one with an ack (or, for the family, its answer).
fn exchange(sock: &Socket, msg: &[u8], done: impl Fn(&[u8]) -> bool) -> io::Result<Vec<u8>> {
    sock.send_to(msg, &SocketAddr::new(0, 0), 0)?;
    loop {
        let (buf, _) = sock.recv_from_full()?;
        if done(&buf) {
            return Ok(buf);
        }
    }
}

/// Turns `features` of `dev` off, in the calling thread's network namespace.
pub fn features_off(dev: &str, features: &[&str]) -> io::Result<()> {
    let mut sock = Socket::new(NETLINK_GENERIC)?;
    sock.bind_auto()?;
    let answer = exchange(&sock, &family_request(1), |b| {
        family_id(b).is_some() || ack(b).is_some()
    })?;
    let family = family_id(&answer).ok_or_else(|| {
        io::Error::other(format!(
            "no ethtool netlink family (errno {})",
            ack(&answer).unwrap_or_default()
        ))
    })?;
    let answer = exchange(&sock, &features_off_request(family, 2, dev, features), |b| {
        ack(b).is_some()
    })?;
    match ack(&answer) {
        Some(0) => Ok(()),
        Some(errno) => Err(io::Error::from_raw_os_error(errno)),
        None => Err(io::Error::other("ethtool answered without an ack")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_are_padded_to_four_bytes_and_nests_flagged() {
        let a = attr(2, b"eth0\0");
        assert_eq!(a.len(), 12);
        assert_eq!(u16::from_ne_bytes([a[0], a[1]]), 9);
        let n = nested(1, &[a]);
        assert_eq!(u16::from_ne_bytes([n[2], n[3]]), 1 | NLA_F_NESTED);
        assert_eq!(u16::from_ne_bytes([n[0], n[1]]), 16);
    }

    #[test]
    fn the_request_names_the_device_and_wants_the_bits_without_a_value() {
        let m = features_off_request(27, 2, "eth0", TX_CHECKSUM);
        assert_eq!(u32::from_ne_bytes([m[0], m[1], m[2], m[3]]) as usize, m.len());
        assert_eq!(u16::from_ne_bytes([m[4], m[5]]), 27);
        assert_eq!(m[16], ETHTOOL_MSG_FEATURES_SET);
        let top = attrs(&m[20..]);
        assert_eq!(top.iter().map(|(t, _)| *t).collect::<Vec<_>>(), [1, 3]);
        let header = attrs(top[0].1);
        assert_eq!(header[0], (ETHTOOL_A_HEADER_DEV_NAME, &b"eth0\0"[..]));
        let bits = attrs(attrs(top[1].1)[0].1);
        let bit = attrs(bits[0].1);
        assert_eq!(
            bit,
            vec![(ETHTOOL_A_BITSET_BIT_NAME, &b"tx-checksum-ip-generic\0"[..])]
        );
    }

    #[test]
    fn family_and_ack_are_read_from_the_answers() {
        // A controller answer: header, genl header, FAMILY_NAME, FAMILY_ID = 21.
        let mut ans = request(
            GENL_ID_CTRL,
            1,
            1,
            &[attr(2, b"ethtool\0"), attr(1, &21u16.to_ne_bytes())],
        );
        assert_eq!(family_id(&ans), Some(21));
        assert_eq!(ack(&ans), None);
        // An NLMSG_ERROR with errno -19 (ENODEV), then one with 0.
        let err = |e: i32| {
            let mut m = request(NLMSG_ERROR, 0, 2, &[]);
            m.truncate(16);
            m.extend_from_slice(&e.to_ne_bytes());
            let len = m.len() as u32;
            m[0..4].copy_from_slice(&len.to_ne_bytes());
            m
        };
        assert_eq!(ack(&err(-19)), Some(19));
        ans.extend(err(0));
        assert_eq!(ack(&ans), Some(0));
    }
}
