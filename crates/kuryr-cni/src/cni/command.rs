//! `CNI_COMMAND`.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::{codes, CniError};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Command {
    Add,
    Del,
    Check,
    Version,
    Status,
    Gc,
}

impl Command {
    pub fn parse(s: &str) -> Result<Self, CniError> {
        Ok(match s {
            "ADD" => Self::Add,
            "DEL" => Self::Del,
            "CHECK" => Self::Check,
            "VERSION" => Self::Version,
            "STATUS" => Self::Status,
            "GC" => Self::Gc,
            other => {
                return Err(CniError::new(
                    codes::INVALID_ENV,
                    format!("unknown CNI_COMMAND {other:?}"),
                    "expected one of ADD, DEL, CHECK, VERSION, STATUS, GC",
                ))
            }
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Add => "ADD",
            Self::Del => "DEL",
            Self::Check => "CHECK",
            Self::Version => "VERSION",
            Self::Status => "STATUS",
            Self::Gc => "GC",
        }
    }

    /// Commands that act on one container attachment (need container id, ifname, pod args).
    pub fn is_attachment(self) -> bool {
        matches!(self, Self::Add | Self::Del | Self::Check)
    }
}

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
