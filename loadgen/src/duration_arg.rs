//! Durations on the command line: seconds as a number (`90`, `2.5`) or with a unit (`90s`,
//! `30m`, `2h`), so a soak run reads `--duration 2h`.

/// Parses `text` as seconds: a non-negative number, optionally followed by `s`, `m` or `h`.
pub fn parse_secs(text: &str) -> Result<f64, String> {
    let text = text.trim();
    let (number, unit) = match text.char_indices().last() {
        Some((i, 's')) => (&text[..i], 1.0),
        Some((i, 'm')) => (&text[..i], 60.0),
        Some((i, 'h')) => (&text[..i], 3600.0),
        _ => (text, 1.0),
    };
    match number.trim().parse::<f64>() {
        Ok(n) if n.is_finite() && n >= 0.0 => Ok(n * unit),
        _ => Err(format!(
            "{text:?} is no duration: give seconds (90), or a number with s, m or h (30m, 2h)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_minutes_and_hours_parse() {
        assert_eq!(parse_secs("10"), Ok(10.0));
        assert_eq!(parse_secs("2.5"), Ok(2.5));
        assert_eq!(parse_secs("90s"), Ok(90.0));
        assert_eq!(parse_secs("30m"), Ok(1800.0));
        assert_eq!(parse_secs("2h"), Ok(7200.0));
        for bad in ["", "h", "-1", "2d", "1h30m", "nan", "inf"] {
            assert!(parse_secs(bad).is_err(), "{bad}");
        }
    }
}
