//! Every metric pitboss exports, described and set to 0 when the process
//! starts, so `/metrics` lists every family (and every known label value)
//! before anything happens, and an alert on `increase()` sees the first
//! event of a process instead of missing it.

use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};

use crate::types::{ErrorCode, PauseReason, TableState};

pub const LEASES_HELD: &str = "pitboss_leases_held";
pub const TABLES_HOSTED: &str = "pitboss_tables_hosted";
pub const TABLES: &str = "pitboss_tables";
pub const LEASE_ACQUIRES: &str = "pitboss_lease_acquires_total";
pub const LEASES_LOST: &str = "pitboss_leases_lost_total";
pub const LEASE_RENEW_SECONDS: &str = "pitboss_lease_renew_seconds";
pub const LEASE_RENEW_ERRORS: &str = "pitboss_lease_renew_errors_total";
pub const LEASE_RENEW_BENIGN: &str = "pitboss_lease_renew_benign_total";
pub const SECONDS_SINCE_LAST_RENEW: &str = "pitboss_seconds_since_last_renew";
pub const STALE_BOUNDARY_WRITES: &str = "pitboss_stale_boundary_writes_total";
pub const HANDS_COMPLETED: &str = "pitboss_hands_completed_total";
pub const ACTION_TO_BROADCAST_SECONDS: &str = "pitboss_action_to_broadcast_seconds";
pub const WS_CONNECTIONS: &str = "pitboss_ws_connections";
pub const WS_FRAMES_IN: &str = "pitboss_ws_frames_in_total";
pub const WS_FRAMES_OUT: &str = "pitboss_ws_frames_out_total";
pub const WS_FRAMES_REJECTED: &str = "pitboss_ws_frames_rejected_total";
pub const WS_SLOW_CLIENTS_DROPPED: &str = "pitboss_ws_slow_clients_dropped_total";
pub const LEASE_REASSERTS: &str = "pitboss_lease_reasserts_total";
pub const TABLE_PAUSES: &str = "pitboss_table_pauses_total";
pub const TABLES_PAUSED: &str = "pitboss_tables_paused";
pub const STORE_WRITE_RETRIES: &str = "pitboss_store_write_retries_total";
pub const LIVENESS_ERRORS: &str = "pitboss_liveness_errors_total";
pub const REVIVE_CANDIDATES: &str = "pitboss_revive_candidates";
pub const REVIVE_SCANS: &str = "pitboss_revive_scans_total";
pub const REVIVE_SCAN_ROWS: &str = "pitboss_revive_scan_rows_total";
pub const REVIVE_SCAN_REDIS_COMMANDS: &str = "pitboss_revive_scan_redis_commands_total";
pub const LEASES_RENEWED: &str = "pitboss_leases_renewed_total";
pub const FENCE_CHECK_ROWS: &str = "pitboss_fence_check_rows_total";
pub const RELAYS_OPEN: &str = "pitboss_relays_open";
pub const RELAY_OWNER_CHANGES: &str = "pitboss_relay_owner_changes_total";
pub const RELAYS_REFUSED: &str = "pitboss_relays_refused_total";
pub const JOURNAL_ENTRIES: &str = "pitboss_journal_entries_total";
pub const JOURNAL_STALE_REFUSED: &str = "pitboss_journal_stale_refused_total";
/// Tables hosted with their hand (or game) in progress rebuilt from the
/// journal, by `result`: `resumed`, or `failed` (the journal did not replay
/// and the table was hosted at its last boundary).
pub const JOURNAL_REPLAYS: &str = "pitboss_journal_replays_total";
pub const REPLAY_RESULTS: &[&str] = &["resumed", "failed"];
pub const JOURNAL_BATCH_SIZE: &str = "pitboss_journal_batch_size";
pub const JOURNAL_COMMIT_SECONDS: &str = "pitboss_journal_commit_seconds";

/// `result` of [`LEASE_ACQUIRES`].
pub const ACQUIRE_RESULTS: &[&str] = &["acquired", "owned_elsewhere", "error"];
/// `reason` of [`LEASES_LOST`].
pub const LOSS_REASONS: &[&str] = &["gone", "foreign", "deadline"];
/// `result` of [`LEASE_REASSERTS`]: the owner carried on, was refused (and
/// froze its copy), found another holder in Redis that Postgres does not
/// know yet (and waits), or could not reach Redis or Postgres (and retries).
pub const REASSERT_RESULTS: &[&str] = &["reasserted", "refused", "contested", "error"];

