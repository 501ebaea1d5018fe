//! Creates that may still land. Octavia carries a request out whatever became of the client that sent it:
//! a load balancer create sent by a controller process that was killed can land after the next process
//! listed the Service's load balancers, and its cleanup would let the Service go with that one left behind.
//! So a cleanup in a process younger than the longest a request may take holds the finalizer until then
//! (and lists again), unless the status shows no create can have been under way: it records a load
//! balancer that is still there, ACTIVE (a create is only sent while none is recorded, or to replace one
//! in ERROR, stuck PENDING_* or gone), that an earlier process created. One this process created proves
//! nothing: it was created because nothing settled was recorded when this process began, which is when
//! its predecessor's create may have been under way (a slow CI machine: the predecessor's create held,
//! the Service deleted, the new process created its own before the deletion reached it).

use std::time::Duration;

use super::ProvisioningStatus;

/// How much longer the cleanup must hold the finalizer; `None`: it may let go now.
/// `recorded`: the load balancer the status records; `listed`: the Service's tagged load balancers as the
/// cleanup just listed them; `process_age`: since this controller process started; `window`: the longest
/// one request may take (the cloud client's request timeout); `created_here`: this process sent a create
/// for the Service.
pub fn cleanup_hold(
    recorded: Option<&str>,
    listed: &[(&str, ProvisioningStatus)],
    process_age: Duration,
    window: Duration,
    created_here: bool,
) -> Option<Duration> {
    let left = window.checked_sub(process_age).filter(|d| !d.is_zero())?;
    let settled = !created_here
        && recorded.is_some_and(|id| {
            listed
                .iter()
                .any(|(l, s)| *l == id && *s == ProvisioningStatus::Active)
        });
    (!settled).then_some(left)
}

#[cfg(test)]
mod tests {
    use super::*;

    const WINDOW: Duration = Duration::from_secs(60);

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn a_process_older_than_the_window_never_holds() {
        assert_eq!(cleanup_hold(None, &[], secs(60), WINDOW, false), None);
        assert_eq!(cleanup_hold(None, &[], secs(600), WINDOW, false), None);
    }

    #[test]
    fn nothing_recorded_holds_until_the_window_has_passed() {
        assert_eq!(cleanup_hold(None, &[], secs(5), WINDOW, false), Some(secs(55)));
    }

    #[test]
    fn a_recorded_active_load_balancer_lets_go_at_once() {
        let listed = [("lb-1", ProvisioningStatus::Active)];
        assert_eq!(cleanup_hold(Some("lb-1"), &listed, secs(5), WINDOW, false), None);
    }

    #[test]
    fn a_recorded_load_balancer_being_replaced_or_gone_holds() {
        // Replaced after ERROR, stuck PENDING_* (abandoned), or gone: a replacement create may be in flight.
        for status in [
            ProvisioningStatus::Error,
            ProvisioningStatus::PendingUpdate,
            ProvisioningStatus::PendingCreate,
        ] {
            let listed = [("lb-1", status)];
            assert_eq!(
                cleanup_hold(Some("lb-1"), &listed, secs(10), WINDOW, false),
                Some(secs(50))
            );
        }
        let other = [("lb-2", ProvisioningStatus::Active)];
        assert_eq!(
            cleanup_hold(Some("lb-1"), &other, secs(10), WINDOW, false),
            Some(secs(50))
        );
    }

    #[test]
    fn a_load_balancer_this_process_created_holds_even_when_active() {
        // The predecessor's create may still land beside it.
        let listed = [("lb-2", ProvisioningStatus::Active)];
        assert_eq!(
            cleanup_hold(Some("lb-2"), &listed, secs(5), WINDOW, true),
            Some(secs(55))
        );
        assert_eq!(cleanup_hold(Some("lb-2"), &listed, secs(60), WINDOW, true), None);
    }
}
