//! Running brokers added as cells of a run (`ackbench run --external NAME=BROKER_URL,DATABASE_URL`,
//! repeatable): a real Queen, or another build of ours, interleaved with the broker cells and
//! peers in every round. Nothing is started or created: each is driven over its HTTP wire on
//! run-tagged queue names (its database is not fresh per round), judged by its own profile
//! (detected from its `/health` and its database's procedures), and its PostgreSQL figures read
//! from its own database.

use crate::target::profile::Profile;

/// One `--external` as given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExternalSpec {
    /// The cell's name in output and results.
    pub name: String,
    pub broker_url: String,
    pub database_url: String,
}

/// The most external cells one run takes (a cell holds its index in a byte).
pub const MAX_EXTERNALS: usize = 16;

impl ExternalSpec {
    /// `NAME=BROKER_URL,DATABASE_URL`; `taken` are the names already in use (the scenario's
    /// cells and peers, earlier `--external`s).
    pub fn parse(text: &str, taken: &[String]) -> Result<ExternalSpec, String> {
        let usage = "expected NAME=BROKER_URL,DATABASE_URL";
        let (name, urls) = text
            .split_once('=')
            .ok_or_else(|| format!("--external `{text}`: {usage}"))?;
        let (broker_url, database_url) = urls
            .split_once(',')
            .ok_or_else(|| format!("--external `{text}`: {usage}"))?;
        let name = name.trim();
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            return Err(format!(
                "--external `{text}`: the name must be letters, digits, `-`, `_` or `.`"
            ));
        }
        if taken.iter().any(|t| t == name) {
            return Err(format!(
                "--external `{text}`: a cell is already named `{name}`"
            ));
        }
        if !broker_url.starts_with("http://") {
            return Err(format!(
                "--external `{text}`: the broker URL must be http://HOST:PORT"
            ));
        }
        if !database_url.starts_with("postgres://") && !database_url.starts_with("postgresql://") {
            return Err(format!(
                "--external `{text}`: the database URL must be postgres://..."
            ));
        }
        Ok(ExternalSpec {
            name: name.to_string(),
            broker_url: broker_url.trim_end_matches('/').to_string(),
            database_url: database_url.to_string(),
        })
    }
}

/// Every `--external`, parsed in order; names must be unique and not any of `taken`.
pub fn parse_all(texts: &[String], taken: &[String]) -> Result<Vec<ExternalSpec>, String> {
    if texts.len() > MAX_EXTERNALS {
        return Err(format!("at most {MAX_EXTERNALS} --external cells"));
    }
    let mut names: Vec<String> = taken.to_vec();
    let mut specs = Vec::with_capacity(texts.len());
    for text in texts {
        let spec = ExternalSpec::parse(text, &names)?;
        names.push(spec.name.clone());
        specs.push(spec);
    }
    Ok(specs)
}

/// An external cell ready to run: what was given and what the broker was found to be.
#[derive(Clone, Debug)]
pub struct ExternalCell {
    pub spec: ExternalSpec,
    pub profile: Profile,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_external_reads_as_name_broker_and_database() {
        let spec =
            ExternalSpec::parse("queen=http://127.0.0.1:6632/,postgres://u@h/db", &[]).unwrap();
        assert_eq!(spec.name, "queen");
        assert_eq!(spec.broker_url, "http://127.0.0.1:6632");
        assert_eq!(spec.database_url, "postgres://u@h/db");
    }

    #[test]
    fn a_malformed_or_clashing_external_is_refused_naming_why() {
        let taken = vec!["none".to_string()];
        for (text, why) in [
            ("queen", "NAME=BROKER_URL,DATABASE_URL"),
            ("queen=http://h:1", "NAME=BROKER_URL,DATABASE_URL"),
            ("=http://h:1,postgres://d", "the name"),
            ("none=http://h:1,postgres://d", "already named `none`"),
            ("q=h:1,postgres://d", "http://"),
            ("q=http://h:1,mysql://d", "postgres://"),
        ] {
            let e = ExternalSpec::parse(text, &taken).unwrap_err();
            assert!(e.contains(why), "{text}: {e}");
        }
        let twice = vec![
            "a=http://h:1,postgres://d".to_string(),
            "a=http://h:2,postgres://e".to_string(),
        ];
        assert!(parse_all(&twice, &[])
            .unwrap_err()
            .contains("already named `a`"));
    }
}
