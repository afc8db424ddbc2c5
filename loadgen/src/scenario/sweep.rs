//! `[sweep]`: the settings `ackbench sweep` varies, each key with a list of values, and the grid
//! they make (the Cartesian product). A key names a scenario key (`"consumers.count"`,
//! `"broker.env.QUEEN_..."`), a PostgreSQL setting (`"pg.synchronous_commit"`) or a host
//! resource (`"host.pg_cores"`, `"host.broker_cores"`). Scenario keys are checked by applying
//! each value to the scenario and validating the result, so a bad key or value is refused with
//! the scenario's own message, named after the sweep key.

use serde::Serialize;

use super::locate::Locator;
use super::{Scenario, ScenarioError};

/// The most points a grid may have.
pub const MAX_POINTS: usize = 1000;
/// The most values one key may list.
pub const MAX_VALUES: usize = 64;
/// The host resources a sweep may confine.
pub const HOST_KEYS: [&str; 2] = ["host.pg_cores", "host.broker_cores"];
/// Top-level sections a sweep key may name (gates, faults and the sweep itself are not swept).
const SWEPT_SECTIONS: [&str; 8] = [
    "queue",
    "prefill",
    "producers",
    "consumers",
    "run",
    "broker",
    "postgres",
    "capacity",
];

/// What a sweep key addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AxisKind {
    /// A key of the scenario file (`consumers.count`, `broker.env.QUEEN_X`).
    Scenario,
    /// A PostgreSQL setting (`pg.NAME`), applied to the measured server per point.
    Postgres,
    /// A host resource (`host.pg_cores`, `host.broker_cores`): cores a process is confined to.
    Host,
}

/// One key of the sweep and its values, in the order written.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Axis {
    pub key: String,
    pub kind: AxisKind,
    pub values: Vec<toml::Value>,
}

/// `[sweep]`, its keys sorted by name (empty: no sweep).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Sweep {
    pub axes: Vec<Axis>,
}

/// One point of the grid: a value per key, in the axes' order.
pub type Point = Vec<(String, toml::Value)>;

impl Sweep {
    /// The grid: every combination of the axes' values, the last axis varying fastest. No axes
    /// make one point with no settings (the scenario as written).
    pub fn points(&self) -> Vec<Point> {
        let mut grid: Vec<Point> = vec![Vec::new()];
        for axis in &self.axes {
            grid = grid
                .into_iter()
                .flat_map(|p| {
                    axis.values.iter().map(move |v| {
                        let mut next = p.clone();
                        next.push((axis.key.clone(), v.clone()));
                        next
                    })
                })
                .collect();
        }
        grid
    }

    /// Adds `axis`, replacing an axis of the same key; refuses a grid above `MAX_POINTS`.
    pub fn set_axis(&mut self, axis: Axis) -> Result<(), String> {
        let mut next = self.clone();
        next.axes.retain(|a| a.key != axis.key);
        next.axes.push(axis);
        next.axes.sort_by(|a, b| a.key.cmp(&b.key));
        check_size(&next)?;
        *self = next;
        Ok(())
    }

    /// Whether any axis is a PostgreSQL setting.
    pub fn has_postgres(&self) -> bool {
        self.axes.iter().any(|a| a.kind == AxisKind::Postgres)
    }

    /// Whether any axis is a host resource.
    pub fn has_host(&self) -> bool {
        self.axes.iter().any(|a| a.kind == AxisKind::Host)
    }
}

