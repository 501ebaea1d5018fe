//! What nested-macvlan keeps in memory (see [`crate::ports::macvlan`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kuryr_core::VrrpMacs;

/// Node VM ports and VRRP MACs in use per network, each learnt from Neutron on first use.
#[derive(Default)]
pub struct MacvlanState {
    pub(super) vm_ports: Mutex<HashMap<String, String>>,
    pub(super) macs: Mutex<HashMap<String, VrrpMacs>>,
    /// One pairs writer at a time per VM port (see the module docs).
    pub(super) writers: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}
