//! How the report writes numbers: three significant digits, grouped thousands, percentages,
//! ratios to the baseline and ranges over rounds.

use crate::figures::Format;
use crate::stats::Spread;

/// Three significant digits below 1000, whole numbers with grouped thousands above.
pub fn format_number(v: f64) -> String {
    if !v.is_finite() {
        return "—".into();
    }
    if v == 0.0 {
        return "0".into();
    }
    let mag = v.abs().log10().floor() as i32;
    let decimals = (2 - mag).max(0) as usize;
    let text = format!("{v:.decimals$}");
    let rounded: f64 = text.parse().unwrap_or(v);
    if rounded.abs() >= 1000.0 {
        group_thousands(v.round())
    } else {
        text
    }
}

/// A count (messages, requests): always an integer, thousands grouped (`7,214`, `66`), never
/// the significant-digit rounding of `format_number` (which printed 66 as `66.0`).
pub fn format_count(v: u64) -> String {
    group_thousands(v as f64)
}

pub(super) fn group_thousands(v: f64) -> String {
    let digits = format!("{}", v.abs() as u64);
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if v < 0.0 {
        format!("-{out}")
    } else {
        out
    }
}

/// A figure as the tables write it (no unit: the column header carries it).
pub fn format_value(v: f64, format: Format) -> String {
    if !v.is_finite() {
        return "—".into();
    }
    match format {
        Format::Number | Format::Ms => format_number(v),
        Format::Percent => format!("{}%", format_number(v * 100.0)),
    }
}

/// A ratio to the baseline: `×0.123`.
pub fn format_ratio(r: f64) -> String {
    if r.is_finite() {
        format!("×{}", format_number(r))
    } else {
        "—".into()
    }
}

pub(super) fn format_range(s: &Spread, format: Format) -> String {
    format!(
        "{}–{}",
        format_value(s.min, format),
        format_value(s.max, format)
    )
}

/// Seconds as written in a scenario: `30`, `2.5`.
pub(super) fn secs(v: f64) -> String {
    format!("{}", (v * 1000.0).round() / 1000.0)
}

pub(super) fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_print_as_integers() {
        assert_eq!(format_count(0), "0");
        assert_eq!(format_count(66), "66");
        assert_eq!(format_count(7214), "7,214");
        assert_eq!(format_count(1_234_567), "1,234,567");
    }

    #[test]
    fn numbers_have_three_significant_digits() {
        assert_eq!(format_number(0.0), "0");
        assert_eq!(format_number(0.012345), "0.0123");
        assert_eq!(format_number(1.2345), "1.23");
        assert_eq!(format_number(12.345), "12.3");
        assert_eq!(format_number(123.45), "123");
        assert_eq!(format_number(999.7), "1,000");
        assert_eq!(format_number(12345.6), "12,346");
        assert_eq!(format_number(1234567.0), "1,234,567");
        assert_eq!(format_number(-0.5), "-0.500");
        assert_eq!(format_number(f64::NAN), "—");
        assert_eq!(format_value(0.9731, Format::Percent), "97.3%");
        assert_eq!(format_ratio(0.1234), "×0.123");
    }
}
