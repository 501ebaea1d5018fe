//! Options a provider's driver refuses whatever the API version ("does not support a requested option"):
//! older ovn providers refuse `additional_vips` and SOURCE_IP session persistence. The refusal is learnt,
//! so the next round asks without the option and says so (`DualStackUnsupported`,
//! `SessionAffinityUnsupported`) instead of failing every round.

use kuryr_core::lb::{DesiredLb, ProviderFeature};
use tracing::warn;

use crate::services::context::LbContext;

/// Learns what `e` says `desired`'s provider refused, if it is such a refusal.
pub fn learn(ctx: &LbContext, desired: &DesiredLb, e: &kuryr_openstack::Error) {
    if !e.is_provider_unsupported() {
        return;
    }
    let message = e.api().map(|a| a.message.to_lowercase()).unwrap_or_default();
    let persistence = desired
        .listeners
        .values()
        .any(|l| l.pool.session_persistence.is_some());
    let feature = if persistence && message.contains("persistence") {
        ProviderFeature::SourceIpPersistence
    } else if !desired.additional_vips.is_empty() {
        ProviderFeature::AdditionalVips
    } else {
        return;
    };
    let provider = desired
        .provider
        .clone()
        .unwrap_or_else(|| ctx.config.default_provider.clone());
    warn!(provider, ?feature, error = %e, "the provider refused an option: asking without it from now on");
    ctx.learn_refusal(&provider, feature);
}
