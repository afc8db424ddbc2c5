//! The Prometheus text exposition format (0.0.4): samples gathered by metric family and written
//! with one `# HELP` and `# TYPE` line per family, label values escaped.

use std::collections::BTreeMap;
use std::fmt::Write;

/// A metric family's type, as `# TYPE` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    Counter,
    Gauge,
    Histogram,
}

impl Type {
    fn word(self) -> &'static str {
        match self {
            Type::Counter => "counter",
            Type::Gauge => "gauge",
            Type::Histogram => "histogram",
        }
    }
}

/// A family's name, type and help text.
#[derive(Debug, Clone, Copy)]
pub struct Family {
    pub name: &'static str,
    pub kind: Type,
    pub help: &'static str,
}

/// One sample: its family, the suffix of a histogram's series (`_bucket`, `_sum`, `_count`,
/// else empty), its labels in order and its value.
#[derive(Debug, Clone)]
pub struct Sample {
    pub family: Family,
    pub suffix: &'static str,
    pub labels: Vec<(&'static str, String)>,
    pub value: f64,
}

/// Samples of any families, written family by family in the order families first appear.
#[derive(Default)]
pub struct Exposition {
    order: Vec<&'static str>,
    families: BTreeMap<&'static str, (Family, Vec<String>)>,
}

impl Exposition {
    /// Adds `samples` to their families.
    pub fn extend<'a>(&mut self, samples: impl IntoIterator<Item = &'a Sample>) {
        for s in samples {
            let entry = self.families.entry(s.family.name).or_insert_with(|| {
                self.order.push(s.family.name);
                (s.family, Vec::new())
            });
            entry.1.push(line(s));
        }
    }

    /// The exposition's text.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for name in &self.order {
            let (family, lines) = &self.families[name];
            let _ = writeln!(out, "# HELP {} {}", family.name, family.help);
            let _ = writeln!(out, "# TYPE {} {}", family.name, family.kind.word());
            for l in lines {
                out.push_str(l);
                out.push('\n');
            }
        }
        out
    }
}

/// One sample's line: `name_suffix{label="value",...} value`.
fn line(s: &Sample) -> String {
    let labels: Vec<String> = s
        .labels
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
        .collect();
    format!(
        "{}{}{{{}}} {}",
        s.family.name,
        s.suffix,
        labels.join(","),
        number(s.value)
    )
}

/// A label value with backslash, double quote and line feed escaped.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A value as the format spells it (`NaN`, `+Inf`, `-Inf`, else Rust's shortest decimal).
pub fn number(v: f64) -> String {
    match v {
        v if v.is_nan() => "NaN".into(),
        v if v == f64::INFINITY => "+Inf".into(),
        v if v == f64::NEG_INFINITY => "-Inf".into(),
        v => format!("{v}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UP: Family = Family {
        name: "demo_up",
        kind: Type::Gauge,
        help: "Whether it is up.",
    };
    const SEEN: Family = Family {
        name: "demo_seen_total",
        kind: Type::Counter,
        help: "Things seen.",
    };

    fn sample(family: Family, cell: &str, value: f64) -> Sample {
        Sample {
            family,
            suffix: "",
            labels: vec![("cell", cell.to_string())],
            value,
        }
    }

    #[test]
    fn samples_are_grouped_under_one_help_and_type_per_family_with_labels_escaped() {
        let mut e = Exposition::default();
        e.extend(&[sample(UP, "a", 1.0), sample(SEEN, "a", 3.0)]);
        e.extend(&[sample(UP, "b \"x\"\\\n", f64::NAN)]);
        assert_eq!(
            e.text(),
            "# HELP demo_up Whether it is up.\n# TYPE demo_up gauge\ndemo_up{cell=\"a\"} 1\n\
             demo_up{cell=\"b \\\"x\\\"\\\\\\n\"} NaN\n\
             # HELP demo_seen_total Things seen.\n# TYPE demo_seen_total counter\n\
             demo_seen_total{cell=\"a\"} 3\n"
        );
    }
}
