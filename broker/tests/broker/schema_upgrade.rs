//! The SQL as a definition (`sql/README.md`): a database at the numbered layout of commit
//! 4fa2920 (the fixture of `common::legacy`) upgrades in place to exactly the schema a fresh
//! database gets, with the procedures it already had; the migrator applies nothing twice,
//! applies a changed procedure file again, and refuses a changed schema migration.

use std::collections::BTreeSet;

use crate::common::{empty_database, legacy};
use ackbench_broker::storage::migrations::{
    self, DEFINITIONS, DROPPED, LEGACY_BASELINE, LEGACY_LAYOUT, SCHEMA_MIGRATIONS,
};
use ackbench_broker::{Broker, Config};
use tokio_postgres::Client;
use xxhash_rust::xxh3::xxh3_64;

/// Everything of schema `queen` a broker relies on, one line per fact, sorted: every function
/// (its `pg_get_functiondef` and its settings), every column (type, nullability, default,
/// storage, position among the live columns), constraint, index definition, relation kind and
/// reloptions, and type. The migrator's bookkeeping tables are left out (compared on their own).
const CATALOG: &str = r#"
SELECT 'function ' || p.oid::regprocedure::text || E'\n' || pg_get_functiondef(p.oid)
       || E'\nconfig ' || coalesce(array_to_string(p.proconfig, ','), '')
FROM pg_proc p WHERE p.pronamespace = 'queen'::regnamespace
UNION ALL
SELECT format('column %s.%s #%s %s %s default %s storage %s', c.relname, a.attname,
              row_number() OVER (PARTITION BY c.oid ORDER BY a.attnum),
              format_type(a.atttypid, a.atttypmod),
              CASE WHEN a.attnotnull THEN 'not null' ELSE 'null' END,
              pg_get_expr(d.adbin, d.adrelid), a.attstorage)
FROM pg_class c
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
LEFT JOIN pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum
WHERE c.relnamespace = 'queen'::regnamespace AND c.relkind IN ('r', 'p')
UNION ALL
SELECT format('constraint %s.%s %s', conrelid::regclass, conname, pg_get_constraintdef(oid))
FROM pg_constraint WHERE connamespace = 'queen'::regnamespace
UNION ALL
SELECT 'index ' || indexdef FROM pg_indexes WHERE schemaname = 'queen'
UNION ALL
SELECT format('relation %s kind %s options %s', c.relname, c.relkind,
              coalesce(array_to_string(c.reloptions, ','), ''))
FROM pg_class c WHERE c.relnamespace = 'queen'::regnamespace
UNION ALL
SELECT format('type %s %s', t.typname, t.typtype)
FROM pg_type t WHERE t.typnamespace = 'queen'::regnamespace
"#;

async fn connect(url: &str) -> Client {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(conn);
    client
}

async fn catalog(db: &Client) -> Vec<String> {
    let mut lines: Vec<String> = db
        .query(CATALOG, &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get::<_, String>(0))
        .filter(|l| !l.contains("schema_migrations") && !l.contains("schema_definitions"))
        .collect();
    lines.sort();
    lines
}

type Bookkeeping = (Vec<(i32, String, i64)>, Vec<(String, i64)>);

