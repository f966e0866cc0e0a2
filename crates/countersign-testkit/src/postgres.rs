//! A PostgreSQL schema of a test's own on the shared test server, and its removal: every
//! PostgreSQL suite isolates itself this way, so two runs (or two tests) never see each other's
//! rows.

/// A schema name no other test or run uses: `PREFIX_PID_NANOS`.
pub fn unique_schema(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{prefix}_{}_{nanos:08x}", std::process::id())
}

/// A plain client of the server at `url`, its connection driven on the current runtime.
///
/// # Panics
/// When the server cannot be reached: the test cannot run.
pub async fn client(url: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connect to the test PostgreSQL");
    tokio::spawn(conn);
    client
}

/// Drops `schema` and everything in it.
///
/// # Panics
/// When the server cannot be reached or refuses.
pub async fn drop_schema(url: &str, schema: &str) {
    client(url)
        .await
        .batch_execute(&format!("DROP SCHEMA \"{schema}\" CASCADE"))
        .await
        .expect("drop schema");
}
