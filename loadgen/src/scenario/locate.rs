//! Where things are in the scenario text: `Locator` maps dotted key names to lines and byte spans
//! back to dotted key names, and `toml_error` turns serde/TOML errors into `ScenarioError`s that
//! name the key and its line.

use std::ops::Range;
use toml_edit::{ImDocument, InlineTable, Item, Table, Value};

use super::error::ScenarioError;
use super::key_path::split_parent;

/// One key (or array element) of the document and its spans.
struct Entry {
    path: String,
    key: Option<Range<usize>>,
    value: Option<Range<usize>>,
}

/// An index of every key of one scenario text, by dotted name (`consumers.outcomes.failed`,
/// `gates[1].figure`, `run.cells[0]`).
pub(crate) struct Locator<'a> {
    file: &'a str,
    text: &'a str,
    entries: Vec<Entry>,
}

impl<'a> Locator<'a> {
    /// Parses `text` for its spans; a syntax error comes back as `ScenarioError::Syntax`.
    pub fn new(text: &'a str, file: &'a str) -> Result<Self, ScenarioError> {
        let doc = ImDocument::parse(text).map_err(|e| {
            let line = e.span().map_or(1, |s| line_at(text, s.start));
            ScenarioError::Syntax {
                file: file.to_string(),
                line,
                message: e.message().trim().replace('\n', "; "),
            }
        })?;
        let mut entries = Vec::new();
        walk_table(doc.as_table(), "", &mut entries);
        Ok(Self {
            file,
            text,
            entries,
        })
    }

    /// The file name errors are reported against.
    pub fn file(&self) -> &str {
        self.file
    }

    /// Whether the document writes this key (defaults do not count).
    pub fn has(&self, path: &str) -> bool {
        self.entries.iter().any(|e| e.path == path)
    }

    /// The line of `path`, or of its nearest written ancestor, or 1.
    pub fn line_of(&self, path: &str) -> usize {
        let mut current = path;
        loop {
            if let Some(line) = self.exact_line(current) {
                return line;
            }
            match split_parent(current) {
                Some((parent, _)) => current = parent,
                None => return 1,
            }
        }
    }

    /// The line of the first key of `paths` the document writes, else of the first one's
    /// nearest ancestor.
    pub fn first_line_of(&self, paths: &[&str]) -> usize {
        paths
            .iter()
            .find_map(|p| self.exact_line(p))
            .unwrap_or_else(|| self.line_of(paths.first().copied().unwrap_or("")))
    }

    /// An `Invalid` error about `key`, at the line of `key` (or its nearest written ancestor).
    pub fn invalid(&self, key: &str, message: String) -> ScenarioError {
        self.invalid_at(self.line_of(key), key, message)
    }

    /// An `Invalid` error about `key` at a given line.
    pub fn invalid_at(&self, line: usize, key: &str, message: String) -> ScenarioError {
        ScenarioError::Invalid {
            file: self.file.to_string(),
            line,
            key: key.to_string(),
            message,
        }
    }

    fn exact_line(&self, path: &str) -> Option<usize> {
        if path.is_empty() {
            return None;
        }
        let entry = self.entries.iter().find(|e| e.path == path)?;
        let span = entry.key.as_ref().or(entry.value.as_ref());
        match span {
            Some(span) => Some(line_at(self.text, span.start)),
            // A table made only of dotted keys has no span of its own: use its first key's.
            None => self.first_child_line(path),
        }
    }

    fn first_child_line(&self, path: &str) -> Option<usize> {
        self.entries
            .iter()
            .filter(|e| is_child(&e.path, path))
            .find_map(|e| e.key.as_ref().or(e.value.as_ref()))
            .map(|s| line_at(self.text, s.start))
    }

    /// The key whose name is exactly at `span`.
    fn key_at(&self, span: &Range<usize>) -> Option<&str> {
        self.entries
            .iter()
            .find(|e| e.key.as_ref() == Some(span))
            .map(|e| e.path.as_str())
    }

    /// The key whose value is exactly at `span` (or, failing that, the innermost one that
    /// contains it).
    fn value_at(&self, span: &Range<usize>) -> Option<&str> {
        // Nested entries come after their parents, and an array of one table shares its span.
        if let Some(e) = self
            .entries
            .iter()
            .rev()
            .find(|e| e.value.as_ref() == Some(span))
        {
            return Some(&e.path);
        }
        self.entries
            .iter()
            .filter(|e| {
                e.value
                    .as_ref()
                    .is_some_and(|v| v.start <= span.start && span.end <= v.end)
            })
            .min_by_key(|e| e.value.as_ref().map_or(usize::MAX, |v| v.end - v.start))
            .map(|e| e.path.as_str())
    }
}

fn walk_table(table: &Table, prefix: &str, out: &mut Vec<Entry>) {
    for (name, item) in table.iter() {
        let path = join(prefix, name);
        out.push(Entry {
            path: path.clone(),
            key: table.key(name).and_then(|k| k.span()),
            value: item.span(),
        });
        walk_item(item, &path, out);
    }
}

fn walk_item(item: &Item, path: &str, out: &mut Vec<Entry>) {
    match item {
        Item::Table(t) => walk_table(t, path, out),
        Item::ArrayOfTables(array) => {
            for (i, t) in array.iter().enumerate() {
                let elem = format!("{path}[{i}]");
                out.push(Entry {
                    path: elem.clone(),
                    key: None,
                    value: t.span(),
                });
                walk_table(t, &elem, out);
            }
        }
        Item::Value(v) => walk_value(v, path, out),
        Item::None => {}
    }
}

