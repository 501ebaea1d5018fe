//! neutron-vif on Open vSwitch: the veth's host end becomes a port of the integration bridge whose
//! interface carries `external_ids:iface-id=<Neutron port>` (and `attached-mac`, `iface-status`), which is
//! what ovn-controller (or the OVS agent) binds the Neutron port by. An OVS bridge takes no netlink
//! `master`: the port is a row in the switch's database, written here over its JSON-RPC socket (RFC 7047).
//! One transaction per change (and [`Ovsdb::bridge_datapath`]: a userspace datapath needs the pod end's
//! transmit checksums done in software, [`super::ethtool`]); the Interface and Port rows go with the Port's last reference (they are not
//! root tables), so deleting is one mutation of the bridge.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

use super::BindError;

/// Default socket of a node's ovsdb-server (Open vSwitch's packaging).
pub const DEFAULT_SOCKET: &str = "/var/run/openvswitch/db.sock";

/// What the bridge port of a pod's veth says of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortPlug<'a> {
    pub bridge: &'a str,
    /// The host end's name: the Port's and the Interface's.
    pub name: &'a str,
    pub iface_id: &'a str,
    pub mac: &'a str,
}

/// The transaction that adds `plug` (replacing a port of the same name left on any bridge by `stale`).
pub fn add_ops(plug: &PortPlug<'_>, stale: &[Stale]) -> Value {
    let mut ops = delete_ops(stale);
    ops.extend([
        json!({"op": "insert", "table": "Interface", "uuid-name": "iface", "row": {
            "name": plug.name,
            "external_ids": ["map", [
                ["iface-id", plug.iface_id],
                ["attached-mac", plug.mac],
                ["iface-status", "active"],
            ]],
        }}),
        json!({"op": "insert", "table": "Port", "uuid-name": "port", "row": {
            "name": plug.name,
            "interfaces": ["named-uuid", "iface"],
        }}),
        json!({"op": "mutate", "table": "Bridge", "where": [["name", "==", plug.bridge]],
            "mutations": [["ports", "insert", ["set", [["named-uuid", "port"]]]]]}),
    ]);
    Value::Array(ops)
}

/// A Port row of some name, and the bridge that holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stale {
    pub bridge: String,
    pub port_uuid: String,
}

fn delete_ops(stale: &[Stale]) -> Vec<Value> {
    stale
        .iter()
        .map(|s| {
            json!({"op": "mutate", "table": "Bridge", "where": [["name", "==", s.bridge]],
                "mutations": [["ports", "delete", ["set", [["uuid", s.port_uuid]]]]]})
        })
        .collect()
}

