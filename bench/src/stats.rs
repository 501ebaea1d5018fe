//! Percentiles of a sample (nearest-rank, the definition the Kubernetes SLO tooling uses): p-th
//! percentile = the smallest value with at least p % of the sample at or below it.

/// Nearest-rank percentile of `values` (any order); `None` for an empty sample or a NaN in it.
pub fn percentile(values: &[f64], p: f64) -> Option<f64> {
    if values.is_empty() || values.iter().any(|v| v.is_nan()) || !(0.0..=100.0).contains(&p) {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    // rank = ceil(p/100 * n), at least 1.
    let n = sorted.len();
    let rank = ((p / 100.0) * n as f64).ceil().max(1.0) as usize;
    sorted.get(rank.min(n) - 1).copied()
}

/// p50, p99 and max of a sample, rounded to milliseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

impl Summary {
    pub fn of(values: &[f64]) -> Option<Summary> {
        Some(Summary {
            p50: round_ms(percentile(values, 50.0)?),
            p99: round_ms(percentile(values, 99.0)?),
            max: round_ms(percentile(values, 100.0)?),
        })
    }
}

/// Seconds rounded to the millisecond (what the JSON records).
pub fn round_ms(s: f64) -> f64 {
    (s * 1000.0).round() / 1000.0
}

/// The median of repeated figures and their range: what a figure measured over `--repeats` runs is
/// reported as.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    /// Of the finite values; `None` when there is none. An even count's median is the mean of the middle
    /// two (two repeats give their mean, not the worse one).
    pub fn of(values: &[f64]) -> Option<Spread> {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Spread {
            median,
            min: v[0],
            max: v[n - 1],
        })
    }
}

/// Median of a sample's finite values (mean of the middle two for an even count); `None` when empty.
pub fn median(values: &[f64]) -> Option<f64> {
    Spread::of(values).map(|s| s.median)
}

/// `a / b` when both are known and `b` is not zero: the ratios of the side-by-side table.
pub fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b != 0.0 => Some(a / b),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_on_one_to_hundred() {
        let v: Vec<f64> = (1..=100).rev().map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), Some(50.0));
        assert_eq!(percentile(&v, 99.0), Some(99.0));
        assert_eq!(percentile(&v, 100.0), Some(100.0));
        assert_eq!(percentile(&v, 0.0), Some(1.0));
        assert_eq!(percentile(&v, 0.5), Some(1.0));
    }

    #[test]
    fn small_samples_round_up() {
        // n = 3: p50 -> rank 2, p99 -> rank 3.
        let v = [3.0, 1.0, 2.0];
        assert_eq!(percentile(&v, 50.0), Some(2.0));
        assert_eq!(percentile(&v, 99.0), Some(3.0));
        // n = 500: p99 is the 495th value, so the 5 worst are above it.
        let v: Vec<f64> = (1..=500).map(f64::from).collect();
        assert_eq!(percentile(&v, 99.0), Some(495.0));
        assert_eq!(percentile(&[7.0], 99.0), Some(7.0));
    }

    #[test]
    fn empty_nan_and_bad_p_have_no_percentile() {
        assert_eq!(percentile(&[], 50.0), None);
        assert_eq!(percentile(&[1.0, f64::NAN], 50.0), None);
        assert_eq!(percentile(&[1.0], 101.0), None);
        assert_eq!(Summary::of(&[]), None);
    }

    #[test]
    fn summary_rounds_to_milliseconds() {
        let s = Summary::of(&[0.12345, 1.00049, 2.5]).expect("non-empty");
        assert_eq!(
            s,
            Summary {
                p50: 1.0,
                p99: 2.5,
                max: 2.5
            }
        );
        assert_eq!(round_ms(0.0004), 0.0);
    }

    #[test]
    fn spread_is_median_and_range() {
        assert_eq!(
            Spread::of(&[23.9, 114.8, 46.1]),
            Some(Spread {
                median: 46.1,
                min: 23.9,
                max: 114.8
            })
        );
        // Even count: the mean of the middle two.
        let s = Spread::of(&[4.0, 1.0, 3.0, 2.0]).expect("values");
        assert_eq!((s.median, s.min, s.max), (2.5, 1.0, 4.0));
        assert_eq!(Spread::of(&[7.0]).map(|s| s.median), Some(7.0));
        assert_eq!(Spread::of(&[]), None);
        assert_eq!(Spread::of(&[1.0, f64::NAN]).map(|s| s.max), Some(1.0));
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0]), Some(2.5));
        assert_eq!(median(&[f64::INFINITY]), None);
    }

    #[test]
    fn ratio_needs_both_and_a_nonzero_divisor() {
        assert_eq!(ratio(Some(10.0), Some(2.0)), Some(5.0));
        assert_eq!(ratio(Some(1.0), Some(0.0)), None);
        assert_eq!(ratio(None, Some(1.0)), None);
    }
}
