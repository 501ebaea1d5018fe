//! Retry and poll timing shared by every controller: pure functions of a count, so the schedule is tested
//! without a clock.

use std::time::Duration;

/// `min * 1.5^polls`, capped at `max`: polls start fast and level off.
pub fn poll_delay(min: Duration, max: Duration, polls: u32) -> Duration {
    let factor = 1.5f64.powi(i32::try_from(polls.min(64)).unwrap_or(64));
    min.mul_f64(factor).min(max)
}

/// 0.5 s doubling per consecutive failure, capped at 60 s; errors a retry will not fix soon wait 60 s.
pub fn retry_delay(failures: u32, permanent: bool) -> Duration {
    if permanent {
        return Duration::from_secs(60);
    }
    let exp = failures.saturating_sub(1).min(7);
    Duration::from_millis(500 * (1u64 << exp)).min(Duration::from_secs(60))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn polls_start_fast_and_level_off_at_the_maximum() {
        let (min, max) = (Duration::from_millis(100), Duration::from_secs(5));
        assert_eq!(poll_delay(min, max, 0), min);
        assert_eq!(poll_delay(min, max, 1), Duration::from_millis(150));
        assert_eq!(poll_delay(min, max, 40), max);
    }

    #[test]
    fn retries_back_off_exponentially_up_to_a_minute() {
        assert_eq!(retry_delay(1, false), Duration::from_millis(500));
        assert_eq!(retry_delay(2, false), Duration::from_secs(1));
        assert_eq!(retry_delay(8, false), Duration::from_secs(60));
        assert_eq!(retry_delay(100, false), Duration::from_secs(60));
        assert_eq!(retry_delay(1, true), Duration::from_secs(60));
    }
}