fn walk_value(value: &Value, path: &str, out: &mut Vec<Entry>) {
    match value {
        Value::InlineTable(t) => walk_inline(t, path, out),
        Value::Array(array) => {
            for (i, v) in array.iter().enumerate() {
                let elem = format!("{path}[{i}]");
                out.push(Entry {
                    path: elem.clone(),
                    key: None,
                    value: v.span(),
                });
                walk_value(v, &elem, out);
            }
        }
        _ => {}
    }
}

fn walk_inline(table: &InlineTable, prefix: &str, out: &mut Vec<Entry>) {
    for (name, v) in table.iter() {
        let path = join(prefix, name);
        out.push(Entry {
            path: path.clone(),
            key: table.key(name).and_then(|k| k.span()),
            value: v.span(),
        });
        walk_value(v, &path, out);
    }
}

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}.{name}")
    }
}

fn is_child(path: &str, parent: &str) -> bool {
    path.strip_prefix(parent)
        .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
}

/// The 1-based line of a byte offset.
fn line_at(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// How a section is written in the file: `top level`, `[consumers]`, `[[gates]]`.
fn section_name(parent: &str) -> String {
    if parent.is_empty() {
        return "top level".to_string();
    }
    if parent.ends_with(']') {
        let bare: String = strip_indexes(parent);
        return format!("[[{bare}]]");
    }
    format!("[{}]", strip_indexes(parent))
}

fn strip_indexes(path: &str) -> String {
    let mut out = String::new();
    let mut depth = 0;
    for c in path.chars() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

/// Turns a serde/TOML deserialisation error into a `ScenarioError` naming the key and line.
pub(crate) fn toml_error(err: &toml::de::Error, loc: &Locator) -> ScenarioError {
    let message = err.message().trim().to_string();
    let span = err.span().unwrap_or(0..0);
    let line = line_at(loc.text, span.start);
    if let Some(rest) = message.strip_prefix("unknown field `") {
        return unknown_key(rest, &span, line, loc);
    }
    if let Some(rest) = message.strip_prefix("missing field `") {
        let field = rest.split('`').next().unwrap_or(rest);
        let parent = loc.value_at(&span).unwrap_or("");
        let key = join(parent, field);
        let text = format!(
            "missing required key `{field}` {}",
            place_phrase(&section_name(parent))
        );
        return loc.invalid_at(line, &key, text);
    }
    let key = loc
        .key_at(&span)
        .or_else(|| loc.value_at(&span))
        .unwrap_or("")
        .to_string();
    loc.invalid_at(line, &key, value_message(&key, &message))
}

fn place_phrase(section: &str) -> String {
    if section == "top level" {
        "at top level".to_string()
    } else {
        format!("in {section}")
    }
}

fn unknown_key(rest: &str, span: &Range<usize>, line: usize, loc: &Locator) -> ScenarioError {
    let field = rest.split('`').next().unwrap_or(rest);
    let key = loc
        .key_at(span)
        .map(str::to_string)
        .unwrap_or_else(|| field.to_string());
    let parent = split_parent(&key).map_or("", |(p, _)| p);
    let expected = rest
        .split_once("expected")
        .map(|(_, list)| backticked(list))
        .unwrap_or_default();
    ScenarioError::UnknownKey {
        file: loc.file.to_string(),
        line,
        section: section_name(parent),
        key,
        expected,
    }
}

/// The words between backticks, e.g. from "one of `a`, `b`" -> [a, b].
fn backticked(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// Rewords serde's value errors ("invalid value: integer `-3`, expected u32") as a sentence
/// that starts with the key.
fn value_message(key: &str, message: &str) -> String {
    let key = if key.is_empty() { "the file" } else { key };
    if message.starts_with("must ") {
        return format!("{key} {message}");
    }
    if let Some(rest) = message.strip_prefix("unknown variant `") {
        let got = rest.split('`').next().unwrap_or(rest);
        let expected: Vec<String> = rest
            .split_once("expected")
            .map(|(_, list)| backticked(list))
            .unwrap_or_default()
            .into_iter()
            .map(|v| format!("`{v}`"))
            .collect();
        return format!("{key} must be one of {}, got `{got}`", expected.join(", "));
    }
    let shape = message
        .strip_prefix("invalid value: ")
        .or_else(|| message.strip_prefix("invalid type: "));
    if let Some((got, expected)) = shape.and_then(|s| s.rsplit_once(", expected ")) {
        return format!(
            "{key} must be {}, got {}",
            plain_type(expected),
            got.replace('`', "")
        );
    }
    format!("{key}: {message}")
}

/// Serde's Rust type names in words a scenario author knows.
fn plain_type(expected: &str) -> String {
    match expected {
        "u32" => "a non-negative integer (at most 4294967295)".into(),
        "u64" | "usize" => "a non-negative integer".into(),
        "i32" | "i64" => "an integer".into(),
        "f32" | "f64" => "a number".into(),
        "a sequence" => "an array".into(),
        "a map" => "a table".into(),
        other if other.starts_with("struct ") => "a table".into(),
        other if other.starts_with("enum ") => "a string".into(),
        other => other.to_string(),
    }
}
