//! Spec versions this plugin speaks.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::{codes, CniError};

/// Versions named in VERSION's `supportedVersions`.
pub const SUPPORTED_VERSIONS: [&str; 5] = ["0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"];

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum CniVersion {
    #[serde(rename = "0.3.0")]
    V030,
    #[serde(rename = "0.3.1")]
    V031,
    #[serde(rename = "0.4.0")]
    V040,
    #[serde(rename = "1.0.0")]
    V100,
    #[serde(rename = "1.1.0")]
    V110,
}

impl CniVersion {
    pub const LATEST: Self = Self::V110;

    pub fn parse(s: &str) -> Result<Self, CniError> {
        Ok(match s {
            "0.3.0" => Self::V030,
            "0.3.1" => Self::V031,
            "0.4.0" => Self::V040,
            "1.0.0" => Self::V100,
            "1.1.0" => Self::V110,
            other => {
                return Err(CniError::new(
                    codes::INCOMPATIBLE_VERSION,
                    format!("incompatible CNI version {other:?}"),
                    format!("kuryr-cni supports {}", SUPPORTED_VERSIONS.join(", ")),
                ))
            }
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::V030 => "0.3.0",
            Self::V031 => "0.3.1",
            Self::V040 => "0.4.0",
            Self::V100 => "1.0.0",
            Self::V110 => "1.1.0",
        }
    }

    /// CHECK appeared in 0.4.0.
    pub fn has_check(self) -> bool {
        self >= Self::V040
    }

    /// STATUS and GC appeared in 1.1.0.
    pub fn has_status_gc(self) -> bool {
        self >= Self::V110
    }

    /// Before 1.0.0 every IP carried `"version": "4"|"6"`.
    pub fn ip_has_version_field(self) -> bool {
        self < Self::V100
    }
}

impl fmt::Display for CniVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
