//! CNI spec types: the request a runtime hands a plugin (env + stdin), the error JSON and codes, and the
//! result JSON per spec version.

mod args;
mod command;
mod error;
mod netconf;
mod request;
mod result;
mod version;

pub use args::{parse_cni_args, PodArgs};
pub use command::Command;
pub use error::{codes, CniError};
pub use netconf::{NetConf, ValidAttachment};
pub use request::CniRequest;
pub use result::{CniResult, IfaceResult, IpResult, RouteResult};
pub use version::{CniVersion, SUPPORTED_VERSIONS};
