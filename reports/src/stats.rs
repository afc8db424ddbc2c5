//! Statistics shared by the measuring side and the rendering side: spreads over rounds, and
//! HDR histograms serialised into the results file (so runs can be merged and percentiles
//! recomputed, never averaged).

use base64::Engine;
use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// A figure over rounds: the median, with the min and max beside it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct Spread {
    #[serde(deserialize_with = "nullable")]
    pub median: f64,
    #[serde(deserialize_with = "nullable")]
    pub min: f64,
    #[serde(deserialize_with = "nullable")]
    pub max: f64,
}

/// Figures whose denominator was zero are NaN ("no such ratio", not zero). JSON has no NaN:
/// serde_json writes it as `null`, and these read `null` back as NaN.
pub trait Nan: Sized {
    fn nan() -> Self;
}

impl Nan for f64 {
    fn nan() -> f64 {
        f64::NAN
    }
}

impl Nan for Spread {
    fn nan() -> Spread {
        Spread {
            median: f64::NAN,
            min: f64::NAN,
            max: f64::NAN,
        }
    }
}

/// Reads a number (or spread) where `null` stands for NaN.
pub fn nullable<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de> + Nan,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_else(T::nan))
}

/// The value of a figure an older document does not carry: NaN (`null`), never zero.
pub fn absent<T: Nan>() -> T {
    T::nan()
}

/// `nullable` for the values of a map.
pub fn nullable_map<'de, D, T>(d: D) -> Result<std::collections::BTreeMap<String, T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de> + Nan,
{
    let raw = std::collections::BTreeMap::<String, Option<T>>::deserialize(d)?;
    Ok(raw
        .into_iter()
        .map(|(k, v)| (k, v.unwrap_or_else(T::nan)))
        .collect())
}

impl Spread {
    /// The spread of the finite `values`; NaN when there are none (no such figure).
    pub fn of(values: &[f64]) -> Spread {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return Spread::nan();
        }
        v.sort_by(|a, b| a.partial_cmp(b).expect("finite"));
        Spread {
            median: median_sorted(&v),
            min: v[0],
            max: v[v.len() - 1],
        }
    }
}

fn median_sorted(v: &[f64]) -> f64 {
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Latency histograms record microseconds from 1 µs to 1 hour with 3 significant digits.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid bounds")
}

/// Serialises a histogram as base64 of the HdrHistogram V2 format.
pub fn encode_histogram(h: &Histogram<u64>) -> String {
    let mut buf = Vec::new();
    V2Serializer::new()
        .serialize(h, &mut buf)
        .expect("serialise into memory");
    base64::engine::general_purpose::STANDARD.encode(buf)
}

/// Reads a histogram written by `encode_histogram`.
pub fn decode_histogram(text: &str) -> Result<Histogram<u64>, String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|e| format!("histogram is not base64: {e}"))?;
    Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .map_err(|e| format!("histogram cannot be read: {e:?}"))
}

/// Merges histograms written by `encode_histogram` (one per shard, or per round) into one:
/// every recorded value counted once per document it came from, so percentiles are recomputed
/// from all samples, never averaged. `what` names the histograms in an error.
pub fn merge_encoded<'a>(
    what: &str,
    texts: impl IntoIterator<Item = &'a str>,
) -> Result<Histogram<u64>, String> {
    let mut merged = new_histogram();
    for text in texts {
        let h = decode_histogram(text).map_err(|e| format!("{what}: {e}"))?;
        merged
            .add(&h)
            .map_err(|e| format!("{what}: cannot be merged: {e:?}"))?;
    }
    Ok(merged)
}

/// Percentiles of a histogram of microseconds, in milliseconds.
pub fn percentiles_ms(h: &Histogram<u64>) -> crate::results::Percentiles<f64> {
    let ms = |us: u64| us as f64 / 1000.0;
    crate::results::Percentiles {
        count: h.len() as f64,
        mean: h.mean() / 1000.0,
        p50: ms(h.value_at_quantile(0.50)),
        p90: ms(h.value_at_quantile(0.90)),
        p99: ms(h.value_at_quantile(0.99)),
        p999: ms(h.value_at_quantile(0.999)),
        max: ms(h.max()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_of_rounds() {
        assert_eq!(
            Spread::of(&[3.0, 1.0, 2.0]),
            Spread {
                median: 2.0,
                min: 1.0,
                max: 3.0
            }
        );
        assert_eq!(Spread::of(&[4.0, 1.0]).median, 2.5);
        assert!(Spread::of(&[]).median.is_nan());
        assert_eq!(Spread::of(&[f64::NAN, 5.0]).median, 5.0);
    }

    #[test]
    fn histograms_round_trip_and_merge() {
        let mut a = new_histogram();
        for v in 1..=1000u64 {
            a.record(v * 1000).unwrap();
        }
        let text = encode_histogram(&a);
        let mut b = decode_histogram(&text).unwrap();
        assert_eq!(b.len(), 1000);
        b.add(&a).unwrap();
        let p = percentiles_ms(&b);
        assert_eq!(p.count, 2000.0);
        assert!((p.p50 - 500.0).abs() < 1.0, "{p:?}");
        assert!((p.max - 1000.0).abs() < 1.0);
        assert!(decode_histogram("!!").is_err());
    }

    /// Samples dealt out to three shards, each shard's histogram serialised as a shard writes
    /// it and merged back, give the histogram of all samples: same count, same recorded values,
    /// same percentiles.
    #[test]
    fn merged_shard_histograms_equal_the_histogram_of_all_samples() {
        let mut rng = fastrand::Rng::with_seed(18);
        let samples: Vec<u64> = (0..30_000).map(|_| rng.u64(1..5_000_000)).collect();
        let mut whole = new_histogram();
        let mut shards = [new_histogram(), new_histogram(), new_histogram()];
        for (i, v) in samples.iter().enumerate() {
            whole.record(*v).unwrap();
            shards[(i * 7 + (*v as usize)) % 3].record(*v).unwrap();
        }
        let texts: Vec<String> = shards.iter().map(encode_histogram).collect();
        let merged = merge_encoded("ack", texts.iter().map(String::as_str)).unwrap();
        assert_eq!(merged.len(), whole.len());
        let recorded = |h: &Histogram<u64>| -> Vec<(u64, u64)> {
            h.iter_recorded()
                .map(|v| (v.value_iterated_to(), v.count_at_value()))
                .collect()
        };
        assert_eq!(recorded(&merged), recorded(&whole));
        assert_eq!(percentiles_ms(&merged), percentiles_ms(&whole));
        let e = merge_encoded("ack", ["!!"]).unwrap_err();
        assert!(e.starts_with("ack: histogram is not base64"), "{e}");
    }

    #[test]
    fn nan_survives_json_as_null() {
        let s = Spread {
            median: f64::NAN,
            min: 1.0,
            max: 2.0,
        };
        let text = serde_json::to_string(&s).unwrap();
        assert_eq!(text, r#"{"median":null,"min":1.0,"max":2.0}"#);
        let back: Spread = serde_json::from_str(&text).unwrap();
        assert!(back.median.is_nan());
        assert_eq!(back.max, 2.0);
    }
}
