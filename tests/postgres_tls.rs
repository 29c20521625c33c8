//! pitboss reaches Postgres over TLS when its URL asks for it, and names
//! every connection after its instance id, so an operator's
//! `pg_stat_activity` (joined with `pg_stat_ssl`) shows who holds what and
//! whether it is encrypted.

mod common;
mod play;

use common::{test_db, unique_env, Server, ServerConfig};

fn with_sslmode(url: &str, mode: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}sslmode={mode}")
}

#[tokio::test]
async fn with_sslmode_require_every_connection_is_encrypted_and_named_after_the_instance() {
    let db = test_db().await;
    let env = unique_env();
    let admin = db.pool().await;
    for (mode, id, encrypted) in [
        ("require", "inst-tls", true),
        ("disable", "inst-plain", false),
    ] {
        let mut cfg = ServerConfig::new(&db, &env).with_instance(id);
        cfg.db_url = with_sslmode(&db.url, mode);
        let server = Server::start(cfg).await;
        // Exercise the pool: a table is created and hosted.
        let t = play::new_table(&server).await;
        assert_eq!(server.table(&t).await["hosted_here"], true);
        let ssl: Vec<bool> = sqlx::query_scalar(
            "SELECT s.ssl FROM pg_stat_activity a JOIN pg_stat_ssl s ON s.pid = a.pid \
             WHERE a.application_name = $1 AND a.datname = $2",
        )
        .bind(id)
        .bind(&db.name)
        .fetch_all(&admin)
        .await
        .expect("pg_stat_ssl");
        assert!(!ssl.is_empty(), "{id} has connections named after it");
        assert!(
            ssl.iter().all(|s| *s == encrypted),
            "sslmode={mode}: every connection of {id} has ssl = {encrypted}: {ssl:?}"
        );
    }
}
