//! The numbered layout that preceded `sql/schema` + `sql/procedures`: the 21 files
//! `sql/001_schema.sql` .. `sql/021_pop_claim_direct.sql` of commit 4fa2920, and their
//! migrator, so that tests can build a database as a broker of that commit left it.
//!
//! The files are kept as ONE compressed fixture, `tests/fixtures/layout-021.lz4`, so that their
//! SQL is not greppable in the tree (the live definition of a procedure is found with one grep
//! in `sql/`). Format: `lz4_flex::compress_prepend_size` of the concatenation, per file in
//! order, of its name (UTF-8), one NUL byte, the text's length in bytes (u32 little-endian) and
//! the text (UTF-8).
//!
//! How it was made (once): `git archive 4fa2920 sql | tar -x -C /tmp/layout-021`, then
//! `LAYOUT_021_DIR=/tmp/layout-021/sql cargo test -p ackbench-broker --test broker --
//! --ignored write_layout_021_fixture` (in `schema_upgrade.rs`), which packs the 21 files and
//! checks them against `LEGACY_LAYOUT`.

use ackbench_broker::storage::migrations::LEGACY_LAYOUT;
use xxhash_rust::xxh3::xxh3_64;

pub const FIXTURE: &[u8] = include_bytes!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/layout-021.lz4"
));

/// Packs `(name, text)` pairs in the fixture's format.
pub fn pack(files: &[(String, String)]) -> Vec<u8> {
    let mut raw = Vec::new();
    for (name, text) in files {
        raw.extend_from_slice(name.as_bytes());
        raw.push(0);
        raw.extend_from_slice(&(text.len() as u32).to_le_bytes());
        raw.extend_from_slice(text.as_bytes());
    }
    lz4_flex::compress_prepend_size(&raw)
}

/// The `(name, text)` pairs of a fixture.
pub fn unpack(fixture: &[u8]) -> Vec<(String, String)> {
    let raw = lz4_flex::decompress_size_prepended(fixture).expect("an lz4 fixture");
    let mut files = Vec::new();
    let mut rest = &raw[..];
    while !rest.is_empty() {
        let nul = rest
            .iter()
            .position(|b| *b == 0)
            .expect("a NUL after the name");
        let name = String::from_utf8(rest[..nul].to_vec()).unwrap();
        let len = u32::from_le_bytes(rest[nul + 1..nul + 5].try_into().unwrap()) as usize;
        let text = String::from_utf8(rest[nul + 5..nul + 5 + len].to_vec()).unwrap();
        files.push((name, text));
        rest = &rest[nul + 5 + len..];
    }
    files
}

/// The 21 files of the legacy layout, in order.
pub fn files() -> Vec<(String, String)> {
    unpack(FIXTURE)
}

/// Applies the first `upto` legacy files as the migrator of commit 4fa2920 did: one
/// transaction under its advisory lock, its bookkeeping table, each file's text then its row
/// (version, name, xxh3_64 checksum).
pub async fn apply(client: &mut tokio_postgres::Client, upto: usize) {
    let tx = client.transaction().await.unwrap();
    tx.execute(
        "SELECT pg_advisory_xact_lock($1)",
        &[&0x5155_4545_4e5f_4d49_i64],
    )
    .await
    .unwrap();
    tx.batch_execute(
        "CREATE SCHEMA IF NOT EXISTS queen;
         CREATE TABLE IF NOT EXISTS queen.schema_migrations (
             version integer PRIMARY KEY,
             name text NOT NULL,
             checksum bigint NOT NULL,
             applied_at timestamptz NOT NULL DEFAULT now())",
    )
    .await
    .unwrap();
    for (name, text) in files().into_iter().take(upto) {
        let version: i32 = name[..3].parse().unwrap();
        tx.batch_execute(&text)
            .await
            .unwrap_or_else(|e| panic!("legacy {name}: {e:?}"));
        let checksum = xxh3_64(text.as_bytes()) as i64;
        tx.execute(
            "INSERT INTO queen.schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
            &[&version, &name, &checksum],
        )
        .await
        .unwrap();
    }
    tx.commit().await.unwrap();
}

/// [`apply`] of all 21 files from synchronous code (the harness's `fresh_database`), on a
/// thread of its own with its own runtime, so that it works inside a test's runtime too.
pub fn apply_blocking(url: &str) {
    let url = url.to_string();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let (mut client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                .await
                .expect("connect");
            let conn = tokio::spawn(conn);
            apply(&mut client, LEGACY_LAYOUT.len()).await;
            let rows: i64 = client
                .query_one("SELECT count(*) FROM queen.schema_migrations", &[])
                .await
                .unwrap()
                .get(0);
            assert_eq!(rows as usize, LEGACY_LAYOUT.len());
            drop(client);
            let _ = conn.await;
        })
    })
    .join()
    .expect("the legacy layout applies");
}
