//! Starting, configuring and tearing down real PostgreSQL clusters.

use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use throwaway_pg::{shared, Cluster, ErrorKind};

fn accepts_connections(port: u16) -> bool {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_ok()
}

fn eventually(timeout: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while !check() {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    true
}

#[test]
fn defaults_are_production_like() {
    let cluster = shared();
    assert_eq!(cluster.psql("postgres", "SELECT 1").unwrap(), "1");
    assert_eq!(cluster.psql("postgres", "SHOW fsync").unwrap(), "on");
    assert_eq!(
        cluster.psql("postgres", "SHOW synchronous_commit").unwrap(),
        "on"
    );
    assert_eq!(
        cluster.psql("postgres", "SHOW max_connections").unwrap(),
        "200"
    );
    assert_eq!(
        cluster.psql("postgres", "SHOW listen_addresses").unwrap(),
        "127.0.0.1"
    );
    assert_eq!(cluster.host(), "127.0.0.1");
    assert!(cluster.version().starts_with(|c: char| c.is_ascii_digit()));
    assert!(cluster.bindir().join("postgres").is_file());
    assert!(cluster.data_dir().join("PG_VERSION").is_file());
}

#[test]
fn created_database_has_pg_stat_statements() {
    let cluster = shared();
    let url = cluster.create_database("pgss_check").unwrap();
    assert_eq!(
        url,
        format!(
            "postgres://postgres@127.0.0.1:{}/pgss_check",
            cluster.port()
        )
    );
    let preload = cluster
        .psql("pgss_check", "SHOW shared_preload_libraries")
        .unwrap();
    assert!(preload.contains("pg_stat_statements"), "{preload}");
    assert_eq!(
        cluster
            .psql("pgss_check", "SHOW pg_stat_statements.track")
            .unwrap(),
        "all"
    );
    cluster
        .psql("pgss_check", "SELECT 42 AS marker_for_pgss")
        .unwrap();
    let seen = cluster
        .psql(
            "pgss_check",
            "SELECT count(*) FROM pg_stat_statements WHERE query LIKE '%marker_for_pgss%'",
        )
        .unwrap();
    assert_ne!(seen, "0");
}

#[test]
fn invalid_input_is_rejected() {
    let cluster = shared();
    let err = cluster.create_database("Bad-Name").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidInput);
    let err = cluster
        .psql("postgres", "SELECT * FROM no_such_table")
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Command);
    assert!(err.to_string().contains("no_such_table"), "{err}");
}

#[test]
fn settings_override_defaults() {
    let cluster = Cluster::builder()
        .setting("work_mem", "8MB")
        .setting("fsync", "off")
        .setting("synchronous_commit", "off")
        .start()
        .unwrap();
    assert_eq!(cluster.psql("postgres", "SHOW work_mem").unwrap(), "8MB");
    assert_eq!(cluster.psql("postgres", "SHOW fsync").unwrap(), "off");
    assert_eq!(
        cluster.psql("postgres", "SHOW synchronous_commit").unwrap(),
        "off"
    );
    cluster.stop().unwrap();
}

#[test]
fn bad_setting_fails_with_server_log() {
    let err = Cluster::builder()
        .setting("shared_buffers", "not-a-size")
        .start()
        .unwrap_err();
    let message = err.to_string();
    assert!(message.contains("shared_buffers"), "{message}");
    assert!(message.contains("last lines of"), "{message}");
}

#[test]
fn drop_stops_server_and_removes_data() {
    let cluster = Cluster::start().unwrap();
    let (temp_dir, port) = (cluster.temp_dir().to_path_buf(), cluster.port());
    assert!(accepts_connections(port));
    drop(cluster);
    assert!(!temp_dir.exists(), "{} still exists", temp_dir.display());
    assert!(!accepts_connections(port));
}

#[test]
fn panic_while_holding_cluster_cleans_up() {
    let (sender, receiver) = std::sync::mpsc::channel::<(PathBuf, u16)>();
    let result = std::thread::spawn(move || {
        let cluster = Cluster::start().unwrap();
        sender
            .send((cluster.temp_dir().to_path_buf(), cluster.port()))
            .unwrap();
        panic!("deliberate panic while holding a cluster");
    })
    .join();
    assert!(result.is_err());
    let (temp_dir, port) = receiver.recv().unwrap();
    assert!(!temp_dir.exists(), "{} still exists", temp_dir.display());
    assert!(eventually(Duration::from_secs(5), || !accepts_connections(
        port
    )));
}

#[test]
fn pinned_port_in_use_fails_with_clear_error() {
    let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    let err = Cluster::builder()
        .setting("port", port.to_string())
        .start()
        .unwrap_err();
    let message = err.to_string();
    assert!(message.contains("PostgreSQL failed to start"), "{message}");
    assert!(message.contains("already in use"), "{message}");
}
