//! Reading JSON request bodies into the wire's request types, so that every refusal names the
//! field.
//!
//! `read_body` deserialises straight into the `ackbench_wire` type (`read_body_scanned` first
//! tries the wire's byte scanner, for the hot bodies). Only when that fails is the
//! body parsed into `serde_json::Value` and walked through `Fields` (which carries the path of
//! the object, `items[3]`) by the route's `explain`, so the error reads
//! `items[3].queue must be a non-empty string` rather than serde's wording.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::error::ApiError;

/// Parses a request body; anything but a JSON object is a 400.
pub fn parse_object(body: &[u8]) -> Result<Map<String, Value>, ApiError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("body is not valid JSON: {e}")))?;
    match value {
        Value::Object(map) => Ok(map),
        _ => Err(ApiError::bad_request("body must be a JSON object")),
    }
}

/// Reads `body` into `T`; when it does not fit, `explain` walks it to name the offending field
/// (and serde's own words are the answer if `explain` finds nothing).
pub fn read_body<'a, T: Deserialize<'a>>(
    body: &'a [u8],
    explain: impl FnOnce(&Fields<'_>) -> Result<(), ApiError>,
) -> Result<T, ApiError> {
    read_checked(body, std::str::from_utf8(body), explain)
}

/// `read_body` with `body` already checked as UTF-8 (`text`).
fn read_checked<'a, T: Deserialize<'a>>(
    body: &'a [u8],
    text: Result<&'a str, std::str::Utf8Error>,
    explain: impl FnOnce(&Fields<'_>) -> Result<(), ApiError>,
) -> Result<T, ApiError> {
    // serde would also read a struct from a JSON array, positionally; the wire wants objects.
    let object = body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
    let parsed = match (object, text) {
        // Checked as UTF-8 once, whole: read from a `str`, serde_json does not check every
        // string (and raw payload) again, which was a large part of reading a push or an ack.
        (true, Ok(text)) => serde_json::from_str(text).map_err(|e| e.to_string()),
        // Not UTF-8: serde's own reading says where (the error text is unchanged).
        (true, Err(_)) => serde_json::from_slice(body).map_err(|e| e.to_string()),
        (false, _) => Err("body must be a JSON object".to_string()),
    };
    match parsed {
        Ok(t) => Ok(t),
        Err(e) => {
            let map = parse_object(body)?;
            explain(&Fields::root(&map))?;
            Err(ApiError::bad_request(format!(
                "body does not fit the request: {e}"
            )))
        }
    }
}

/// Reads `body` with `scan` (`ackbench_wire::scan`) when it is in the plain form the scanner
/// reads, else as `read_body` does: serde decides, and names what does not fit.
pub fn read_body_scanned<'a, T: Deserialize<'a>>(
    body: &'a [u8],
    scan: fn(&'a str) -> Option<T>,
    explain: impl FnOnce(&Fields<'_>) -> Result<(), ApiError>,
) -> Result<T, ApiError> {
    let text = std::str::from_utf8(body);
    match text.ok().and_then(scan) {
        Some(t) => Ok(t),
        None => read_checked(body, text, explain),
    }
}

/// The name of `key` inside the object at `path` (`items[2].queue`; `queue` at the root).
pub fn field(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// A given string must not be empty.
pub fn nonempty(
    value: Option<&str>,
    name: impl FnOnce() -> String,
) -> Result<Option<&str>, ApiError> {
    match value {
        Some("") => Err(ApiError::bad_request(format!(
            "{} must be a non-empty string",
            name()
        ))),
        other => Ok(other),
    }
}

/// An object being read, with its path for error messages.
pub struct Fields<'a> {
    pub map: &'a Map<String, Value>,
    pub path: String,
}

impl<'a> Fields<'a> {
    pub fn root(map: &'a Map<String, Value>) -> Fields<'a> {
        Fields {
            map,
            path: String::new(),
        }
    }

    /// The object at `value`, addressed as `path` (e.g. `items[2]`).
    pub fn of(value: &'a Value, path: String) -> Result<Fields<'a>, ApiError> {
        match value {
            Value::Object(map) => Ok(Fields { map, path }),
            _ => Err(ApiError::bad_request(format!("{path} must be an object"))),
        }
    }

    pub fn name(&self, key: &str) -> String {
        field(&self.path, key)
    }

    fn present(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    pub fn opt_str(&self, key: &str) -> Result<Option<&'a str>, ApiError> {
        match self.present(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(ApiError::bad_request(format!(
                "{} must be a string",
                self.name(key)
            ))),
        }
    }

    /// A string that, when given, is not empty.
    pub fn opt_nonempty(&self, key: &str) -> Result<Option<&'a str>, ApiError> {
        match self.opt_str(key)? {
            Some("") => Err(ApiError::bad_request(format!(
                "{} must be a non-empty string",
                self.name(key)
            ))),
            other => Ok(other),
        }
    }

    /// A string that must be present (it may be empty).
    pub fn req_str(&self, key: &str) -> Result<&'a str, ApiError> {
        self.opt_str(key)?
            .ok_or_else(|| ApiError::bad_request(format!("{} must be a string", self.name(key))))
    }

    pub fn req_nonempty(&self, key: &str) -> Result<&'a str, ApiError> {
        self.opt_nonempty(key)?.ok_or_else(|| {
            ApiError::bad_request(format!("{} must be a non-empty string", self.name(key)))
        })
    }

    pub fn opt_array(&self, key: &str) -> Result<Option<&'a Vec<Value>>, ApiError> {
        match self.present(key) {
            None => Ok(None),
            Some(Value::Array(a)) => Ok(Some(a)),
            Some(_) => Err(ApiError::bad_request(format!(
                "{} must be an array",
                self.name(key)
            ))),
        }
    }

    pub fn req_array(&self, key: &str) -> Result<&'a Vec<Value>, ApiError> {
        self.opt_array(key)?.ok_or_else(|| {
            ApiError::bad_request(format!("{} is required (an array)", self.name(key)))
        })
    }

    pub fn opt_object(&self, key: &str) -> Result<Option<Fields<'a>>, ApiError> {
        match self.present(key) {
            None => Ok(None),
            Some(v) => Fields::of(v, self.name(key)).map(Some),
        }
    }

    pub fn opt_i64(&self, key: &str, min: i64, max: i64) -> Result<Option<i64>, ApiError> {
        match self.present(key) {
            None => Ok(None),
            Some(v) => match v.as_i64() {
                Some(n) if (min..=max).contains(&n) => Ok(Some(n)),
                _ => Err(ApiError::bad_request(format!(
                    "{} must be a whole number in {min}..={max}",
                    self.name(key)
                ))),
            },
        }
    }

    pub fn opt_bool(&self, key: &str) -> Result<Option<bool>, ApiError> {
        match self.present(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err(ApiError::bad_request(format!(
                "{} must be true or false",
                self.name(key)
            ))),
        }
    }

    /// Refuses keys outside `allowed`, naming the first one found.
    pub fn only(&self, allowed: &[&str]) -> Result<(), ApiError> {
        match self.map.keys().find(|k| !allowed.contains(&k.as_str())) {
            Some(k) => Err(ApiError::bad_request(format!(
                "{} is not a known field",
                self.name(k)
            ))),
            None => Ok(()),
        }
    }
}
