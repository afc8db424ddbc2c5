//! The broker's `/metrics` (Prometheus text), scraped at the window's edges; with several
//! brokers in a cell, each broker's deltas and their total (`deltas`, `total`).
//!
//! Series are keyed by their full name with labels (`queen_acks_total{path="registry"}`). The
//! `# TYPE` lines say which families are counters: counters (and the `_bucket`, `_sum` and
//! `_count` series of histograms and summaries) are taken as deltas over the window; gauges,
//! such as `queen_ack_fusion_shards` or `queen_engine_setting{name="..."}`, keep their value at
//! the window's end. A series with no `# TYPE` line counts as a counter when its name ends in
//! `_total` (the Prometheus naming rule), else as a gauge.

use std::collections::BTreeMap;

/// Values by series (name with labels): one scrape, or the deltas over a window.
pub type Scrape = BTreeMap<String, f64>;

/// What a `# TYPE` line says a metric family is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
    Summary,
    /// Declared `untyped`, or not declared at all.
    Untyped,
}

impl Kind {
    fn from_type_line(word: &str) -> Kind {
        match word {
            "counter" => Kind::Counter,
            "gauge" => Kind::Gauge,
            "histogram" => Kind::Histogram,
            "summary" => Kind::Summary,
            _ => Kind::Untyped,
        }
    }
}

/// One parsed scrape: every series' value and every declared family's kind.
#[derive(Clone, Debug, Default)]
pub struct Exposition {
    pub series: Scrape,
    pub kinds: BTreeMap<String, Kind>,
}

/// Suffixes a series adds to its family's name (histograms and summaries; OpenMetrics counters
/// declared without `_total`).
const FAMILY_SUFFIXES: [&str; 4] = ["_bucket", "_sum", "_count", "_total"];

impl Exposition {
    /// The declared family a metric name belongs to, and its kind.
    fn family<'a>(&self, name: &'a str) -> Option<(&'a str, Kind)> {
        let declared = |family: &'a str| Some((family, *self.kinds.get(family)?));
        declared(name).or_else(|| {
            FAMILY_SUFFIXES
                .iter()
                .find_map(|suffix| declared(name.strip_suffix(suffix)?))
        })
    }

    /// The kind of the family `series` belongs to.
    pub fn kind_of(&self, series: &str) -> Kind {
        self.family(metric_name(series))
            .map_or(Kind::Untyped, |(_, kind)| kind)
    }

    /// True when `series` only ever grows, so the window's figure is its delta.
    pub fn is_cumulative(&self, series: &str) -> bool {
        let name = metric_name(series);
        match self.family(name) {
            Some((_, Kind::Counter)) => true,
            // `_bucket`, `_sum` and `_count` grow; a summary's bare quantile series does not.
            Some((family, Kind::Histogram | Kind::Summary)) => family != name,
            Some((_, Kind::Gauge)) => false,
            Some((_, Kind::Untyped)) | None => name.ends_with("_total"),
        }
    }
}

/// The metric name of a series: what comes before its labels.
fn metric_name(series: &str) -> &str {
    series.split('{').next().unwrap_or(series).trim()
}

/// Parses the Prometheus text exposition: `# TYPE` lines and samples (other comments and
/// malformed lines are skipped).
pub fn parse(text: &str) -> Exposition {
    let mut e = Exposition::default();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some(declaration) = line.strip_prefix("# TYPE ") {
            if let Some((family, kind)) = declaration.trim().split_once(' ') {
                e.kinds
                    .insert(family.to_string(), Kind::from_type_line(kind.trim()));
            }
        } else if !line.starts_with('#') {
            if let Some((series, value)) = sample(line) {
                e.series.insert(series, value);
            }
        }
    }
    e
}

/// A sample line's series and value.
fn sample(line: &str) -> Option<(String, f64)> {
    let (series, value) = line.rsplit_once(' ')?;
    Some((series.trim().to_string(), value.parse::<f64>().ok()?))
}

/// The window's figures for every series of `end`: counters as `end - start` (a counter new
/// at the end counts from 0), gauges as their value at `end`.
pub fn delta(start: &Exposition, end: &Exposition) -> Scrape {
    end.series
        .iter()
        .map(|(k, v)| {
            let figure = if end.is_cumulative(k) {
                v - start.series.get(k).copied().unwrap_or(0.0)
            } else {
                *v
            };
            (k.clone(), figure)
        })
        .collect()
}

/// Each broker's window figures (`delta`), pairing the edges' scrapes broker by broker.
pub fn deltas(starts: &[Exposition], ends: &[Exposition]) -> Vec<Scrape> {
    let empty = Exposition::default();
    ends.iter()
        .enumerate()
        .map(|(i, end)| delta(starts.get(i).unwrap_or(&empty), end))
        .collect()
}

