//! The 404s of the Neutron handlers, apart from them so that handlers which look up each other's objects
//! (a floating IP its port, a router its subnet) need not import each other.

use crate::errors::ApiError;

pub fn not_found(kind: &str, what: &str, id: &str) -> ApiError {
    ApiError::not_found(kind, format!("{what} {id} could not be found."))
}

pub fn net_not_found(id: &str) -> ApiError {
    not_found("NetworkNotFound", "Network", id)
}

pub fn port_not_found(id: &str) -> ApiError {
    not_found("PortNotFound", "Port", id)
}

pub fn subnet_not_found(id: &str) -> ApiError {
    not_found("SubnetNotFound", "Subnet", id)
}
