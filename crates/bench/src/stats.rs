//! Order statistics of timing samples.

use std::time::Duration;

use serde::Serialize;

/// Summary of one sample set, in microseconds. Percentiles use the nearest-rank method on the
/// sorted samples: the p-quantile is the sample at rank ⌈p·n⌉ (1-based), so every reported
/// figure is a measured value; min is rank 1 and max rank n.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// Number of samples.
    pub count: usize,
    /// Smallest sample, in µs.
    pub min_us: f64,
    /// First quartile, in µs.
    pub q1_us: f64,
    /// Median, in µs.
    pub median_us: f64,
    /// Third quartile, in µs.
    pub q3_us: f64,
    /// 99th percentile, in µs.
    pub p99_us: f64,
    /// Largest sample, in µs.
    pub max_us: f64,
    /// Arithmetic mean, in µs.
    pub mean_us: f64,
    /// Coefficient of dispersion: the mean absolute deviation from the median over the median
    /// (seed 000's measure of spread; dimensionless, robust to skewed samples).
    pub dispersion: f64,
}

/// The sample at nearest rank ⌈p·n⌉ of `sorted` (non-empty, ascending), for 0 < p ≤ 1.
pub fn nearest_rank<T: Copy>(sorted: &[T], p: f64) -> T {
    assert!(!sorted.is_empty(), "no samples");
    assert!(p > 0.0 && p <= 1.0, "quantile {p} out of (0, 1]");
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

impl Summary {
    /// Summarises `samples` (sorted in place). An empty set gives a summary of count 0 and
    /// every figure 0 (a benchmark that timed nothing reports so, it does not stop).
    pub fn of(samples: &mut [Duration]) -> Summary {
        if samples.is_empty() {
            return Summary {
                count: 0,
                min_us: 0.0,
                q1_us: 0.0,
                median_us: 0.0,
                q3_us: 0.0,
                p99_us: 0.0,
                max_us: 0.0,
                mean_us: 0.0,
                dispersion: 0.0,
            };
        }
        samples.sort_unstable();
        let us = |d: Duration| d.as_nanos() as f64 / 1000.0;
        let total: f64 = samples.iter().map(|d| d.as_nanos() as f64).sum();
        let median = us(nearest_rank(samples, 0.5));
        let deviation = samples.iter().map(|&d| (us(d) - median).abs()).sum::<f64>() / samples.len() as f64;
        Summary {
            count: samples.len(),
            min_us: us(samples[0]),
            q1_us: us(nearest_rank(samples, 0.25)),
            median_us: us(nearest_rank(samples, 0.5)),
            q3_us: us(nearest_rank(samples, 0.75)),
            p99_us: us(nearest_rank(samples, 0.99)),
            max_us: us(samples[samples.len() - 1]),
            mean_us: total / samples.len() as f64 / 1000.0,
            dispersion: if median > 0.0 { deviation / median } else { 0.0 },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_picks_measured_samples() {
        let v: Vec<u32> = (1..=100).collect();
        assert_eq!(nearest_rank(&v, 0.5), 50);
        assert_eq!(nearest_rank(&v, 0.25), 25);
        assert_eq!(nearest_rank(&v, 0.99), 99);
        assert_eq!(nearest_rank(&v, 1.0), 100);
        assert_eq!(nearest_rank(&[7], 0.01), 7);
        assert_eq!(nearest_rank(&[1, 2, 3, 4], 0.5), 2);
        let mut d: Vec<Duration> = [3, 1, 2].iter().map(|&n| Duration::from_micros(n)).collect();
        let s = Summary::of(&mut d);
        assert_eq!((s.min_us, s.median_us, s.max_us, s.mean_us), (1.0, 2.0, 3.0, 2.0));
        // |3 − 2| + |1 − 2| + 0 over 3 samples, over the median 2.
        assert!((s.dispersion - 1.0 / 3.0).abs() < 1e-9, "{}", s.dispersion);
        let empty = Summary::of(&mut []);
        assert_eq!((empty.count, empty.median_us, empty.max_us), (0, 0.0, 0.0));
    }
}
