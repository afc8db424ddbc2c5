//! Where a history is kept: a directory with one JSON file per run (`run-000001.json`, numbered
//! in the order they were added), or, when `--store` is a `postgres://` URL, the table
//! `ackbench_history` (created when missing; one row per run, the record as `jsonb`). Either
//! way the runs come back in the order they were added.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio_postgres::NoTls;

use super::record::RunRecord;

/// How long reaching a PostgreSQL store may take before it counts as unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

const CREATE_TABLE: &str = "CREATE TABLE IF NOT EXISTS ackbench_history (
    id bigserial PRIMARY KEY,
    added_at timestamptz NOT NULL DEFAULT now(),
    scenario text NOT NULL,
    commit text,
    record jsonb NOT NULL
)";

/// A history store, from `--store`.
#[derive(Debug, Clone, PartialEq)]
pub enum Store {
    Directory(PathBuf),
    Postgres(String),
}

impl Store {
    pub fn parse(text: &str) -> Store {
        match text.starts_with("postgres://") || text.starts_with("postgresql://") {
            true => Store::Postgres(text.to_string()),
            false => Store::Directory(PathBuf::from(text)),
        }
    }

    /// Adds `record` after the runs already kept; says where it went.
    pub async fn add(&self, record: &RunRecord) -> Result<String, String> {
        match self {
            Store::Directory(dir) => add_file(dir, record),
            Store::Postgres(url) => add_row(url, record).await,
        }
    }

    /// Every run kept, in the order they were added.
    pub async fn load(&self) -> Result<Vec<RunRecord>, String> {
        match self {
            Store::Directory(dir) => load_files(dir),
            Store::Postgres(url) => load_rows(url).await,
        }
    }
}

/// `run-NNNNNN.json` → NNNNNN.
fn sequence_of(name: &str) -> Option<u64> {
    name.strip_prefix("run-")?
        .strip_suffix(".json")?
        .parse()
        .ok()
}

fn numbered_files(dir: &Path) -> Result<Vec<(u64, PathBuf)>, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("--store {}: {e}", dir.display()))?;
    let mut files = Vec::new();
    for entry in entries {
        let path = entry
            .map_err(|e| format!("--store {}: {e}", dir.display()))?
            .path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if let Some(n) = sequence_of(name) {
            files.push((n, path));
        }
    }
    files.sort();
    Ok(files)
}

fn add_file(dir: &Path, record: &RunRecord) -> Result<String, String> {
    if dir.exists() && !dir.is_dir() {
        return Err(format!("--store {}: not a directory", dir.display()));
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("--store {}: {e}", dir.display()))?;
    let text = serde_json::to_string_pretty(record).map_err(|e| e.to_string())?;
    let mut next = numbered_files(dir)?.last().map_or(1, |(n, _)| n + 1);
    loop {
        let path = dir.join(format!("run-{next:06}.json"));
        // A file another process numbered the same meanwhile is never overwritten.
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(mut file) => {
                use std::io::Write;
                file.write_all(text.as_bytes())
                    .map_err(|e| format!("{}: {e}", path.display()))?;
                return Ok(path.display().to_string());
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => next += 1,
            Err(e) => return Err(format!("{}: {e}", path.display())),
        }
    }
}

fn load_files(dir: &Path) -> Result<Vec<RunRecord>, String> {
    if !dir.is_dir() {
        return Err(format!(
            "--store {}: no such directory (`ackbench history add` creates it)",
            dir.display()
        ));
    }
    numbered_files(dir)?
        .into_iter()
        .map(|(_, path)| {
            let text =
                std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            serde_json::from_str(&text)
                .map_err(|e| format!("{}: not a history record: {e}", path.display()))
        })
        .collect()
}

/// A connection to a PostgreSQL store whose table exists.
async fn connect(url: &str) -> Result<tokio_postgres::Client, String> {
    let shown = url.split('@').next_back().unwrap_or(url);
    let connecting = tokio_postgres::connect(url, NoTls);
    let (client, connection) = match tokio::time::timeout(CONNECT_TIMEOUT, connecting).await {
        Ok(Ok(x)) => x,
        Ok(Err(e)) => return Err(format!("--store {shown}: cannot connect: {e}")),
        Err(_) => {
            return Err(format!(
                "--store {shown}: no answer within {}s",
                CONNECT_TIMEOUT.as_secs()
            ))
        }
    };
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            eprintln!("ackbench: history store connection: {e}");
        }
    });
    client
        .batch_execute(CREATE_TABLE)
        .await
        .map_err(|e| format!("--store {shown}: creating table ackbench_history: {e}"))?;
    Ok(client)
}

async fn add_row(url: &str, record: &RunRecord) -> Result<String, String> {
    let client = connect(url).await?;
    let text = serde_json::to_string(record).map_err(|e| e.to_string())?;
    let row = client
        .query_one(
            "INSERT INTO ackbench_history (scenario, commit, record) \
             VALUES ($1, $2, ($3::text)::jsonb) RETURNING id",
            &[&record.scenario, &record.commit, &text],
        )
        .await
        .map_err(|e| format!("adding to ackbench_history: {e}"))?;
    let id: i64 = row.get(0);
    Ok(format!("ackbench_history row {id}"))
}

async fn load_rows(url: &str) -> Result<Vec<RunRecord>, String> {
    let client = connect(url).await?;
    let rows = client
        .query(
            "SELECT id, record::text FROM ackbench_history ORDER BY id",
            &[],
        )
        .await
        .map_err(|e| format!("reading ackbench_history: {e}"))?;
    rows.iter()
        .map(|row| {
            let (id, text): (i64, String) = (row.get(0), row.get(1));
            serde_json::from_str(&text)
                .map_err(|e| format!("ackbench_history row {id}: not a history record: {e}"))
        })
        .collect()
}
