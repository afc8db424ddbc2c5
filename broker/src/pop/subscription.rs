//! Where a consumer group's cursors start on its first pop of a queue: `subscriptionMode`
//! (`all`, `new`, and Queen's aliases) and `subscriptionFrom` (`now` or an ISO-8601 time). This
//! module owns the value and the time's parsing; `routes::pop` maps the parameters onto it and
//! PostgreSQL (`log_subscribe_new_v2`) seeds the cursors.

use std::time::{Duration, SystemTime};

/// Where a group's cursors start on its first pop of a queue; later pops of the group ignore
/// it (the subscription is recorded once, in `log_groups`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subscription {
    /// The whole retained backlog (nothing is recorded).
    All,
    /// The tail of every partition that exists at the first pop.
    New,
    /// The first segment created at or after this time.
    From(SystemTime),
}

impl Subscription {
    /// `log_pop_scope_v2`'s `sub_new`.
    pub fn is_new(&self) -> bool {
        matches!(self, Subscription::New)
    }

    /// `log_pop_scope_v2`'s `sub_from`.
    pub fn from(&self) -> Option<SystemTime> {
        match self {
            Subscription::From(at) => Some(*at),
            _ => None,
        }
    }
}

/// An ISO-8601 time as Queen's clients send it: `2026-01-31T12:00:00Z`, with optional
/// fractional seconds, `T` or a space, and `Z`, no zone (UTC), or a `+hh:mm` / `-hhmm` offset;
/// a bare date is its midnight UTC. `None` for anything else.
pub fn parse_time(raw: &str) -> Option<SystemTime> {
    let raw = raw.trim();
    if raw.len() == 10 {
        return humantime::parse_rfc3339_weak(&format!("{raw}T00:00:00Z")).ok();
    }
    let (local, offset) = split_offset(raw)?;
    let at = humantime::parse_rfc3339_weak(local).ok()?;
    if offset >= 0 {
        at.checked_sub(Duration::from_secs(offset as u64))
    } else {
        at.checked_add(Duration::from_secs(offset.unsigned_abs()))
    }
}

/// Splits a trailing `+hh:mm`, `-hh:mm`, `+hhmm` or `-hhmm` (seconds east of UTC) off the
/// time; without one, the offset is 0 and the text is left as it is.
fn split_offset(raw: &str) -> Option<(&str, i64)> {
    // The zone can only follow the seconds: `yyyy-mm-ddThh:mm:ss` is 19 bytes.
    let tail_at = raw.get(19..)?.find(['+', '-']).map(|i| i + 19);
    let Some(at) = tail_at else {
        return Some((raw, 0));
    };
    let (local, zone) = raw.split_at(at);
    let digits: String = zone[1..].chars().filter(|c| *c != ':').collect();
    if digits.len() != 4 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (h, m): (i64, i64) = (digits[..2].parse().ok()?, digits[2..].parse().ok()?);
    if h > 23 || m > 59 {
        return None;
    }
    let sign = if zone.starts_with('-') { -1 } else { 1 };
    Some((local, sign * (h * 3600 + m * 60)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(at: SystemTime) -> u64 {
        at.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs()
    }

    #[test]
    fn queen_clients_times_parse() {
        let noon = 1_769_860_800; // 2026-01-31T12:00:00Z
        for raw in [
            "2026-01-31T12:00:00Z",
            "2026-01-31T12:00:00.000Z",
            "2026-01-31T12:00:00",
            "2026-01-31 12:00:00",
            "2026-01-31T12:00:00.123456",
            "2026-01-31T13:00:00+01:00",
            "2026-01-31T10:30:00-0130",
            "2026-01-31T12:00:00+00:00",
        ] {
            assert_eq!(parse_time(raw).map(secs), Some(noon), "{raw}");
        }
        assert_eq!(parse_time("2026-01-31").map(secs), Some(noon - 12 * 3600));
    }

    #[test]
    fn anything_else_is_refused() {
        for raw in [
            "",
            "yesterday",
            "now",
            "2026-13-01T00:00:00Z",
            "2026-01-31T25:00:00Z",
            "2026-01-31T12:00:00+1",
            "2026-01-31T12:00:00+ab:cd",
            "1769860800",
            "2026-01-31X",
        ] {
            assert_eq!(parse_time(raw), None, "{raw}");
        }
    }
}
