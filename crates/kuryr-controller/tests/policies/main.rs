//! The NetworkPolicy controller's Neutron path (watch objects → `inputs::build` → compile → observe → diff
//! → execute) on an in-process cloudsim: a namespace of 500 policies ([`size`]), and a gone policy's group
//! left on a pool port ([`pool_ports`]).
#![allow(clippy::unwrap_used)]

mod pool_ports;
mod sim;
mod size;
