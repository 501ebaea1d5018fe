//! Ownership tags: every object kuryr creates carries `kuryr.cluster=<id>`, `kuryr.kind=<kind>` and
//! `kuryr.uid=<uid>`, so garbage collection and crash recovery can find what is ours (and whose) with one
//! filtered list. Plain strings built from ids the caller passes: nothing here knows Kubernetes.
//!
//! Limits (checked against Neutron 29): a tag is at most 255 characters. Neutron accepts `,` and `/` in a
//! tag body, but a tag with `,` cannot be used in a `?tags=` filter (comma-separated) and one with `/`
//! cannot be added or removed singly (`PUT .../tags/{tag}`), so both are refused here.

use crate::errors::{Error, Result};

pub const MAX_TAG_LEN: usize = 255;
pub const CLUSTER: &str = "kuryr.cluster";
pub const KIND: &str = "kuryr.kind";
pub const UID: &str = "kuryr.uid";

/// Checks one tag against the limits above.
pub fn validate(tag: &str) -> Result<()> {
    let reason = if tag.is_empty() {
        Some("empty")
    } else if tag.chars().count() > MAX_TAG_LEN {
        Some("longer than 255 characters")
    } else if tag.contains(',') {
        Some("contains ',' (the tag filter separator)")
    } else if tag.contains('/') {
        Some("contains '/' (cannot be addressed in a tag URL)")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(Error::InvalidTag {
            tag: tag.to_owned(),
            reason,
        }),
        None => Ok(()),
    }
}

/// Who owns an object: the cluster, the kind of object that made it (`pod`, `service`, `namespace`,
/// `networkpolicy`, `pool`, ...) and that object's unique id.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Owner {
    pub cluster: String,
    pub kind: String,
    pub uid: String,
}

impl Owner {
    pub fn new(cluster: impl Into<String>, kind: impl Into<String>, uid: impl Into<String>) -> Self {
        Self {
            cluster: cluster.into(),
            kind: kind.into(),
            uid: uid.into(),
        }
    }

    /// The three tags, validated.
    pub fn tags(&self) -> Result<Vec<String>> {
        let tags = vec![
            format!("{CLUSTER}={}", self.cluster),
            format!("{KIND}={}", self.kind),
            format!("{UID}={}", self.uid),
        ];
        for t in &tags {
            validate(t)?;
        }
        Ok(tags)
    }

    /// The owner recorded in a tag list, if all three tags are there.
    pub fn from_tags<S: AsRef<str>>(tags: &[S]) -> Option<Self> {
        let get = |key: &str| {
            tags.iter()
                .find_map(|t| t.as_ref().strip_prefix(key)?.strip_prefix('=').map(str::to_owned))
        };
        Some(Self {
            cluster: get(CLUSTER)?,
            kind: get(KIND)?,
            uid: get(UID)?,
        })
    }

    /// Tags to filter a list by everything this cluster owns.
    pub fn cluster_filter(cluster: &str) -> Vec<String> {
        vec![format!("{CLUSTER}={cluster}")]
    }

    /// Tags to filter a list by this exact owner.
    pub fn filter(&self) -> Vec<String> {
        vec![
            format!("{CLUSTER}={}", self.cluster),
            format!("{UID}={}", self.uid),
        ]
    }
}

/// `base` plus `extra` without duplicates, order kept.
pub fn merge(base: &[String], extra: &[String]) -> Vec<String> {
    let mut out = base.to_vec();
    for t in extra {
        if !out.contains(t) {
            out.push(t.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_round_trips_through_tags() {
        let o = Owner::new("c1", "pod", "6b1c-uid");
        let tags = o.tags().unwrap();
        assert_eq!(
            tags,
            vec!["kuryr.cluster=c1", "kuryr.kind=pod", "kuryr.uid=6b1c-uid"]
        );
        let mut with_others = vec!["other".to_owned()];
        with_others.extend(tags);
        assert_eq!(Owner::from_tags(&with_others), Some(o));
        assert_eq!(Owner::from_tags(&["kuryr.cluster=c1"]), None);
    }

    #[test]
    fn values_may_contain_equals_signs() {
        let o = Owner::new("a=b", "svc", "u");
        assert_eq!(Owner::from_tags(&o.tags().unwrap()), Some(o));
    }

    #[test]
    fn limits_are_enforced() {
        assert!(validate("").is_err());
        assert!(validate(&"a".repeat(255)).is_ok());
        assert!(validate(&"a".repeat(256)).is_err());
        assert!(validate("a,b").is_err());
        assert!(validate("a/b").is_err());
        assert!(validate("kuryr.uid=ok:1").is_ok());
        assert!(Owner::new("c", "pod", "x".repeat(250)).tags().is_err());
    }

    #[test]
    fn merge_keeps_order_and_drops_duplicates() {
        let a = vec!["x".to_owned(), "y".to_owned()];
        let b = vec!["y".to_owned(), "z".to_owned()];
        assert_eq!(merge(&a, &b), vec!["x", "y", "z"]);
    }
}
