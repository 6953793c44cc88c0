//! Summary statistics of per-loop samples, printed the way flexAsynch does.

use serde::Serialize;

#[derive(Clone, Debug, Default, Serialize)]
pub struct Summary {
    pub samples: usize,
    pub average: f64,
    pub min: f64,
    pub max: f64,
    /// Standard deviation as a percentage of the mean.
    pub stddev_pct: f64,
}

pub fn summarize(samples: &[f64]) -> Summary {
    if samples.is_empty() {
        return Summary::default();
    }
    let n = samples.len() as f64;
    let mean = samples.iter().sum::<f64>() / n;
    let var = samples.iter().map(|s| (s - mean).powi(2)).sum::<f64>() / n;
    Summary {
        samples: samples.len(),
        average: mean,
        min: samples.iter().cloned().fold(f64::INFINITY, f64::min),
        max: samples.iter().cloned().fold(0.0, f64::max),
        stddev_pct: if mean > 0.0 {
            100.0 * var.sqrt() / mean
        } else {
            0.0
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_of_samples() {
        let s = summarize(&[90.0, 110.0]);
        assert_eq!(s.average, 100.0);
        assert_eq!(s.min, 90.0);
        assert_eq!(s.max, 110.0);
        assert!((s.stddev_pct - 10.0).abs() < 1e-9);
        assert_eq!(summarize(&[]).samples, 0);
    }
}