/// The ports named `name`, with their bridges, from the two selects of [`find_ops`]' answer.
pub fn found(result: &Value, name: &str) -> Vec<Stale> {
    let rows = |i: usize| {
        result
            .get(i)
            .and_then(|r| r.get("rows"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let uuid_of = |v: &Value| -> Option<String> {
        match v.as_array().map(Vec::as_slice) {
            Some([kind, Value::String(u)]) if kind == "uuid" => Some(u.clone()),
            _ => None,
        }
    };
    let ports: Vec<String> = rows(0)
        .iter()
        .filter(|r| r.get("name").and_then(Value::as_str) == Some(name))
        .filter_map(|r| r.get("_uuid").and_then(uuid_of))
        .collect();
    let mut out = Vec::new();
    for bridge in rows(1) {
        let Some(bname) = bridge.get("name").and_then(Value::as_str) else {
            continue;
        };
        // A set of one is the bare uuid; of more, ["set", [...]].
        let members: Vec<String> = match bridge.get("ports") {
            Some(v) if uuid_of(v).is_some() => uuid_of(v).into_iter().collect(),
            Some(v) => v
                .get(1)
                .and_then(Value::as_array)
                .map(|m| m.iter().filter_map(uuid_of).collect())
                .unwrap_or_default(),
            None => Vec::new(),
        };
        out.extend(
            members
                .into_iter()
                .filter(|m| ports.contains(m))
                .map(|port_uuid| Stale {
                    bridge: bname.to_owned(),
                    port_uuid,
                }),
        );
    }
    out
}

/// Selects the Port rows named `name` and every bridge's ports (for [`found`]).
pub fn find_ops(name: &str) -> Value {
    json!([
        {"op": "select", "table": "Port", "where": [["name", "==", name]], "columns": ["_uuid", "name"]},
        {"op": "select", "table": "Bridge", "where": [], "columns": ["name", "ports"]},
    ])
}

/// A connection-per-call client of one ovsdb-server socket.
#[derive(Clone, Debug)]
pub struct Ovsdb {
    socket: PathBuf,
}

impl Ovsdb {
    pub fn new(socket: impl Into<PathBuf>) -> Self {
        Self {
            socket: socket.into(),
        }
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The datapath type of this node's Open vSwitch bridge of that name (`""` is the kernel's, `netdev`
    /// the userspace one); `None` when there is no such bridge or no socket. Asked rather than read from
    /// the device, which is a tap on a userspace datapath.
    pub async fn bridge_datapath(&self, name: &str) -> Result<Option<String>, BindError> {
        if !self.socket.exists() {
            return Ok(None);
        }
        let ops = json!([{"op": "select", "table": "Bridge", "where": [["name", "==", name]],
            "columns": ["name", "datapath_type"]}]);
        let result = self.transact(ops).await?;
        Ok(result
            .get(0)
            .and_then(|r| r.get("rows"))
            .and_then(Value::as_array)
            .and_then(|rows| rows.first())
            .map(|row| {
                row.get("datapath_type")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned()
            }))
    }

    /// Plugs the host end into the bridge; a port of that name elsewhere (an earlier sandbox) goes first.
    pub async fn add_port(&self, plug: &PortPlug<'_>) -> Result<(), BindError> {
        let stale = found(&self.transact(find_ops(plug.name)).await?, plug.name);
        let result = self.transact(add_ops(plug, &stale)).await?;
        // The bridge mutation is the last op: a count of 0 means no bridge of that name (the inserted
        // rows, unreferenced, are dropped by the server).
        let count = result
            .as_array()
            .and_then(|r| r.last())
            .and_then(|r| r.get("count"))
            .and_then(Value::as_u64);
        if count != Some(1) {
            return Err(BindError::NotFound(format!(
                "Open vSwitch bridge {} (in {})",
                plug.bridge,
                self.socket.display()
            )));
        }
        Ok(())
    }

    /// Removes every port named `name`; none is fine.
    pub async fn delete_port(&self, name: &str) -> Result<(), BindError> {
        let stale = found(&self.transact(find_ops(name)).await?, name);
        if stale.is_empty() {
            return Ok(());
        }
        self.transact(Value::Array(delete_ops(&stale))).await.map(drop)
    }

    /// One `transact` on `Open_vSwitch`; an op's error fails the call.
    async fn transact(&self, ops: Value) -> Result<Value, BindError> {
        let err = |what: String| BindError::Ovsdb {
            socket: self.socket.clone(),
            what,
        };
        let mut params = vec![json!("Open_vSwitch")];
        params.extend(ops.as_array().cloned().unwrap_or_default());
        let request = json!({"method": "transact", "params": params, "id": 1});
        let mut stream = UnixStream::connect(&self.socket)
            .await
            .map_err(|e| err(format!("connect: {e}")))?;
        stream
            .write_all(request.to_string().as_bytes())
            .await
            .map_err(|e| err(format!("send: {e}")))?;
        let reply = read_reply(&mut stream).await.map_err(err)?;
        if let Some(e) = reply.get("error").filter(|e| !e.is_null()) {
            return Err(err(e.to_string()));
        }
        let result = reply.get("result").cloned().unwrap_or(Value::Null);
        // Per RFC 7047 a failed op answers {"error": ...} in its place (and later ops are not run).
        if let Some(e) = result
            .as_array()
            .and_then(|r| r.iter().find(|o| o.get("error").is_some_and(|e| !e.is_null())))
        {
            return Err(err(e.to_string()));
        }
        Ok(result)
    }
}

/// The answer to request id 1: JSON texts follow each other without framing; the server may send its
/// own requests (`echo`) first.
async fn read_reply(stream: &mut UnixStream) -> Result<Value, String> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let mut texts = serde_json::Deserializer::from_slice(&buf).into_iter::<Value>();
        for text in texts.by_ref() {
            match text {
                Ok(v) => {
                    if v.get("id") == Some(&json!(1)) && v.get("method").is_none() {
                        return Ok(v);
                    }
                }
                Err(e) if e.is_eof() => break,
                Err(e) => return Err(format!("answer: {e}")),
            }
        }
        let consumed = texts.byte_offset();
        buf.drain(..consumed);
        let n = stream.read(&mut chunk).await.map_err(|e| format!("read: {e}"))?;
        if n == 0 {
            return Err("the server closed the connection before answering".into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_port_carries_what_ovn_binds_it_by() {
        let plug = PortPlug {
            bridge: "br-int",
            name: "tap11111111-22",
            iface_id: "11111111-2222-3333-4444-555555555555",
            mac: "fa:16:3e:00:00:01",
        };
        let ops = add_ops(&plug, &[]);
        let ops = ops.as_array().unwrap();
        assert_eq!(ops.len(), 3);
        assert_eq!(ops[0]["table"], "Interface");
        let ids = ops[0]["row"]["external_ids"][1].as_array().unwrap();
        assert!(ids.contains(&json!(["iface-id", plug.iface_id])));
        assert!(ids.contains(&json!(["attached-mac", plug.mac])));
        assert_eq!(ops[1]["row"]["interfaces"], json!(["named-uuid", "iface"]));
        assert_eq!(ops[2]["where"], json!([["name", "==", "br-int"]]));
        assert_eq!(
            ops[2]["mutations"][0][2],
            json!(["set", [["named-uuid", "port"]]])
        );
    }

    #[test]
    fn a_stale_port_of_the_name_is_removed_in_the_same_transaction() {
        let plug = PortPlug {
            bridge: "br-int",
            name: "tapx",
            iface_id: "p",
            mac: "fa:16:3e:00:00:01",
        };
        let stale = [Stale {
            bridge: "br-old".into(),
            port_uuid: "u1".into(),
        }];
        let ops = add_ops(&plug, &stale);
        assert_eq!(ops[0]["op"], "mutate");
        assert_eq!(ops[0]["where"], json!([["name", "==", "br-old"]]));
        assert_eq!(ops[0]["mutations"][0][1], "delete");
        assert_eq!(ops[0]["mutations"][0][2], json!(["set", [["uuid", "u1"]]]));
        assert_eq!(ops[3]["op"], "mutate");
    }

    #[test]
    fn found_reads_bare_and_set_valued_port_columns() {
        let result = json!([
            {"rows": [{"_uuid": ["uuid", "p1"], "name": "tapx"}]},
            {"rows": [
                {"name": "br-int", "ports": ["set", [["uuid", "p0"], ["uuid", "p1"]]]},
                {"name": "br-ex", "ports": ["uuid", "p9"]},
                {"name": "br-one", "ports": ["uuid", "p1"]},
            ]},
        ]);
        let stale = found(&result, "tapx");
        assert_eq!(
            stale,
            vec![
                Stale {
                    bridge: "br-int".into(),
                    port_uuid: "p1".into()
                },
                Stale {
                    bridge: "br-one".into(),
                    port_uuid: "p1".into()
                },
            ]
        );
        assert!(found(&result, "other").is_empty());
    }
}
