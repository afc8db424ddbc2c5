//! The server configuration: production-like defaults, caller overrides win.

use std::path::Path;

use crate::error::{Error, ErrorKind};

/// A `name = value` list in file order; a later entry for the same name wins,
/// both here and in PostgreSQL's own parsing.
pub(crate) type Settings = Vec<(String, String)>;

/// The settings every cluster gets unless overridden. Durability settings
/// (`fsync`, `synchronous_commit`) are deliberately left at their defaults (on).
pub(crate) fn defaults(port: u16, socket_dir: &Path) -> Settings {
    [
        ("listen_addresses", "127.0.0.1".to_string()),
        ("port", port.to_string()),
        ("unix_socket_directories", socket_dir.display().to_string()),
        ("shared_preload_libraries", "pg_stat_statements".to_string()),
        ("pg_stat_statements.track", "all".to_string()),
        ("max_connections", "200".to_string()),
        ("logging_collector", "off".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// Adds or replaces `name` (case-insensitive, like PostgreSQL).
pub(crate) fn set(settings: &mut Settings, name: &str, value: &str) {
    match settings
        .iter_mut()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
    {
        Some(entry) => entry.1 = value.to_string(),
        None => settings.push((name.to_string(), value.to_string())),
    }
}

/// Value of `name`, if present.
pub(crate) fn get<'a>(settings: &'a Settings, name: &str) -> Option<&'a str> {
    settings
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// `defaults` with every override applied on top.
pub(crate) fn merge(defaults: Settings, overrides: &Settings) -> Settings {
    let mut merged = defaults;
    for (name, value) in overrides {
        set(&mut merged, name, value);
    }
    merged
}

/// Checks names and values so nothing can break out of its line.
pub(crate) fn validate(settings: &Settings) -> Result<(), Error> {
    for (name, value) in settings {
        let name_ok = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
        if !name_ok {
            return Err(invalid(format!("invalid setting name {name:?}")));
        }
        if value.contains(['\n', '\r', '\0']) {
            return Err(invalid(format!(
                "invalid value for setting {name}: {value:?}"
            )));
        }
    }
    Ok(())
}

/// The settings as `postgresql.conf` lines.
pub(crate) fn render(settings: &Settings) -> String {
    let mut text = String::from("# Written by throwaway-pg; later lines win.\n");
    for (name, value) in settings {
        text.push_str(&format!("{name} = {}\n", quote(value)));
    }
    text
}

/// Quotes a value for postgresql.conf; an already single-quoted value is kept.
fn quote(value: &str) -> String {
    let already_quoted = value.len() >= 2 && value.starts_with('\'') && value.ends_with('\'');
    if already_quoted {
        return value.to_string();
    }
    format!("'{}'", value.replace('\\', "\\\\").replace('\'', "''"))
}

fn invalid(message: String) -> Error {
    Error::new(ErrorKind::InvalidInput, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_win_and_are_quoted() {
        let mut overrides = Settings::new();
        set(&mut overrides, "FSYNC", "off");
        set(&mut overrides, "work_mem", "8MB");
        set(&mut overrides, "search_path", "'a', b");
        let merged = merge(defaults(5432, Path::new("/tmp/x")), &overrides);
        assert_eq!(get(&merged, "fsync"), Some("off"));
        let text = render(&merged);
        assert!(text.contains("work_mem = '8MB'\n"));
        assert!(text.contains("search_path = '''a'', b'\n"));
        assert!(text.contains("port = '5432'\n"));
    }

    #[test]
    fn rejects_line_breaking_input() {
        assert!(validate(&vec![("a b".into(), "1".into())]).is_err());
        assert!(validate(&vec![("a".into(), "1\nb = 2".into())]).is_err());
        assert!(validate(&vec![("pg_stat_statements.max".into(), "100".into())]).is_ok());
    }
}
