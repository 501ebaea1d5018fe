//! Settings of namespace networks: where pods take their IP from (`--subnet-driver`), and how a
//! namespace's network is made ([`crate::networks`] carries them out).

/// Where pods take their IP from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SubnetMode {
    /// Every pod on `Config::pod_subnet_id`.
    #[default]
    Default,
    /// Each pod on its namespace's subnet (one network per namespace).
    Namespace,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetworksConfig {
    pub mode: SubnetMode,
    /// Subnet pool namespace subnets come from; `None`: find (by ownership tags) or create one from
    /// `pool_prefixes`.
    pub subnet_pool_id: Option<String>,
    pub pool_prefixes: Vec<String>,
    /// Prefix length of each namespace's subnet.
    pub prefixlen: u8,
    /// Dual-stack: subnet pool of the namespaces' second subnet (the other IP family; its default prefix
    /// length); `None`: namespace networks are single-stack.
    pub secondary_subnet_pool_id: Option<String>,
    /// Router namespace subnets are plugged into; `None`: the router of the default pod subnet.
    pub router_id: Option<String>,
    /// Create every namespace's network when the namespace appears, not when its first pod needs it.
    pub eager: bool,
}

impl Default for NetworksConfig {
    fn default() -> Self {
        Self {
            mode: SubnetMode::Default,
            subnet_pool_id: None,
            pool_prefixes: vec!["10.128.0.0/14".into()],
            prefixlen: 24,
            secondary_subnet_pool_id: None,
            router_id: None,
            eager: false,
        }
    }
}
