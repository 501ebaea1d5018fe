//! What every controller here uses the same way: object uids as a type, per-object bookkeeping (retry
//! backoff, problems told once), the one error policy, the one uid-exact delete, the one finalizer helper, Event publishing, and the
//! poison-tolerant lock.

pub mod delete;
pub mod error_policy;
pub mod events;
pub mod finalizer;
pub mod ledger;
pub mod uid;

use std::sync::{Mutex, MutexGuard};

pub use delete::delete_exact;
pub use error_policy::{error_policy, Reconciled, Reconciler};
pub use events::Events;
pub use ledger::{Ledger, Topic};
pub use uid::Uid;

/// A mutex's guard, poisoned or not: every critical section here leaves its data consistent, so a panic in
/// one is no reason to stop serving.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
