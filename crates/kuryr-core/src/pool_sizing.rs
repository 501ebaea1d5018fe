//! How many ports a pool should create or give back: watermark maths in the style of Cilium's and Azure
//! CNS's IP pools, one pure function so it can be checked exhaustively.
//!
//! *Spare* ports are the ones left once every waiting pod got one: `free + in_flight - pending`.
//! - Below `min_free` spare, create enough to get back to `min_free`, rounded up to whole batches (one bulk
//!   create per batch) — but never so many that spare would pass `max_free`: the last batch is trimmed there,
//!   so a refill is never followed by a release.
//! - Pods waiting for a port (`pending`) are a surge: they are covered on top of `min_free` right away,
//!   whatever the watermarks, rather than one batch per round.
//! - Above `max_free` spare, give back the excess, from free ports only (in-flight creates are not cancelled).

use crate::error::CoreError;

/// Upstream's `ports_pool_min`.
pub const DEFAULT_MIN_FREE: u32 = 5;
/// Upstream's `ports_pool_max` (0: no upper watermark).
pub const DEFAULT_MAX_FREE: u32 = 0;
/// Upstream's `ports_pool_batch`.
pub const DEFAULT_BATCH: u32 = 10;

/// A pool's watermarks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolLimits {
    min_free: u32,
    max_free: Option<u32>,
    batch: u32,
}

impl Default for PoolLimits {
    fn default() -> Self {
        Self {
            min_free: DEFAULT_MIN_FREE,
            max_free: None,
            batch: DEFAULT_BATCH,
        }
    }
}

impl PoolLimits {
    /// `max_free == 0` means no upper watermark, as upstream's `ports_pool_max = 0`.
    pub fn new(min_free: u32, max_free: u32, batch: u32) -> Result<Self, CoreError> {
        if batch == 0 {
            return Err(CoreError::InvalidPoolLimits("batch must be at least 1".into()));
        }
        let max_free = (max_free > 0).then_some(max_free);
        if let Some(max) = max_free {
            if max < min_free {
                return Err(CoreError::InvalidPoolLimits(format!(
                    "max_free {max} is below min_free {min_free}"
                )));
            }
        }
        Ok(Self {
            min_free,
            max_free,
            batch,
        })
    }

    pub fn min_free(&self) -> u32 {
        self.min_free
    }

    pub fn max_free(&self) -> Option<u32> {
        self.max_free
    }

    pub fn batch(&self) -> u32 {
        self.batch
    }
}

/// What a pool holds and owes right now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolLoad {
    /// Ports ready to hand out.
    pub free: u32,
    /// Ports whose create (and, nested, add_subports) is still under way.
    pub in_flight: u32,
    /// Pods waiting for a port of this pool.
    pub pending: u32,
}

impl PoolLoad {
    /// Ports left once every waiting pod got one (negative demand counts as zero).
    pub fn spare(&self) -> u32 {
        (self.free + self.in_flight).saturating_sub(self.pending)
    }
}

/// What to do now; at most one of the two is non-zero.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolPlan {
    /// Ports to create (in bulk calls of at most `batch`).
    pub create: u32,
    /// Free ports to give back.
    pub release: u32,
}

/// The sizing decision for one pool.
pub fn plan(load: PoolLoad, limits: PoolLimits) -> PoolPlan {
    let available = load.free.saturating_add(load.in_flight);
    let wanted = load.pending.saturating_add(limits.min_free);
    if available < wanted {
        let deficit = wanted - available;
        let mut create = round_up(deficit, limits.batch);
        if let Some(max) = limits.max_free {
            // Trim the last batch at max_free; max >= min_free keeps this at or above the deficit.
            create = create.min(load.pending.saturating_add(max) - available);
        }
        return PoolPlan { create, release: 0 };
    }
    let release = match limits.max_free {
        Some(max) => load.spare().saturating_sub(max).min(load.free),
        None => 0,
    };
    PoolPlan { create: 0, release }
}

/// The batches of a create of `n` ports: full batches, then the remainder.
pub fn batches(n: u32, limits: PoolLimits) -> impl Iterator<Item = u32> {
    let batch = limits.batch;
    (0..n.div_ceil(batch)).map(move |i| (n - i * batch).min(batch))
}

/// Whether a port a pod gave back should be recycled into the pool (true) or deleted (the pool already has
/// `max_free` spare).
pub fn keep_released_port(load: PoolLoad, limits: PoolLimits) -> bool {
    limits.max_free.is_none_or(|max| load.spare() < max)
}

fn round_up(n: u32, batch: u32) -> u32 {
    n.div_ceil(batch).saturating_mul(batch)
}

#[cfg(test)]
mod tests;
