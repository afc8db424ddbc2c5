//! The broker's `/metrics` (Prometheus text), scraped at the window's edges.
//!
//! Series are keyed by their full name with labels (`queen_acks_total{path="registry"}`);
//! deltas are taken for every series present at the end.

use std::collections::BTreeMap;

pub type Scrape = BTreeMap<String, f64>;

/// Parses the Prometheus text exposition (comments and malformed lines are skipped).
pub fn parse(text: &str) -> Scrape {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| {
            let (series, value) = l.trim().rsplit_once(' ')?;
            Some((series.trim().to_string(), value.parse::<f64>().ok()?))
        })
        .collect()
}

/// `end - start` for every series of `end` (gauges keep their end value).
pub fn delta(start: &Scrape, end: &Scrape) -> Scrape {
    end.iter()
        .map(|(k, v)| {
            let is_gauge = k.contains("_enabled")
                || k.starts_with("queen_engine_setting")
                || k.contains("_entries")
                || k.contains("_bytes") && !k.contains("_total");
            (
                k.clone(),
                if is_gauge {
                    *v
                } else {
                    v - start.get(k).copied().unwrap_or(0.0)
                },
            )
        })
        .collect()
}

/// A series of a delta, 0 when absent.
pub fn value(scrape: &Scrape, series: &str) -> f64 {
    scrape.get(series).copied().unwrap_or(0.0)
}

/// Registry hits / (hits + misses); NaN when the broker reports no registry traffic.
pub fn registry_hit_rate(d: &Scrape) -> f64 {
    let hits = value(d, "queen_ack_registry_hits_total");
    let misses = value(d, "queen_ack_registry_misses_total");
    if hits + misses > 0.0 {
        hits / (hits + misses)
    } else {
        f64::NAN
    }
}

/// Fusion rows per flush commit; NaN without flushes.
pub fn fusion_rows_per_commit(d: &Scrape) -> f64 {
    let flushes = value(d, "queen_ack_fusion_flushes_total");
    if flushes > 0.0 {
        value(d, "queen_ack_fusion_rows_total") / flushes
    } else {
        f64::NAN
    }
}

/// HTTP requests the broker served: the sum of its `queen_requests_total{route,status}`
/// series (every route, the window's two `/metrics` scrapes included); `None` when it exposes
/// no such counter (a broker other than ours).
pub fn requests_served(d: &Scrape) -> Option<f64> {
    let mut series = d
        .iter()
        .filter(|(k, _)| k.split('{').next() == Some("queen_requests_total"))
        .peekable();
    series.peek()?;
    Some(series.map(|(_, v)| v).sum())
}

/// The accelerator switches a broker reports (`queen_ack_registry_enabled`,
/// `queen_ack_fusion_enabled`), for `--broker-url` runs.
pub fn accelerators(scrape: &Scrape) -> (Option<bool>, Option<bool>) {
    let flag = |k: &str| scrape.get(k).map(|v| *v > 0.0);
    (
        flag("queen_ack_registry_enabled"),
        flag("queen_ack_fusion_enabled"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "# HELP x\n# TYPE queen_ack_registry_hits_total counter\nqueen_ack_registry_hits_total 10\n\
                     queen_ack_registry_misses_total 5\nqueen_ack_fusion_flushes_total 4\nqueen_ack_fusion_rows_total 8\n\
                     queen_ack_registry_enabled 1\nqueen_requests_total{route=\"push\",status=\"201\"} 3\n";
    const B: &str = "queen_ack_registry_hits_total 40\nqueen_ack_registry_misses_total 15\nqueen_ack_fusion_flushes_total 14\n\
                     queen_ack_fusion_rows_total 88\nqueen_ack_registry_enabled 1\nqueen_requests_total{route=\"push\",status=\"201\"} 10\n";

    #[test]
    fn parses_and_derives() {
        let (a, b) = (parse(A), parse(B));
        assert_eq!(
            a["queen_requests_total{route=\"push\",status=\"201\"}"],
            3.0
        );
        let d = delta(&a, &b);
        assert_eq!(
            d["queen_requests_total{route=\"push\",status=\"201\"}"],
            7.0
        );
        assert_eq!(
            d["queen_ack_registry_enabled"], 1.0,
            "gauges keep their value"
        );
        assert_eq!(registry_hit_rate(&d), 0.75);
        assert_eq!(fusion_rows_per_commit(&d), 8.0);
        assert!(fusion_rows_per_commit(&Scrape::new()).is_nan());
        assert_eq!(requests_served(&d), Some(7.0));
        assert_eq!(requests_served(&Scrape::new()), None);
        assert_eq!(accelerators(&b), (Some(true), None));
    }
}