async fn bookkeeping(db: &Client) -> Bookkeeping {
    let schema = db
        .query(
            "SELECT version, name, checksum FROM queen.schema_migrations ORDER BY version",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    let definitions = db
        .query(
            "SELECT file, checksum FROM queen.schema_definitions ORDER BY file",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    (schema, definitions)
}

/// Equal catalogs, or a panic naming the first fact one side has and the other lacks.
fn assert_same(a_name: &str, a: &[String], b_name: &str, b: &[String]) {
    let (sa, sb): (BTreeSet<&String>, BTreeSet<&String>) = (a.iter().collect(), b.iter().collect());
    if let Some(only) = sa.difference(&sb).next() {
        panic!("only the {a_name} database has:\n{only}");
    }
    if let Some(only) = sb.difference(&sa).next() {
        panic!("only the {b_name} database has:\n{only}");
    }
    assert_eq!(a, b, "{a_name} and {b_name} differ in multiplicity");
}

/// Procedures whose definition changed after the legacy layout (the numbered files of
/// 4fa2920), by their catalog line's first line: an upgrade gives them their new form.
/// - `log_cursor_advance_v1`: a one-row UPDATE again, instead of a call of the set form.
/// - `log_dedup_probe_v1`: judges a push none of whose keys is stored by the index alone.
/// - `log_push_multi_v2`: reads each queue's options once, and skips the maxSize lock and
///   check for queues without one.
const CHANGED_SINCE_LEGACY: &[&str] = &[
    "function queen.log_cursor_advance_v1(uuid,text,bigint,boolean)",
    "function queen.log_dedup_probe_v1(uuid,bigint,integer,bytea)",
    "function queen.log_push_multi_v2(uuid[],text[],text[],bytea[],bytea[])",
];

/// What was added after the legacy layout (schema migrations after its baseline, and the
/// procedures that use them), as a word of each catalog line that belongs to it: the peer key
/// (`002_peer_secret.sql`, `peers.sql`).
const ADDED_SINCE_LEGACY: &[&str] = &["peer_secret"];

/// `catalog` without the lines of what was added after the legacy layout.
fn without_added(catalog: &[String]) -> Vec<String> {
    let added = |l: &String| ADDED_SINCE_LEGACY.iter().any(|w| l.contains(w));
    catalog.iter().filter(|l| !added(l)).cloned().collect()
}

/// The catalog lines of `catalog` apart from those of the procedures changed since the legacy
/// layout, and those lines (in catalog order).
fn split_changed(catalog: &[String]) -> (Vec<String>, Vec<String>) {
    catalog.iter().cloned().partition(|l| {
        !CHANGED_SINCE_LEGACY
            .iter()
            .any(|f| l.lines().next() == Some(*f))
    })
}

fn every_file() -> Vec<&'static str> {
    std::iter::once(DROPPED.file)
        .chain(DEFINITIONS.iter().map(|d| d.file))
        .collect()
}

async fn legacy_database(prefix: &str, upto: usize) -> (String, Client) {
    let (url, _) = empty_database(prefix);
    let mut db = connect(&url).await;
    legacy::apply(&mut db, upto).await;
    (url, db)
}

#[test]
fn the_fixture_is_the_legacy_layout() {
    let files = legacy::files();
    let found: Vec<(i32, String, u64)> = files
        .iter()
        .map(|(name, text)| {
            (
                name[..3].parse().unwrap(),
                name.clone(),
                xxh3_64(text.as_bytes()),
            )
        })
        .collect();
    let expected: Vec<(i32, String, u64)> = LEGACY_LAYOUT
        .iter()
        .map(|(v, n, c)| (*v, n.to_string(), *c))
        .collect();
    assert_eq!(found, expected);
}

/// Every schema migration's name, in order.
fn every_schema_migration() -> Vec<&'static str> {
    SCHEMA_MIGRATIONS.iter().map(|m| m.name).collect()
}

/// The schema migrations a legacy database runs after it is baselined.
fn after_the_baseline() -> Vec<&'static str> {
    let later = SCHEMA_MIGRATIONS
        .iter()
        .filter(|m| m.version > LEGACY_BASELINE);
    later.map(|m| m.name).collect()
}

