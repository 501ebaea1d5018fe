//! The uid of a Kubernetes object: the key of everything kept per object, so a pod's uid is never mixed up
//! with a name or a Neutron id.

use std::fmt;

use kube::Resource;

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Uid(String);

impl Uid {
    /// The object's uid; empty for an object the API server has not stored (never met in a reconcile).
    pub fn of<K: Resource>(obj: &K) -> Self {
        Self(obj.meta().uid.clone().unwrap_or_default())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl From<&str> for Uid {
    fn from(s: &str) -> Self {
        Self(s.to_owned())
    }
}

impl From<String> for Uid {
    fn from(s: String) -> Self {
        Self(s)
    }
}

impl fmt::Display for Uid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
