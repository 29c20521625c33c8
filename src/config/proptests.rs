//! Generators for environments: every real setting's variable in any case,
//! with values of the right kind, at the edges and of the wrong kind;
//! strangers, mistyped prefixes, misshapen names and `PITBOSS_ENV`. The
//! properties every environment must keep live in `checks`, which the
//! `config_env` fuzz target asserts too.

use proptest::prelude::*;

use super::checks;

/// Every key of `config/base.toml`, the optional ones included.
const KEYS: &[&str] = &[
    "HTTP__HOST",
    "HTTP__PORT",
    "DATABASE__URL",
    "DATABASE__MAX_CONNECTIONS",
    "DATABASE__ACQUIRE_TIMEOUT_MS",
    "DATABASE__CONNECT_TIMEOUT_MS",
    "DATABASE__STATEMENT_TIMEOUT_MS",
    "DATABASE__LOCK_TIMEOUT_MS",
    "DATABASE__IDLE_IN_TRANSACTION_TIMEOUT_MS",
    "REDIS__URL",
    "REDIS__OP_TIMEOUT_MS",
    "REDIS__CONNECT_TIMEOUT_MS",
    "REDIS__TLS_CA_FILE",
    "REDIS__CLUSTER_NODES",
    "REDIS__SENTINEL_NODES",
    "REDIS__SENTINEL_MASTER",
    "INSTANCE__ID",
    "INSTANCE__ENVIRONMENT",
    "INSTANCE__ADVERTISE_URL",
    "LEASE__TTL_MS",
    "TABLE__ACTION_TIMEOUT_MS",
    "TABLE__NEXT_HAND_DELAY_MS",
    "TABLE__IDLE_EVICT_MS",
    "TABLE__ARBITERS",
    "TABLE__HISTORY_EVENTS",
    "TABLE__RECONNECT_WINDOW_MS",
    "TABLE__AUTO_RECOVER_AFTER_MS",
    "WS__MAX_FRAME_BYTES",
    "WS__RATE_PER_SEC",
    "WS__RATE_BURST",
    "WS__RATE_STRIKES",
    "WS__OUTBOUND_QUEUE_BYTES",
    "WS__PING_INTERVAL_MS",
    "WS__IDLE_TIMEOUT_MS",
    "SHUTDOWN__DRAIN_TIMEOUT_MS",
    "AUTH__SECRET",
    "ADMIN__TOKEN",
    "LOG__FORMAT",
];

fn name() -> impl Strategy<Value = String> {
    let key = prop::sample::select(KEYS.to_vec());
    prop_oneof![
        8 => key.clone().prop_map(|k| format!("PITBOSS__{k}")),
        1 => key.clone().prop_map(|k| format!("pitboss__{}", k.to_lowercase())),
        1 => key.clone().prop_map(|k| format!("PITBOSS_{k}")),
        1 => key.clone().prop_map(|k| format!("PITBOSS__{k}__X")),
        1 => prop::sample::select(vec!["HTTP", "LEASE", "WS", "AUTH", "NOPE"])
            .prop_map(|s| format!("PITBOSS__{s}")),
        1 => "PITBOSS__[A-Z_]{0,16}",
        1 => "PITBOSS__[A-Z]{1,6}[\\[\\]._ -][A-Z0-9]{0,4}",
        1 => Just("PITBOSS_ENV".to_string()),
        1 => "[A-Z_]{1,12}",
    ]
}

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "",
            "0",
            "1",
            "3",
            "128",
            "300",
            "1500",
            "65535",
            "65536",
            "86400000",
            "86400001",
            "2147483647",
            "2147483648",
            "4294967296",
            "18446744073709551615",
            "18446744073709551616",
            "-1",
            "1.5",
            "+5",
            " 5",
            "yes",
            "off",
            "local",
            "test",
            "production",
            "staging",
            "pretty",
            "json",
            "yaml",
            "10.0.0.5:7000",
            "redis://a:1,b:2",
            "h:0",
            ",",
            "a|b",
            "has space",
        ])
        .prop_map(String::from),
        (0u64..100_000).prop_map(|n| n.to_string()),
        any::<u64>().prop_map(|n| n.to_string()),
        "[a-z0-9:/.,_-]{0,20}",
        "[^\u{0}]{0,12}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 128,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Any environment loads to a config that holds what it was told, or
    /// is refused in one line naming the variable or key at fault.
    #[test]
    fn any_environment_loads_exactly_or_is_refused_naming_the_key(
        vars in prop::collection::vec((name(), value()), 0..8),
    ) {
        checks::check_environment(&checks::block(&vars));
    }

    /// Any bytes at all, as the fuzz target gets them.
    #[test]
    fn any_bytes_are_an_environment_loaded_or_refused(
        data in prop::collection::vec(any::<u8>(), 0..96),
    ) {
        checks::check_environment(&data);
    }
}

#[test]
fn an_environment_block_reads_back_as_written() {
    let vars = vec![
        ("PITBOSS__LEASE__TTL_MS".to_string(), "1500".to_string()),
        ("PITBOSS_ENV".to_string(), "test".to_string()),
        ("X".to_string(), "a=b".to_string()),
    ];
    let env = checks::environment(&checks::block(&vars));
    let back: Vec<(String, String)> = env
        .into_iter()
        .map(|(n, v)| {
            (
                n.into_string().unwrap_or_default(),
                v.into_string().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(back, vars);
    checks::check_environment(&checks::block(&vars));
}
