//! The Prometheus text exposition format (version 0.0.4) of [`Metrics`], and the histogram.
//!
//! Written by hand rather than with the `prometheus-client` crate: every label set is known
//! when the code is written, so a fixed array of atomics per metric does what that crate's
//! label families do (a lock and a hash of the labels on every increment) without either,
//! and without a new dependency. The format is checked by Prometheus's own Python parser in
//! the integration tests.

// Served only on the HTTP listener: without it the counting stays and the writing is unused.
#![cfg_attr(not(feature = "http"), allow(dead_code))]

use std::fmt::Write as _;
use std::sync::PoisonError;
use std::sync::atomic::{AtomicU64, Ordering};

use super::{Decision, Metrics, OUTCOMES};

/// What `/metrics` answers with.
pub(crate) const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Upper bounds of the decision latency buckets, in seconds.
pub(super) const LATENCY_BOUNDS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Upper bounds of the proposal-to-decision buckets, in seconds: a person answers in seconds
/// to hours.
pub(super) const WAIT_BOUNDS: &[f64] = &[
    1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0, 21600.0, 86400.0,
];

/// A histogram of whole units (microseconds, milliseconds) shown in seconds.
#[derive(Debug)]
pub(super) struct Histogram {
    bounds: &'static [f64],
    /// Units per second.
    per_second: f64,
    /// Observations per bucket, not cumulative; the last is above every bound.
    buckets: Box<[AtomicU64]>,
    /// In units.
    sum: AtomicU64,
}

impl Histogram {
    pub(super) fn new(bounds: &'static [f64], per_second: f64) -> Self {
        Histogram {
            bounds,
            per_second,
            buckets: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum: AtomicU64::new(0),
        }
    }

    pub(super) fn observe(&self, units: u64) {
        #[allow(clippy::cast_precision_loss)]
        let seconds = units as f64 / self.per_second;
        let slot = self
            .bounds
            .iter()
            .position(|&bound| seconds <= bound)
            .unwrap_or(self.bounds.len());
        if let Some(bucket) = self.buckets.get(slot) {
            bucket.fetch_add(1, Ordering::Relaxed);
        }
        self.sum.fetch_add(units, Ordering::Relaxed);
    }

    /// Its samples, under `name` with `labels` (`""` or `key="value",`) before `le`.
    fn render(&self, out: &mut String, name: &str, labels: &str) {
        let mut count = 0u64;
        for (i, bucket) in self.buckets.iter().enumerate() {
            count = count.saturating_add(bucket.load(Ordering::Relaxed));
            match self.bounds.get(i) {
                Some(bound) => {
                    let _ = writeln!(out, "{name}_bucket{{{labels}le=\"{bound}\"}} {count}");
                }
                None => {
                    let _ = writeln!(out, "{name}_bucket{{{labels}le=\"+Inf\"}} {count}");
                }
            }
        }
        #[allow(clippy::cast_precision_loss)]
        let sum = self.sum.load(Ordering::Relaxed) as f64 / self.per_second;
        let braces = labels.trim_end_matches(',');
        let braces = if braces.is_empty() {
            String::new()
        } else {
            format!("{{{braces}}}")
        };
        let _ = writeln!(out, "{name}_sum{braces} {sum}");
        let _ = writeln!(out, "{name}_count{braces} {count}");
    }
}

