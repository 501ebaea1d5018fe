//! Which Kubernetes releases kuryr-rs runs on, and the check the controller and `kuryrctl preflight` make
//! against the API server's `/version` before anything else.
//!
//! The floor is the oldest release that serves, at GA, every API kuryr-rs reads: EndpointSlice v1 with the
//! `serving`/`terminating` conditions (the only source of Service backends; Endpoints v1 is deprecated),
//! CRD v1 with status subresources, coordination/v1 Leases, events.k8s.io/v1, NetworkPolicy v1, and still
//! maintained by the distributions. The lab runs the newest release (docs/lab.md).

use k8s_openapi::apimachinery::pkg::version::Info;

/// The oldest supported release, as (major, minor).
pub const MIN_SUPPORTED: (u32, u32) = (1, 30);

/// An API server kuryr-rs does not run on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VersionError {
    #[error(
        "Kubernetes {found} is older than the oldest release kuryr-rs supports ({}.{}): Service backends come \
         from EndpointSlice v1 with serving/terminating conditions; upgrade the cluster",
        MIN_SUPPORTED.0,
        MIN_SUPPORTED.1
    )]
    TooOld { found: String },
    #[error("the API server's version {0:?} is not a Kubernetes major.minor")]
    Unreadable(String),
}

/// The (major, minor) the API server reports. Distributions append to the minor (`"30+"`), so only its
/// leading digits count.
pub fn parse(info: &Info) -> Result<(u32, u32), VersionError> {
    let digits = |s: &str| -> Option<u32> {
        let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        s[..end].parse().ok()
    };
    match (digits(&info.major), digits(&info.minor)) {
        (Some(major), Some(minor)) => Ok((major, minor)),
        _ => Err(VersionError::Unreadable(format!("{}.{}", info.major, info.minor))),
    }
}

/// Ok with the release when kuryr-rs supports it.
pub fn require_supported(info: &Info) -> Result<(u32, u32), VersionError> {
    let v = parse(info)?;
    if v < MIN_SUPPORTED {
        return Err(VersionError::TooOld {
            found: info.git_version.clone(),
        });
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(major: &str, minor: &str) -> Info {
        Info {
            major: major.into(),
            minor: minor.into(),
            git_version: format!("v{major}.{minor}.0"),
            ..Info::default()
        }
    }

    #[test]
    fn releases_from_the_floor_up_are_supported_and_older_ones_are_refused_by_name() {
        assert_eq!(require_supported(&info("1", "37")), Ok((1, 37)));
        assert_eq!(require_supported(&info("1", "30")), Ok((1, 30)));
        assert_eq!(require_supported(&info("2", "0")), Ok((2, 0)));
        let err = require_supported(&info("1", "20")).unwrap_err();
        assert_eq!(
            err,
            VersionError::TooOld {
                found: "v1.20.0".into()
            }
        );
        assert!(err
            .to_string()
            .contains("Kubernetes v1.20.0 is older than the oldest release kuryr-rs supports (1.30)"));
    }

    #[test]
    fn a_distribution_suffix_on_the_minor_is_ignored_and_garbage_is_named() {
        assert_eq!(parse(&info("1", "31+")), Ok((1, 31)));
        assert_eq!(
            parse(&info("one", "x")),
            Err(VersionError::Unreadable("one.x".into()))
        );
    }
}
