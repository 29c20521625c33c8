//! `/metrics` right after start: every family is exported, at 0, with the
//! label values an alert would select, before anything has happened.

mod common;

use common::{test_db, unique_env, Server, ServerConfig};

/// The value of the sample named exactly `series` (name plus labels).
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[tokio::test]
async fn every_metric_is_exported_at_zero_right_after_start() {
    let db = test_db().await;
    let env = unique_env();
    let server = Server::start(ServerConfig::new(&db, &env)).await;
    let (status, text) = server.get("/metrics").await;
    assert_eq!(status, 200);

    let zero = [
        "pitboss_leases_held",
        "pitboss_tables_hosted",
        "pitboss_ws_connections",
        "pitboss_hands_completed_total",
        "pitboss_stale_boundary_writes_total",
        "pitboss_lease_renew_errors_total",
        "pitboss_lease_renew_benign_total",
        "pitboss_ws_frames_in_total",
        "pitboss_ws_frames_out_total",
        "pitboss_ws_slow_clients_dropped_total",
        "pitboss_leases_lost_total{reason=\"gone\"}",
        "pitboss_leases_lost_total{reason=\"foreign\"}",
        "pitboss_leases_lost_total{reason=\"deadline\"}",
        "pitboss_lease_acquires_total{result=\"acquired\"}",
        "pitboss_lease_acquires_total{result=\"owned_elsewhere\"}",
        "pitboss_lease_acquires_total{result=\"error\"}",
        "pitboss_lease_reasserts_total{result=\"reasserted\"}",
        "pitboss_lease_reasserts_total{result=\"refused\"}",
        "pitboss_lease_reasserts_total{result=\"contested\"}",
        "pitboss_lease_reasserts_total{result=\"error\"}",
        "pitboss_table_pauses_total{reason=\"redis_unreachable\"}",
        "pitboss_table_pauses_total{reason=\"store_unreachable\"}",
        "pitboss_table_pauses_total{reason=\"contested\"}",
        "pitboss_tables_paused",
        "pitboss_store_write_retries_total",
        "pitboss_liveness_errors_total",
        "pitboss_revive_candidates",
        "pitboss_ws_frames_rejected_total{code=\"rate_limited\"}",
        "pitboss_ws_frames_rejected_total{code=\"bad_json\"}",
        "pitboss_tables{state=\"open\"}",
        "pitboss_tables{state=\"frozen\"}",
        "pitboss_tables{state=\"closed\"}",
        "pitboss_action_to_broadcast_seconds_count",
        "pitboss_lease_renew_seconds_count",
    ];
    for series in zero {
        assert_eq!(
            sample(&text, series),
            Some(0.0),
            "{series} is not exported at 0:\n{text}"
        );
    }
    // Described, so operators see what each family means.
    for family in [
        "pitboss_leases_lost_total",
        "pitboss_lease_renew_seconds",
        "pitboss_ws_frames_rejected_total",
    ] {
        assert!(
            text.contains(&format!("# HELP {family} ")),
            "{family} has no HELP line:\n{text}"
        );
    }
    assert!(
        sample(&text, "pitboss_seconds_since_last_renew").is_some(),
        "pitboss_seconds_since_last_renew missing:\n{text}"
    );
}
