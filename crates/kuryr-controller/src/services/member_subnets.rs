//! The subnet a load balancer's members are declared on ([`kuryr_core::lb::member_subnet`]), from
//! Neutron's subnets as last listed. The list is read again only when a member address is in none of them,
//! and at most once per [`RELIST`]: pods on the pod subnet never cause a read after the first.

use std::time::{Duration, Instant};

use kuryr_core::lb::member_subnet::{member_subnet, KnownSubnet, MemberSubnet};
use kuryr_openstack::neutron::{subnets, Filter};
use kuryr_openstack::Cloud;
use tracing::{info, warn};

/// The shortest time between two listings.
pub const RELIST: Duration = Duration::from_secs(60);

#[derive(Default)]
pub struct SubnetBook {
    inner: tokio::sync::Mutex<Book>,
}

#[derive(Default)]
struct Book {
    listed: Option<Instant>,
    known: Vec<KnownSubnet>,
}

impl SubnetBook {
    /// The subnet for members at `addresses`; `default` (the pod subnet) when no single other subnet holds
    /// them all or Neutron cannot be read.
    pub async fn member_subnet(
        &self,
        cloud: &Cloud,
        addresses: &[&str],
        default: Option<&str>,
    ) -> Option<String> {
        let mut book = self.inner.lock().await;
        let mut found = member_subnet(addresses.iter().copied(), default, &book.known);
        if let MemberSubnet::Unknown(ip) = found {
            if book.listed.is_none_or(|t| t.elapsed() >= RELIST) {
                book.listed = Some(Instant::now());
                match subnets::list(cloud, Filter::new()).await {
                    Ok(list) => {
                        book.known = list
                            .iter()
                            .filter_map(|s| KnownSubnet::parse(&s.id, &s.cidr))
                            .collect();
                        found = member_subnet(addresses.iter().copied(), default, &book.known);
                        if let MemberSubnet::Unknown(ip) = found {
                            info!(%ip, "a member address is in no subnet this project sees; members go on the default subnet");
                        }
                    }
                    Err(e) => warn!(%ip, error = %e, "cannot list subnets; members go on the default subnet"),
                }
            }
        }
        found.or_default(default)
    }
}