fn check_size(s: &Sweep) -> Result<(), String> {
    let n = s
        .axes
        .iter()
        .try_fold(1usize, |n, a| n.checked_mul(a.values.len()));
    match n {
        Some(n) if n <= MAX_POINTS => Ok(()),
        _ => Err(format!(
            "the sweep's grid has more than {MAX_POINTS} points ({})",
            s.axes
                .iter()
                .map(|a| format!("{} × {}", a.key, a.values.len()))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// A value as text: strings as written, numbers and booleans as TOML writes them.
pub fn value_text(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A value given on the command line: an integer, a float, `true`/`false`, else a string.
pub fn parse_cli_value(text: &str) -> toml::Value {
    let t = text.trim();
    if let Ok(i) = t.parse::<i64>() {
        return toml::Value::Integer(i);
    }
    if let Ok(f) = t.parse::<f64>() {
        return toml::Value::Float(f);
    }
    match t {
        "true" => toml::Value::Boolean(true),
        "false" => toml::Value::Boolean(false),
        _ => toml::Value::String(t.to_string()),
    }
}

/// Checks one sweep key and its values against `base` (the scenario's text without its sweep).
/// The error is a sentence naming the key.
pub fn check_axis(base: &str, key: &str, values: &[toml::Value]) -> Result<Axis, String> {
    let kind = kind_of(key)?;
    if values.is_empty() || values.len() > MAX_VALUES {
        return Err(format!(
            "sweep key `{key}` must list 1 to {MAX_VALUES} values, got {}",
            values.len()
        ));
    }
    for (i, v) in values.iter().enumerate() {
        if matches!(v, toml::Value::Array(_) | toml::Value::Table(_)) {
            return Err(format!(
                "sweep key `{key}`: value {} must be a string, number or boolean",
                i + 1
            ));
        }
        if values[..i].contains(v) {
            return Err(format!("sweep key `{key}` lists {} twice", value_text(v)));
        }
        check_value(base, key, kind, v)?;
    }
    Ok(Axis {
        key: key.to_string(),
        kind,
        values: values.to_vec(),
    })
}

/// What `key` addresses, or why it addresses nothing.
fn kind_of(key: &str) -> Result<AxisKind, String> {
    if let Some(name) = key.strip_prefix("pg.") {
        let ok = !name.is_empty()
            && name.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '.');
        return match ok {
            true => Ok(AxisKind::Postgres),
            false => Err(format!(
                "sweep key `{key}`: `{name}` is not a PostgreSQL setting name"
            )),
        };
    }
    if key.starts_with("host.") {
        return match HOST_KEYS.contains(&key) {
            true => Ok(AxisKind::Host),
            false => Err(format!(
                "sweep key `{key}`: the host keys are {}",
                HOST_KEYS.join(", ")
            )),
        };
    }
    let section = key.split('.').next().unwrap_or_default();
    if !key.contains('.') || !SWEPT_SECTIONS.contains(&section) {
        return Err(format!(
            "sweep key `{key}` names neither a scenario key ({}.<key>), a PostgreSQL setting (pg.<name>) nor a host resource ({})",
            SWEPT_SECTIONS.join("|"),
            HOST_KEYS.join(", ")
        ));
    }
    Ok(AxisKind::Scenario)
}

fn check_value(base: &str, key: &str, kind: AxisKind, v: &toml::Value) -> Result<(), String> {
    let text = value_text(v);
    match kind {
        AxisKind::Postgres => Ok(()),
        AxisKind::Host => match v.as_integer() {
            Some(n) if (1..=1024).contains(&n) => Ok(()),
            _ => Err(format!(
                "sweep key `{key}`: a number of cores from 1 to 1024, got {text}"
            )),
        },
        AxisKind::Scenario => {
            let point = vec![(key.to_string(), v.clone())];
            scenario_text_at(base, &point)
                .and_then(|t| Scenario::parse(&t, POINT_SOURCE).map_err(|e| inner_message(&e)))
                .map(drop)
                .map_err(|e| format!("sweep key `{key}` = {text}: {e}"))
        }
    }
}

/// The source name the scenario of a point is parsed under (stripped from its errors).
const POINT_SOURCE: &str = "sweep-point";

/// A point's error without the generated text's file and line.
fn inner_message(e: &ScenarioError) -> String {
    let s = e.to_string();
    let prefix = format!("{POINT_SOURCE}:");
    match s.strip_prefix(&prefix) {
        Some(rest) => rest
            .split_once(": ")
            .map_or(rest.to_string(), |(_, m)| m.to_string()),
        None => s,
    }
}

/// `base` (scenario TOML) with every scenario key of `point` set and `[sweep]` removed.
pub fn scenario_text_at(base: &str, point: &Point) -> Result<String, String> {
    let mut doc: toml::Table = toml::from_str(base).map_err(|e| e.to_string())?;
    doc.remove("sweep");
    for (key, value) in point {
        if kind_of(key)? != AxisKind::Scenario {
            continue;
        }
        let mut parts: Vec<&str> = key.split('.').collect();
        let leaf = parts.pop().unwrap_or_default();
        let mut table = &mut doc;
        for part in parts {
            let entry = table
                .entry(part.to_string())
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            table = entry
                .as_table_mut()
                .ok_or_else(|| format!("`{part}` in `{key}` is not a table in the scenario"))?;
        }
        table.insert(leaf.to_string(), value.clone());
    }
    toml::to_string(&doc).map_err(|e| e.to_string())
}

impl Scenario {
    /// The scenario at one point of its sweep: its scenario keys applied and validated (the
    /// PostgreSQL and host keys are applied by the sweep itself), with no sweep of its own.
    pub fn at_point(&self, point: &Point) -> Result<Scenario, String> {
        let text = scenario_text_at(&self.source_text, point)?;
        let mut s = Scenario::parse(&text, &self.source_name).map_err(|e| e.to_string())?;
        s.source_text = text;
        Ok(s)
    }
}

/// Reads `[sweep]` of a parsed file: every key checked (see `check_axis`), the grid bounded.
pub(crate) fn from_file(
    table: Option<&toml::Table>,
    text: &str,
    loc: &Locator,
) -> Result<Sweep, ScenarioError> {
    let Some(table) = table else {
        return Ok(Sweep::default());
    };
    let base = scenario_text_at(text, &Vec::new()).map_err(|e| loc.invalid("sweep", e))?;
    let mut sweep = Sweep::default();
    for (key, value) in table {
        let path = format!("sweep.{key}");
        let values = match value {
            toml::Value::Array(a) => a.clone(),
            _ => {
                return Err(loc.invalid(
                    &path,
                    format!("sweep key `{key}` must be a list of values, e.g. [1, 2]"),
                ))
            }
        };
        let axis = check_axis(&base, key, &values).map_err(|m| loc.invalid(&path, m))?;
        sweep.set_axis(axis).map_err(|m| loc.invalid("sweep", m))?;
    }
    Ok(sweep)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"
name = "t"
[queue]
partitions = 4
[producers]
count = 2
[consumers]
count = 2
pop_batch = 10
[sweep]
"pg.synchronous_commit" = ["on", "off"]
"consumers.pop_batch" = [10, 50, 100]
"#;

    #[test]
    fn the_grid_is_the_cartesian_product_in_key_order() {
        let s = Scenario::parse(BASE, "t.toml").unwrap();
        let keys: Vec<&str> = s.sweep.axes.iter().map(|a| a.key.as_str()).collect();
        assert_eq!(keys, ["consumers.pop_batch", "pg.synchronous_commit"]);
        let points = s.sweep.points();
        assert_eq!(points.len(), 6);
        let text = |p: &Point| {
            p.iter()
                .map(|(k, v)| format!("{k}={}", value_text(v)))
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(
            text(&points[0]),
            "consumers.pop_batch=10 pg.synchronous_commit=on"
        );
        assert_eq!(
            text(&points[5]),
            "consumers.pop_batch=100 pg.synchronous_commit=off"
        );
        assert_eq!(Sweep::default().points(), vec![Vec::new()]);
    }

    #[test]
    fn a_point_applies_its_scenario_keys_and_drops_the_sweep() {
        let s = Scenario::parse(BASE, "t.toml").unwrap();
        let p = &s.sweep.points()[4];
        let at = s.at_point(p).unwrap();
        assert_eq!(at.consumers.pop_batch, 100);
        assert!(at.sweep.axes.is_empty());
        assert_eq!(at.queue.partitions, 4);
        let env = vec![("broker.env.QUEEN_X".to_string(), toml::Value::Integer(8))];
        let at = s.at_point(&env).unwrap();
        assert_eq!(at.broker.env.get("QUEEN_X").map(String::as_str), Some("8"));
    }

    fn refused(sweep: &str) -> String {
        let text = BASE.split("[sweep]").next().unwrap().to_string() + "[sweep]\n" + sweep;
        Scenario::parse(&text, "t.toml").unwrap_err().to_string()
    }

    #[test]
    fn bad_keys_and_values_are_refused_naming_the_key() {
        let e = refused("\"consumers.batchsize\" = [1, 2]\n");
        assert!(
            e.contains("consumers.batchsize") && e.contains("unknown key"),
            "{e}"
        );
        let e = refused("\"consumers.pop_batch\" = [0]\n");
        assert!(e.contains("sweep key `consumers.pop_batch` = 0"), "{e}");
        let e = refused("\"gates.x\" = [1]\n");
        assert!(e.contains("names neither a scenario key"), "{e}");
        let e = refused("\"pg.Bad-Name\" = [1]\n");
        assert!(e.contains("not a PostgreSQL setting name"), "{e}");
        let e = refused("\"host.cores\" = [1]\n");
        assert!(e.contains("host.pg_cores"), "{e}");
        let e = refused("\"host.pg_cores\" = [0]\n");
        assert!(e.contains("from 1 to 1024"), "{e}");
        let e = refused("\"pg.commit_delay\" = 5\n");
        assert!(e.contains("must be a list"), "{e}");
        let e = refused("\"pg.commit_delay\" = []\n");
        assert!(e.contains("1 to 64 values"), "{e}");
        let e = refused("\"pg.commit_delay\" = [0, 0]\n");
        assert!(e.contains("twice"), "{e}");
        assert!(e.starts_with("t.toml:"), "{e}");
    }

    #[test]
    fn the_command_line_adds_or_replaces_an_axis() {
        let mut s = Scenario::parse(BASE, "t.toml").unwrap();
        let values: Vec<toml::Value> = ["0", "200"].iter().map(|v| parse_cli_value(v)).collect();
        let base = scenario_text_at(&s.source_text, &Vec::new()).unwrap();
        let axis = check_axis(&base, "pg.commit_delay", &values).unwrap();
        s.sweep.set_axis(axis).unwrap();
        assert_eq!(s.sweep.points().len(), 12);
        let axis = check_axis(&base, "consumers.pop_batch", &[parse_cli_value("5")]).unwrap();
        s.sweep.set_axis(axis).unwrap();
        assert_eq!(s.sweep.points().len(), 4);
        assert_eq!(parse_cli_value("on"), toml::Value::String("on".into()));
        assert_eq!(parse_cli_value("0.5"), toml::Value::Float(0.5));
        let big: Vec<toml::Value> = (0..64).map(toml::Value::Integer).collect();
        let axis = check_axis(&base, "pg.commit_siblings", &big).unwrap();
        s.sweep.set_axis(axis).unwrap();
        let axis = check_axis(&base, "pg.wal_buffers", &big).unwrap();
        assert!(s
            .sweep
            .set_axis(axis)
            .unwrap_err()
            .contains("more than 1000"));
        assert_eq!(
            s.sweep.points().len(),
            256,
            "a refused axis changes nothing"
        );
    }

    #[test]
    fn every_shipped_scenario_survives_the_rewrite_of_a_point_unchanged() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
        let mut seen = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "toml") {
                continue;
            }
            // Lines name the rewritten text, which has its own layout: set them aside.
            let unlined = |mut s: Scenario| {
                s.gates.iter_mut().for_each(|g| g.line = 0);
                s.faults.iter_mut().for_each(|f| f.line = 0);
                s.source_text.clear();
                s.sweep = Sweep::default();
                s
            };
            let s = Scenario::load(&path).unwrap();
            let at = s.at_point(&Vec::new()).unwrap();
            assert_eq!(unlined(at), unlined(s), "{}", path.display());
            seen += 1;
        }
        assert!(seen > 3, "scenarios found: {seen}");
    }
}