#[tokio::test]
async fn an_upgraded_database_has_the_schema_and_procedures_of_a_fresh_one() {
    let (_, mut old) = legacy_database("upgrade_legacy", LEGACY_LAYOUT.len()).await;
    let before = catalog(&old).await;
    let applied = migrations::apply(&mut old).await.expect("the upgrade");
    assert!(applied.baselined, "{applied:?}");
    assert_eq!(applied.schema, after_the_baseline(), "{applied:?}");
    assert_eq!(applied.definitions, every_file());
    let upgraded = catalog(&old).await;

    let (url, _) = empty_database("upgrade_fresh");
    let mut fresh = connect(&url).await;
    let applied = migrations::apply(&mut fresh)
        .await
        .expect("a fresh migration");
    assert!(!applied.baselined, "{applied:?}");
    assert_eq!(applied.schema, every_schema_migration());
    assert_eq!(applied.definitions, every_file());
    let new = catalog(&fresh).await;

    // What a fresh database gets is what the upgrade gives, and both are what the numbered
    // layout had (same procedures, SET clauses, columns, constraints, indexes) but for the
    // procedures changed since, each of which the legacy layout had in another form.
    assert_same("fresh", &new, "upgraded", &upgraded);
    let (new_kept, new_changed) = split_changed(&without_added(&new));
    assert!(
        new.len() > new_kept.len() + new_changed.len(),
        "the additions are in the fresh database"
    );
    let (before_kept, before_changed) = split_changed(&before);
    assert_same("fresh", &new_kept, "legacy", &before_kept);
    assert_eq!(
        new_changed.len(),
        CHANGED_SINCE_LEGACY.len(),
        "{new_changed:?}"
    );
    assert_eq!(
        before_changed.len(),
        CHANGED_SINCE_LEGACY.len(),
        "{before_changed:?}"
    );
    for (fresh, legacy) in new_changed.iter().zip(&before_changed) {
        assert_ne!(
            fresh, legacy,
            "listed as changed since the legacy layout, but the same"
        );
    }
    let functions = new.iter().filter(|l| l.starts_with("function ")).count();
    let generic = new
        .iter()
        .filter(|l| l.ends_with("\nconfig plan_cache_mode=force_generic_plan"))
        .count();
    assert_eq!((functions, generic), (47, 6));
    assert!(new
        .iter()
        .any(|l| l.starts_with("index CREATE INDEX log_txns_dedup_idx")));

    assert_eq!(bookkeeping(&fresh).await, bookkeeping(&old).await);
    let (schema, _) = bookkeeping(&fresh).await;
    assert_eq!(
        schema,
        SCHEMA_MIGRATIONS
            .iter()
            .map(|m| (
                m.version,
                m.name.to_string(),
                xxh3_64(m.sql.as_bytes()) as i64
            ))
            .collect::<Vec<_>>()
    );

    // A second run applies nothing, on either.
    for db in [&mut old, &mut fresh] {
        let again = migrations::apply(db).await.unwrap();
        assert!(again.is_empty(), "{again:?}");
    }
}