/// The window's figures of several brokers as one: counters added over the brokers, gauges
/// (settings, switches) the first broker's value. `ends` says which series are counters.
pub fn total(ends: &[Exposition], deltas: &[Scrape]) -> Scrape {
    let mut sum = Scrape::new();
    for (i, (end, d)) in ends.iter().zip(deltas).enumerate() {
        for (series, v) in d {
            match (end.is_cumulative(series), sum.get_mut(series)) {
                (true, Some(total)) => *total += v,
                (_, None) => {
                    sum.insert(series.clone(), *v);
                }
                (false, Some(_)) if i > 0 => {}
                (false, Some(first)) => *first = *v,
            }
        }
    }
    sum
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

/// Ack items the broker answered through path `path` (`registry`, `fusion`, `hash`,
/// `positional`: `queen_acks_total{path}`).
pub fn acks_by_path(d: &Scrape, path: &str) -> f64 {
    value(d, &format!("queen_acks_total{{path=\"{path}\"}}"))
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
            a.series["queen_requests_total{route=\"push\",status=\"201\"}"],
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
        assert_eq!(accelerators(&b.series), (Some(true), None));
    }

    /// Two scrapes of the workspace's broker (started with `QUEEN_ACK_FUSION_SHARDS=2`), taken
    /// before and after a few pushes, pops and acks.
    const REAL_START: &str = include_str!("testdata/scrape_window_start.txt");
    const REAL_END: &str = include_str!("testdata/scrape_window_end.txt");

    #[test]
    fn a_real_scrape_takes_counters_as_deltas_and_gauges_as_values() {
        let (start, end) = (parse(REAL_START), parse(REAL_END));
        assert_eq!(end.kind_of("queen_ack_fusion_shards"), Kind::Gauge);
        assert_eq!(
            end.kind_of("queen_engine_setting{name=\"DB_POOL_SIZE\"}"),
            Kind::Gauge
        );
        assert_eq!(
            end.kind_of("queen_acks_total{path=\"fusion\"}"),
            Kind::Counter
        );
        let d = delta(&start, &end);
        assert_eq!(
            d["queen_ack_fusion_shards"], 2.0,
            "a gauge is not subtracted"
        );
        assert_eq!(d["queen_ack_fusion_rows_per_commit"], 1.0);
        assert_eq!(
            d["queen_engine_setting{name=\"QUEEN_ACK_FUSION_SHARDS\"}"],
            2.0
        );
        assert_eq!(d["queen_engine_setting{name=\"DB_POOL_SIZE\"}"], 8.0);
        assert_eq!(d["queen_segment_cache_segments"], 4.0);
        assert_eq!(d["queen_ack_fusion_flushes_total"], 2.0, "a counter is");
        assert_eq!(d["queen_ack_fusion_rows_total"], 2.0);
        assert_eq!(d["queen_messages_pushed_total"], 6.0);
        assert_eq!(d["queen_acks_total{path=\"fusion\"}"], 6.0);
        assert_eq!(
            d["queen_requests_total{route=\"pop_partition\",status=\"200\"}"], 2.0,
            "a counter new at the end counts from zero"
        );
        assert_eq!(fusion_rows_per_commit(&d), 1.0);
    }

    #[test]
    fn several_brokers_add_their_counters_and_keep_the_first_gauges() {
        let text = |hits: u32, shards: u32| {
            format!(
                "# TYPE queen_ack_registry_hits_total counter\nqueen_ack_registry_hits_total {hits}\n\
                 # TYPE queen_ack_fusion_shards gauge\nqueen_ack_fusion_shards {shards}\n\
                 queen_acks_total{{path=\"hash\"}} {hits}\n"
            )
        };
        let starts = [parse(&text(10, 8)), parse(&text(100, 4))];
        let ends = [parse(&text(15, 8)), parse(&text(130, 4))];
        let each = deltas(&starts, &ends);
        assert_eq!(each[0]["queen_ack_registry_hits_total"], 5.0);
        assert_eq!(each[1]["queen_ack_registry_hits_total"], 30.0);
        let sum = total(&ends, &each);
        assert_eq!(sum["queen_ack_registry_hits_total"], 35.0, "counters add");
        assert_eq!(
            sum["queen_ack_fusion_shards"], 8.0,
            "a gauge is the first broker's"
        );
        assert_eq!(acks_by_path(&sum, "hash"), 35.0);
        let missing_start = deltas(&starts[..1], &ends);
        assert_eq!(
            missing_start[1]["queen_ack_registry_hits_total"], 130.0,
            "a broker unread at the start counts from zero"
        );
    }

    #[test]
    fn histogram_and_summary_series_follow_their_family() {
        let text = "# TYPE lat histogram\nlat_bucket{le=\"1\"} 5\nlat_sum 9\nlat_count 5\n\
                    # TYPE rtt summary\nrtt{quantile=\"0.99\"} 7\nrtt_count 3\n\
                    # TYPE hits counter\nhits_total 4\nloose_total 2\nloose_level 3\n";
        let e = parse(text);
        let cumulative = |s: &str| e.is_cumulative(s);
        assert!(
            cumulative("lat_bucket{le=\"1\"}") && cumulative("lat_sum") && cumulative("lat_count")
        );
        assert!(cumulative("rtt_count") && !cumulative("rtt{quantile=\"0.99\"}"));
        assert!(
            cumulative("hits_total"),
            "an OpenMetrics counter family names its series _total"
        );
        assert!(
            cumulative("loose_total") && !cumulative("loose_level"),
            "undeclared: by name"
        );
    }
}