/// Describes every metric and exports each at 0. Call once, after the
/// recorder is installed.
pub fn register() {
    describe_gauge!(LEASES_HELD, "leases this instance holds and renews");
    describe_gauge!(TABLES_HOSTED, "table actors running in this process");
    describe_gauge!(
        TABLES,
        "tables of this environment in each state, read from Postgres at scrape time"
    );
    describe_counter!(LEASE_ACQUIRES, "lease acquisitions by result");
    describe_counter!(LEASES_LOST, "leases of hosted tables that were lost");
    describe_histogram!(
        LEASE_RENEW_SECONDS,
        Unit::Seconds,
        "round trip of one batched renew of all leases"
    );
    describe_counter!(LEASE_RENEW_ERRORS, "batched renews that failed");
    describe_counter!(
        LEASE_RENEW_BENIGN,
        "lost renews of tables already released (expected)"
    );
    describe_gauge!(
        SECONDS_SINCE_LAST_RENEW,
        Unit::Seconds,
        "seconds since the last renew Redis confirmed"
    );
    describe_counter!(
        STALE_BOUNDARY_WRITES,
        "writes refused because a newer owner holds the table"
    );
    describe_counter!(HANDS_COMPLETED, "hands written to Postgres");
    describe_histogram!(
        ACTION_TO_BROADCAST_SECONDS,
        Unit::Seconds,
        "from reading an act frame to its events having been sent"
    );
    describe_counter!(
        LEASE_REASSERTS,
        "leases found gone, foreign or unproven that their owner took again, by result"
    );
    describe_counter!(
        TABLE_PAUSES,
        "tables that stopped dealing for a while, by reason"
    );
    describe_gauge!(TABLES_PAUSED, "tables of this process paused now");
    describe_counter!(
        STORE_WRITE_RETRIES,
        "boundary writes tried again after a transient Postgres error"
    );
    describe_counter!(
        LIVENESS_ERRORS,
        "beats whose liveness record in Postgres failed"
    );
    describe_gauge!(
        REVIVE_CANDIDATES,
        "tables the last revive scan found that may need an owner (released by a drain, left by an earlier process of this id, or owned by an instance unseen for a TTL)"
    );
    describe_counter!(REVIVE_SCANS, "revive scans run");
    describe_counter!(
        REVIVE_SCAN_ROWS,
        "rows the revive scans read from Postgres (their candidates)"
    );
    describe_counter!(
        REVIVE_SCAN_REDIS_COMMANDS,
        "Redis commands the revive scans sent (one GET per candidate)"
    );
    describe_counter!(
        LEASES_RENEWED,
        "leases the batched renews covered (each held lease, every TTL/3)"
    );
    describe_counter!(
        FENCE_CHECK_ROWS,
        "rows the heartbeat's fence checks read from Postgres (one per hosted table)"
    );
    describe_gauge!(
        RELAYS_OPEN,
        "relays open from this instance's clients to tables hosted elsewhere"
    );
    describe_counter!(
        RELAY_OWNER_CHANGES,
        "relayed tables whose owner went away, followed to the new one"
    );
    describe_counter!(
        RELAYS_REFUSED,
        "relay connections refused for a missing, forged, misaddressed or stale credential"
    );
    describe_counter!(
        JOURNAL_ENTRIES,
        "commands committed to the journal (each before its events were told)"
    );
    describe_counter!(
        JOURNAL_STALE_REFUSED,
        "journal entries refused because a newer owner holds the table (never told)"
    );
    describe_counter!(
        JOURNAL_REPLAYS,
        "tables hosted with the hand or game in progress replayed from the journal, by result"
    );
    describe_histogram!(
        JOURNAL_BATCH_SIZE,
        "entries in one group commit of the journal"
    );
    describe_histogram!(
        JOURNAL_COMMIT_SECONDS,
        Unit::Seconds,
        "from a table handing a command to the journal to its commit"
    );
    describe_gauge!(WS_CONNECTIONS, "open WebSocket connections");
    describe_counter!(
        WS_FRAMES_IN,
        "messages received: text, binary, ping and reassembled fragments"
    );
    describe_counter!(WS_FRAMES_OUT, "frames sent");
    describe_counter!(WS_FRAMES_REJECTED, "frames answered with an error, by code");
    describe_counter!(
        WS_SLOW_CLIENTS_DROPPED,
        "subscriptions dropped and joins refused for connections too far behind"
    );

    for gauge in [
        LEASES_HELD,
        TABLES_HOSTED,
        SECONDS_SINCE_LAST_RENEW,
        WS_CONNECTIONS,
        TABLES_PAUSED,
        REVIVE_CANDIDATES,
        RELAYS_OPEN,
    ] {
        metrics::gauge!(gauge).set(0.0);
    }
    for state in TableState::ALL {
        metrics::gauge!(TABLES, "state" => state.as_str()).set(0.0);
    }
    for counter in [
        LEASE_RENEW_ERRORS,
        LEASE_RENEW_BENIGN,
        STALE_BOUNDARY_WRITES,
        HANDS_COMPLETED,
        WS_FRAMES_IN,
        WS_FRAMES_OUT,
        WS_SLOW_CLIENTS_DROPPED,
        STORE_WRITE_RETRIES,
        LIVENESS_ERRORS,
        RELAY_OWNER_CHANGES,
        RELAYS_REFUSED,
        REVIVE_SCANS,
        REVIVE_SCAN_ROWS,
        REVIVE_SCAN_REDIS_COMMANDS,
        LEASES_RENEWED,
        FENCE_CHECK_ROWS,
        JOURNAL_ENTRIES,
        JOURNAL_STALE_REFUSED,
    ] {
        metrics::counter!(counter).absolute(0);
    }
    for result in REPLAY_RESULTS {
        metrics::counter!(JOURNAL_REPLAYS, "result" => *result).absolute(0);
    }
    for result in REASSERT_RESULTS {
        metrics::counter!(LEASE_REASSERTS, "result" => *result).absolute(0);
    }
    for reason in PauseReason::ALL {
        metrics::counter!(TABLE_PAUSES, "reason" => reason.as_str()).absolute(0);
    }
    for result in ACQUIRE_RESULTS {
        metrics::counter!(LEASE_ACQUIRES, "result" => *result).absolute(0);
    }
    for reason in LOSS_REASONS {
        metrics::counter!(LEASES_LOST, "reason" => *reason).absolute(0);
    }
    for code in ErrorCode::STABLE {
        metrics::counter!(WS_FRAMES_REJECTED, "code" => code.as_str()).absolute(0);
    }
    for histogram in [
        LEASE_RENEW_SECONDS,
        ACTION_TO_BROADCAST_SECONDS,
        JOURNAL_BATCH_SIZE,
        JOURNAL_COMMIT_SECONDS,
    ] {
        // Registering is enough: the family is exported with empty buckets.
        let _ = metrics::histogram!(histogram);
    }
}
