//! `ackbench-broker`: reads its configuration from the environment and serves until Ctrl-C or
//! SIGTERM.

use std::io::IsTerminal;

use ackbench_broker::{Broker, Config};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::prelude::*;

/// glibc's malloc cost about a fifth of the broker's CPU under load (perf: `_int_malloc`,
/// `malloc_consolidate`, `cfree`); mimalloc's thread-local free lists keep small, short-lived
/// request buffers cheap.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let config = match Config::from_env() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("ackbench-broker: {e}");
            std::process::exit(2);
        }
    };
    // One worker thread runs a single-threaded runtime: no hand-offs between threads (on a
    // small machine their wake-ups cost more CPU than the requests), the rest left to PostgreSQL.
    let runtime = if config.worker_threads == 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(config.worker_threads)
            .enable_all()
            .build()
    };
    let runtime = runtime.unwrap_or_else(|e| {
        eprintln!("ackbench-broker: cannot start the runtime: {e}");
        std::process::exit(1);
    });
    runtime.block_on(serve(config));
}

async fn serve(config: Config) {
    let filter: Targets = std::env::var("RUST_LOG")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| Targets::new().with_default(tracing::Level::INFO));
    // Colour only for a person at a terminal: the load generator captures stderr into files.
    let ansi = std::io::stderr().is_terminal();
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_ansi(ansi)
                .with_writer(std::io::stderr),
        )
        .with(filter)
        .init();
    let broker = match Broker::start(config).await {
        Ok(b) => b,
        Err(e) => {
            eprintln!("ackbench-broker: {e}");
            std::process::exit(1);
        }
    };
    wait_for_stop_signal().await;
    tracing::info!("stopping");
    broker.shutdown().await;
}

async fn wait_for_stop_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("install SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
