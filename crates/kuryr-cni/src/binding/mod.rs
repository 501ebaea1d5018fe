//! Binding drivers: wiring a KuryrPort VIF into a pod namespace with rtnetlink.
//!
//! One module per object or device kind (rtnetlink's shape): [`netns`] (thread-per-setns connections),
//! [`link`], [`addr`], [`route`], [`macvlan`], [`vlan`], [`veth`] (with [`ovsdb`] when the bridge is Open vSwitch's), [`host_link`] (the node's way to its
//! own macvlan pods), and [`stale`] (leftovers in dead namespaces). Every request is built by a pure `message()` function so its content is unit-tested, and
//! [`parent`] picks a nested VIF's parent NIC from the listed links, also purely.

pub mod addr;
mod binder;
mod error;
pub mod ethtool;
pub mod host_link;
pub mod link;
pub mod macvlan;
pub mod netns;
pub mod ovsdb;
pub mod parent;
pub mod route;
pub mod stale;
pub mod veth;
pub mod vlan;

use std::future::Future;
use std::path::Path;

use kuryr_api::Vif;

pub use binder::{NetlinkBinder, NetlinkBinderConfig};
pub use error::{errno, BindError};
pub use netns::Netns;

/// One interface as wired.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bound {
    pub ifname: String,
    pub mac: String,
    pub mtu: Option<u32>,
    /// Host-side device the daemon must remove on DEL (the veth's host end).
    pub host_ifname: Option<String>,
}

/// What the daemon needs from a binding implementation (netlink in production, fakes in tests).
pub trait Binder: Send + Sync + 'static {
    /// Wires `vif` as `ifname` into the namespace at `netns`; replaces leftovers of earlier attempts.
    fn bind(
        &self,
        netns: &Path,
        ifname: &str,
        vif: &Vif,
        default: bool,
    ) -> impl Future<Output = Result<Bound, BindError>> + Send;
    /// Removes `ifname` from `netns` (if given and still there) and the host-side devices; absent is fine.
    fn unbind(
        &self,
        netns: Option<&Path>,
        ifname: &str,
        host_ifnames: &[String],
    ) -> impl Future<Output = Result<(), BindError>> + Send;
    /// Verifies `ifname` in `netns` matches `vif` (exists, MAC, addresses).
    fn check(
        &self,
        netns: &Path,
        ifname: &str,
        vif: &Vif,
    ) -> impl Future<Output = Result<(), BindError>> + Send;
}
