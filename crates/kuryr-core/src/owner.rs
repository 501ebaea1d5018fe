//! The `kuryr.kind=` ownership tag of everything kuryr creates: which kind of object owns a cloud object, and
//! so what its `kuryr.uid=` tag is the uid of. The controllers write these and `kuryrctl migrate` writes them
//! onto adopted objects, so both take them from here.
//!
//! The strings are tags on live cloud resources (the garbage collector and crash recovery find objects by
//! them): never change one.

/// The owner kind of a kuryr-made cloud object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OwnerKind {
    /// A pod's port (uid: the pod's).
    KuryrPort,
    /// A namespace's network and subnet (uid: the KuryrNetwork's).
    KuryrNetwork,
    /// The subnet pool namespace subnets are cut from, when none is configured (uid: a fixed name).
    SubnetPool,
    /// Everything made for a Service (uid: the Service's).
    Service,
    /// A warm pool port (uid: the cluster id: a pool port belongs to no one object).
    Pool,
    /// A security group the policy compiler makes (uid: the group's name, unique per key).
    NetworkPolicySg,
}

impl OwnerKind {
    /// The tag value, as written on the cloud.
    pub const fn as_str(self) -> &'static str {
        match self {
            OwnerKind::KuryrPort => "KuryrPort",
            OwnerKind::KuryrNetwork => "KuryrNetwork",
            OwnerKind::SubnetPool => "SubnetPool",
            OwnerKind::Service => "service",
            OwnerKind::Pool => "pool",
            OwnerKind::NetworkPolicySg => "NetworkPolicySG",
        }
    }
}

impl std::fmt::Display for OwnerKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tag_values_are_the_ones_on_live_clouds() {
        let all = [
            (OwnerKind::KuryrPort, "KuryrPort"),
            (OwnerKind::KuryrNetwork, "KuryrNetwork"),
            (OwnerKind::SubnetPool, "SubnetPool"),
            (OwnerKind::Service, "service"),
            (OwnerKind::Pool, "pool"),
            (OwnerKind::NetworkPolicySg, "NetworkPolicySG"),
        ];
        for (kind, tag) in all {
            assert_eq!(kind.as_str(), tag);
            assert_eq!(kind.to_string(), tag);
        }
    }
}