#[tokio::test]
async fn a_changed_procedure_file_is_applied_again() {
    let (url, _) = empty_database("repeatable");
    let mut db = connect(&url).await;
    migrations::apply(&mut db).await.unwrap();
    let config = "SELECT coalesce(array_to_string(proconfig, ','), '') FROM pg_proc \
                  WHERE oid = 'queen.log_pop_multi_v3'::regproc";
    // The database drifts, and pop.sql's text "changes" (its recorded checksum no longer
    // matches): the file is applied again, and only it.
    db.batch_execute(
        "ALTER FUNCTION queen.log_pop_multi_v3 RESET ALL;
         UPDATE queen.schema_definitions SET checksum = checksum + 1 WHERE file = 'pop.sql'",
    )
    .await
    .unwrap();
    let drifted: String = db.query_one(config, &[]).await.unwrap().get(0);
    assert_eq!(drifted, "");
    let applied = migrations::apply(&mut db).await.unwrap();
    assert_eq!(applied.definitions, vec!["pop.sql"], "{applied:?}");
    assert!(!applied.baselined && applied.schema.is_empty());
    let restored: String = db.query_one(config, &[]).await.unwrap().get(0);
    assert_eq!(restored, "plan_cache_mode=force_generic_plan");

    // A changed drop list is applied, then every procedure file after it.
    db.batch_execute(
        "UPDATE queen.schema_definitions SET checksum = checksum + 1 WHERE file = 'dropped.sql'",
    )
    .await
    .unwrap();
    let applied = migrations::apply(&mut db).await.unwrap();
    assert_eq!(applied.definitions, every_file());
    assert!(migrations::apply(&mut db).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_changed_schema_migration_is_refused() {
    let (url, _) = empty_database("immutable");
    let mut db = connect(&url).await;
    migrations::apply(&mut db).await.unwrap();
    db.batch_execute(
        "UPDATE queen.schema_migrations SET checksum = checksum + 1 WHERE version = 1;
         UPDATE queen.schema_definitions SET checksum = 0 WHERE file = 'ack.sql'",
    )
    .await
    .unwrap();
    let err = migrations::apply(&mut db).await.unwrap_err();
    assert!(
        err.contains("001_log_engine.sql") && err.contains("different text"),
        "{err}"
    );
    // Refused as a whole: nothing after the refusal was applied.
    let ack: i64 = db
        .query_one(
            "SELECT checksum FROM queen.schema_definitions WHERE file = 'ack.sql'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(ack, 0);
}

#[tokio::test]
async fn a_database_short_of_the_last_numbered_migration_is_refused() {
    let (_, mut db) = legacy_database("legacy_short", 17).await;
    let err = migrations::apply(&mut db).await.unwrap_err();
    assert!(err.contains("017_queue_resources.sql"), "{err}");
    assert!(err.contains("4fa2920"), "{err}");
    let rows: i64 = db
        .query_one("SELECT count(*) FROM queen.schema_migrations", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 17);
}

#[tokio::test]
async fn brokers_starting_at_once_upgrade_a_legacy_database_once() {
    let (url, db) = legacy_database("upgrade_race", LEGACY_LAYOUT.len()).await;
    let database: tokio_postgres::Config = url.parse().unwrap();
    let (a, b) = tokio::join!(
        Broker::start(Config::for_database(database.clone())),
        Broker::start(Config::for_database(database.clone()))
    );
    let (a, b) = (a.expect("first broker"), b.expect("second broker"));
    let (schema, definitions) = bookkeeping(&db).await;
    let versions: Vec<(i32, String)> = schema.into_iter().map(|(v, n, _)| (v, n)).collect();
    let expected: Vec<(i32, String)> = SCHEMA_MIGRATIONS
        .iter()
        .map(|m| (m.version, m.name.to_string()))
        .collect();
    assert_eq!(versions, expected);
    let mut files: Vec<String> = definitions.into_iter().map(|(f, _)| f).collect();
    let mut expected: Vec<String> = every_file().iter().map(|f| f.to_string()).collect();
    files.sort();
    expected.sort();
    assert_eq!(files, expected);
    for b in [a, b] {
        b.shutdown().await;
    }
}

/// Makes `tests/fixtures/layout-021.lz4` from the numbered files of commit 4fa2920 (see
/// `common::legacy` for the steps) and prints their `LEGACY_LAYOUT` rows.
#[test]
#[ignore = "run once by hand to make the fixture"]
fn write_layout_021_fixture() {
    let dir = std::env::var("LAYOUT_021_DIR").expect("LAYOUT_021_DIR: the sql/ of 4fa2920");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".sql") && n.as_bytes()[0].is_ascii_digit())
        .collect();
    names.sort();
    let files: Vec<(String, String)> = names
        .iter()
        .map(|n| {
            (
                n.clone(),
                std::fs::read_to_string(format!("{dir}/{n}")).unwrap(),
            )
        })
        .collect();
    let expected: Vec<&str> = LEGACY_LAYOUT.iter().map(|(_, n, _)| *n).collect();
    assert_eq!(names, expected);
    for (name, text) in &files {
        println!(
            "    ({}, \"{name}\", 0x{:016x}),",
            name[..3].parse::<i32>().unwrap(),
            xxh3_64(text.as_bytes())
        );
    }
    let packed = legacy::pack(&files);
    assert_eq!(legacy::unpack(&packed), files);
    let out = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/layout-021.lz4");
    std::fs::write(out, packed).unwrap();
}
