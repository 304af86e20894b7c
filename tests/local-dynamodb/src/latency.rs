//! The latency the metering proxy gives each request: none, a flat delay, or a draw from
//! DynamoDB's latency as measured from a Lambda function in the same Region.
//!
//! # The calibrated model
//!
//! Source: alexdebrie/dynamodb-performance-testing (`put-batch-transaction-performance`), client
//! latency measured from Lambda in-Region:
//!
//! | operation | p50 ms | p99 ms |
//! | --- | ---: | ---: |
//! | `PutItem` | 7.55 | 16.2 |
//! | `TransactWriteItems`, 5 items | 25.3 | 92.5 |
//! | `TransactWriteItems`, 25 items | 32.1 | 97.5 |
//!
//! - Single-item operations (`GetItem`, `PutItem`, `UpdateItem`, `DeleteItem`) and the other
//!   data-plane operations that were not measured (`Query`, `Scan`, `BatchGetItem`,
//!   `BatchWriteItem`) take `PutItem`'s distribution.
//! - Transactions (`TransactWriteItems`, `TransactGetItems`) of `n` items: p50 and p99 are linear
//!   in `n` through the two measured points, `p50(n) = 25.3 + 0.34 (n − 5)` and
//!   `p99(n) = 92.5 + 0.25 (n − 5)`, extrapolated along the same lines below 5 items and above
//!   25 (to 100 items: 57.6 and 116.25 ms). No measurement backs the extrapolation beyond 25.
//! - Each distribution is a log-normal fitted to its p50 and p99: `μ = ln p50`,
//!   `σ = (ln p99 − ln p50) / 2.3263`.
//! - Control-plane operations (`CreateTable`, `DescribeTable`, …) get no delay.
//!
//! Draws are seeded: the `k`-th request a proxy forwards gets the `k`-th standard normal of the
//! seed's stream, scaled by its operation's distribution, so two proxies started with one seed
//! give the same sequence of draws to the same sequence of requests, whichever client sends them.

use std::sync::Mutex;
use std::time::Duration;

/// The standard normal's 99th percentile.
const Z99: f64 = 2.326_347_874;

/// How long the proxy holds each request before forwarding it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Latency {
    /// Forwarded at once.
    None,
    /// The same delay for every request.
    Flat(Duration),
    /// Drawn per operation and item count from the measured distributions (module docs).
    Calibrated {
        /// The seed of the draws.
        seed: u64,
    },
}

/// A log-normal distribution fitted to a p50 and a p99, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fitted {
    /// The median, ms.
    pub p50: f64,
    /// The 99th percentile, ms.
    pub p99: f64,
}

impl Fitted {
    /// `exp(μ + σ z)`: the latency at standard normal `z`, in milliseconds.
    pub fn at(&self, z: f64) -> f64 {
        let mu = self.p50.ln();
        let sigma = (self.p99.ln() - mu) / Z99;
        (mu + sigma * z).exp()
    }
}

/// The calibrated distribution of `operation` with `items` items, or `None` for operations
/// that get no delay.
pub fn calibrated(operation: &str, items: usize) -> Option<Fitted> {
    match operation {
        "TransactWriteItems" | "TransactGetItems" => {
            let n = items.max(1) as f64;
            Some(Fitted {
                p50: (25.3 + 0.34 * (n - 5.0)).max(1.0),
                p99: (92.5 + 0.25 * (n - 5.0)).max(2.0),
            })
        }
        "GetItem" | "PutItem" | "UpdateItem" | "DeleteItem" | "Query" | "Scan" | "BatchGetItem"
        | "BatchWriteItem" => Some(Fitted {
            p50: 7.55,
            p99: 16.2,
        }),
        _ => None,
    }
}

/// SplitMix64: a small, seedable generator; quality enough for latency draws.
#[derive(Debug)]
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in (0, 1].
    fn unit(&mut self) -> f64 {
        ((self.next() >> 11) as f64 + 1.0) / (1u64 << 53) as f64
    }

    /// A standard normal (Box–Muller, one of the pair).
    fn normal(&mut self) -> f64 {
        let (u1, u2) = (self.unit(), self.unit());
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

/// The delays of one proxy: the model and, when calibrated, its stream of draws. Public so
/// that the benchmark's TCP proxy in front of other stores (`bench stores`) draws from the same
/// model and stream.
#[derive(Debug)]
pub struct Delays {
    latency: Latency,
    rng: Mutex<SplitMix>,
}

impl Delays {
    /// The delays of `latency`, the stream of draws at its start.
    pub fn new(latency: Latency) -> Self {
        let seed = match latency {
            Latency::Calibrated { seed } => seed,
            _ => 0,
        };
        Self {
            latency,
            rng: Mutex::new(SplitMix(seed)),
        }
    }

    /// The delay of the next request, an `operation` with `items` items.
    pub fn next(&self, operation: &str, items: usize) -> Duration {
        match self.latency {
            Latency::None => Duration::ZERO,
            Latency::Flat(d) => d,
            Latency::Calibrated { .. } => {
                let Some(fitted) = calibrated(operation, items) else {
                    return Duration::ZERO;
                };
                let z = self.rng.lock().unwrap_or_else(|e| e.into_inner()).normal();
                Duration::from_secs_f64(fitted.at(z) / 1000.0)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fit_goes_through_the_measured_points() {
        let put = calibrated("PutItem", 1).expect("metered");
        assert!((put.at(0.0) - 7.55).abs() < 1e-9);
        assert!((put.at(Z99) - 16.2).abs() < 1e-9);
        let five = calibrated("TransactWriteItems", 5).expect("metered");
        assert!((five.at(0.0) - 25.3).abs() < 1e-9 && (five.at(Z99) - 92.5).abs() < 1e-9);
        let twenty_five = calibrated("TransactWriteItems", 25).expect("metered");
        assert!((twenty_five.at(0.0) - 32.1).abs() < 1e-9);
        assert!((twenty_five.at(Z99) - 97.5).abs() < 1e-9);
        assert!(calibrated("CreateTable", 0).is_none());
    }

    #[test]
    fn draws_are_seeded_and_match_their_percentiles() {
        let a = Delays::new(Latency::Calibrated { seed: 7 });
        let b = Delays::new(Latency::Calibrated { seed: 7 });
        let xs: Vec<Duration> = (0..20_000).map(|_| a.next("PutItem", 1)).collect();
        let ys: Vec<Duration> = (0..20_000).map(|_| b.next("PutItem", 1)).collect();
        assert_eq!(xs, ys);
        let mut ms: Vec<f64> = xs.iter().map(|d| d.as_secs_f64() * 1000.0).collect();
        ms.sort_by(f64::total_cmp);
        let (p50, p99) = (ms[10_000], ms[19_800]);
        assert!((p50 - 7.55).abs() < 0.2, "p50 {p50}");
        assert!((p99 - 16.2).abs() < 1.0, "p99 {p99}");
    }
}
