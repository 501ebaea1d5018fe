//! kuryr-daemon: answers the plugin's requests from its node caches and binds interfaces. Never talks to
//! OpenStack; everything it needs is in the KuryrPort.

pub mod cache;
pub mod conflist;
mod handler;
pub mod health;
pub mod metrics;
pub mod server;
pub mod wait;
pub mod watch;

pub use cache::NodeCache;
pub use handler::{Daemon, DaemonConfig};
