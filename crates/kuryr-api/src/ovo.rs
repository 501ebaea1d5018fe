//! Reads upstream Kuryr's os-vif "versioned object" primitives (what `obj_to_primitive()` wrote into
//! `KuryrPort.status.vifs.<ifname>.vif`) into our typed [`Vif`], so clusters migrated from upstream keep
//! working: the daemon can wire and the controller can release ports created by upstream. [`Vif::from_value`]
//! reads a stored VIF of either shape (the typed [`Vif`] itself knows nothing of upstream's).
//!
//! Shape: `{"versioned_object.name": "VIFVlanNested", "versioned_object.data": {...}, ...}`, nested for the
//! network, its subnets, their fixed IPs and routes (lists are `{"objects": [...]}` inside the data).

use serde::de::Error as _;
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use crate::vif::{Vif, VifIp, VifRoute, VifType};
use crate::Error;

impl Vif {
    /// Parses either shape: ours, or upstream's os-vif OVO primitive. Ours wins when both are present, which
    /// happens after a merge patch writes typed fields over a migrated object (the OVO keys are preserved).
    pub fn from_value(value: serde_json::Value) -> Result<Self, Error> {
        if value.get("portId").is_none() && value.get(NAME).is_some() {
            return vif_from_primitive(&value);
        }
        Ok(serde_json::from_value(value)?)
    }
}

/// `deserialize_with` for fields holding a [`Vif`] that may still be in upstream's OVO shape.
pub(crate) fn deserialize_tolerant<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vif, D::Error> {
    let value = serde_json::Value::deserialize(deserializer)?;
    Vif::from_value(value).map_err(D::Error::custom)
}

/// Key holding the object's class name.
pub const NAME: &str = "versioned_object.name";
/// Key holding the object's fields.
pub const DATA: &str = "versioned_object.data";

/// Converts one upstream VIF primitive.
pub fn vif_from_primitive(value: &Value) -> Result<Vif, Error> {
    let class = value
        .get(NAME)
        .and_then(Value::as_str)
        .ok_or_else(|| legacy("no versioned_object.name"))?;
    let vif_type = match class {
        "VIFVlanNested" => VifType::NestedVlan,
        "VIFMacvlanNested" => VifType::NestedMacvlan,
        "VIFDPDKNested" => VifType::NestedDpdk,
        // neutron-vif produced these depending on the port's binding details.
        "VIFOpenVSwitch" | "VIFBridge" | "VIFVHostUser" | "VIFGeneric" => VifType::NeutronVif,
        other => return Err(legacy(format!("unknown VIF class {other}"))),
    };
    let data = obj_data(value, class)?;
    let network = data.get("network").map(|n| obj_data(n, "Network")).transpose()?;

    let mut ips = Vec::new();
    if let Some(network) = network {
        for subnet in objects(network.get("subnets"), "SubnetList")? {
            let subnet = obj_data(subnet, "Subnet")?;
            let cidr = str_field(subnet, "cidr", "Subnet")?;
            let gateway = opt_str(subnet, "gateway");
            let mut routes = Vec::new();
            for route in objects(subnet.get("routes"), "RouteList")? {
                let route = obj_data(route, "Route")?;
                routes.push(VifRoute {
                    cidr: str_field(route, "cidr", "Route")?,
                    gateway: str_field(route, "gateway", "Route")?,
                });
            }
            for ip in objects(subnet.get("ips"), "FixedIPList")? {
                ips.push(VifIp {
                    address: str_field(obj_data(ip, "FixedIP")?, "address", "FixedIP")?,
                    cidr: cidr.clone(),
                    gateway: gateway.clone(),
                    subnet_id: None,
                    routes: routes.clone(),
                });
            }
        }
    }

    Ok(Vif {
        vif_type,
        port_id: str_field(data, "id", class)?,
        network_id: match network {
            Some(network) => str_field(network, "id", "Network")?,
            None => return Err(legacy(format!("{class} has no network"))),
        },
        mac: str_field(data, "address", class)?,
        ips,
        mtu: network
            .and_then(|n| n.get("mtu"))
            .and_then(Value::as_u64)
            .and_then(|m| u32::try_from(m).ok()),
        vlan_id: data
            .get("vlan_id")
            .and_then(Value::as_u64)
            .and_then(|v| u16::try_from(v).ok()),
        vrrp_mac: None,
        trunk_id: None,
        parent_port_id: None,
        parent_ifname: None,
        parent_mac: None,
        vif_name: opt_str(data, "vif_name"),
        bridge_name: opt_str(data, "bridge_name"),
        security_group_ids: Vec::new(),
        active: data.get("active").and_then(Value::as_bool).unwrap_or(false),
    })
}

fn legacy(reason: impl Into<String>) -> Error {
    Error::LegacyVif(reason.into())
}

fn obj_data<'a>(value: &'a Value, what: &str) -> Result<&'a Map<String, Value>, Error> {
    value
        .get(DATA)
        .and_then(Value::as_object)
        .ok_or_else(|| legacy(format!("{what} has no {DATA} object")))
}

/// Items of an OVO list object; an absent list is empty.
fn objects<'a>(list: Option<&'a Value>, what: &str) -> Result<&'a [Value], Error> {
    match list {
        None | Some(Value::Null) => Ok(&[]),
        Some(list) => obj_data(list, what)?
            .get("objects")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .ok_or_else(|| legacy(format!("{what} has no objects list"))),
    }
}

fn str_field(map: &Map<String, Value>, key: &str, what: &str) -> Result<String, Error> {
    opt_str(map, key).ok_or_else(|| legacy(format!("{what} has no string {key}")))
}

fn opt_str(map: &Map<String, Value>, key: &str) -> Option<String> {
    map.get(key).and_then(Value::as_str).map(str::to_owned)
}
