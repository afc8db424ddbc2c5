//! `pgmq-install`: applies PGMQ's SQL, as the `pgmq` crate embeds it, with the crate's own
//! installer, to the database `DATABASE_URL` names (an environment variable, so that a password
//! in the URL never shows in a process listing). Exit 0 when installed, 1 with the reason on
//! standard error otherwise, 2 without `DATABASE_URL`.

use std::process::ExitCode;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let Ok(url) = std::env::var("DATABASE_URL") else {
        eprintln!("pgmq-install: set DATABASE_URL to the database to install PGMQ into");
        return ExitCode::from(2);
    };
    match install(&url).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pgmq-install: {e}");
            ExitCode::from(1)
        }
    }
}

/// One connection (the crate's own URL helper insists on a password), the embedded SQL applied.
async fn install(url: &str) -> Result<(), String> {
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect(url)
        .await
        .map_err(|e| format!("cannot connect: {e}"))?;
    let installed = pgmq::install::install_sql_from_embedded(&pool)
        .await
        .map_err(|e| format!("installing PGMQ's SQL failed: {e}"));
    pool.close().await;
    installed
}