/// The `# HELP` and `# TYPE` lines of a metric.
fn head(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

impl Metrics {
    /// Everything, with `waiting` drafts (left out when unknown).
    pub(crate) fn render(&self, waiting: Option<usize>) -> String {
        let mut out = String::with_capacity(4096);
        let name = "countersign_calls_total";
        head(
            &mut out,
            name,
            "counter",
            "Tool calls by what the layer decided.",
        );
        for (decision, counter) in Decision::ALL.iter().zip(&self.calls) {
            let n = counter.load(Ordering::Relaxed);
            let _ = writeln!(out, "{name}{{decision=\"{}\"}} {n}", decision.as_str());
        }

        let name = "countersign_refusals_total";
        head(
            &mut out,
            name,
            "counter",
            "Tool calls refused, by contract code.",
        );
        let refusals = self.refusals.lock().unwrap_or_else(PoisonError::into_inner);
        for (code, n) in refusals.iter() {
            let _ = writeln!(out, "{name}{{code=\"{code}\"}} {n}");
        }
        drop(refusals);

        let name = "countersign_limit_refusals_total";
        let help = "Calls refused by a quota or rate ceiling, by contract code and ceiling.";
        head(&mut out, name, "counter", help);
        let limits = self.limits.lock().unwrap_or_else(PoisonError::into_inner);
        for ((code, limit), n) in limits.iter() {
            let _ = writeln!(out, "{name}{{code=\"{code}\",limit=\"{limit}\"}} {n}");
        }
        drop(limits);

        let name = "countersign_approvals_total";
        let help = "Approvals recorded in the store, by channel and signature kind.";
        head(&mut out, name, "counter", help);
        let approvals = self
            .approvals
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for ((channel, signature), n) in approvals.iter() {
            let _ = writeln!(
                out,
                "{name}{{channel=\"{channel}\",signature=\"{signature}\"}} {n}"
            );
        }
        drop(approvals);

        let name = "countersign_rejections_total";
        head(&mut out, name, "counter", "Drafts rejected in the store.");
        let _ = writeln!(out, "{name} {}", self.rejections.load(Ordering::Relaxed));

        let name = "countersign_expirations_total";
        head(
            &mut out,
            name,
            "counter",
            "Drafts expired undecided in the store.",
        );
        let _ = writeln!(out, "{name} {}", self.expirations.load(Ordering::Relaxed));

        let name = "countersign_executions_total";
        head(
            &mut out,
            name,
            "counter",
            "Runs of approved drafts, by outcome.",
        );
        for (outcome, counter) in OUTCOMES.iter().zip(&self.executions) {
            let n = counter.load(Ordering::Relaxed);
            let _ = writeln!(out, "{name}{{outcome=\"{outcome}\"}} {n}");
        }

        let name = "countersign_decision_latency_seconds";
        let help = "Time from a tool call's arrival to the layer's decision on it.";
        head(&mut out, name, "histogram", help);
        self.decision_latency.render(&mut out, name, "");

        let name = "countersign_time_to_decision_seconds";
        let help = "Time from a draft's proposal to a person's approval or rejection.";
        head(&mut out, name, "histogram", help);
        for (outcome, histogram) in ["approved", "rejected"].iter().zip(&self.to_decision) {
            histogram.render(&mut out, name, &format!("outcome=\"{outcome}\","));
        }

        if let Some(waiting) = waiting {
            let name = "countersign_drafts_waiting";
            let help = "Drafts waiting for a person or for their run, read from the store.";
            head(&mut out, name, "gauge", help);
            let _ = writeln!(out, "{name} {waiting}");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_histogram_counts_cumulatively_and_sums_in_seconds() {
        let h = Histogram::new(&[0.001, 0.01], 1e6);
        for micros in [500, 1_000, 5_000, 20_000] {
            h.observe(micros);
        }
        let mut out = String::new();
        h.render(&mut out, "x", "");
        assert_eq!(
            out,
            "x_bucket{le=\"0.001\"} 2\nx_bucket{le=\"0.01\"} 3\nx_bucket{le=\"+Inf\"} 4\n\
             x_sum 0.0265\nx_count 4\n"
        );
    }

    #[test]
    fn every_decision_is_listed_even_at_zero() {
        let text = Metrics::default().render(Some(3));
        for decision in Decision::ALL {
            let line = format!(
                "countersign_calls_total{{decision=\"{}\"}} 0",
                decision.as_str()
            );
            assert!(text.contains(&line), "{line}");
        }
        assert!(text.contains("countersign_drafts_waiting 3\n"));
        assert!(!Metrics::default().render(None).contains("drafts_waiting"));
    }
}
