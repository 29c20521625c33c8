//! Generators for relay credentials and player tokens: claims with names
//! the server takes and names it does not, times near each other and far
//! apart, the real signature, a broken one or any text. The properties
//! every credential must keep live in `checks`, which the
//! `relay_credential` fuzz target asserts too.

use proptest::prelude::*;
use secrecy::SecretString;

use super::checks::{self, Fields};
use super::{RelayClaim, TokenSigner, RELAY_WINDOW_MS};

/// Instance ids and player names as the server writes them, at the edges
/// of what it takes, and any text (line breaks included).
fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[A-Za-z0-9_.-]{1,32}",
        1 => Just(String::new()),
        1 => "[a-z]{33}",
        1 => "[a-z]{0,4}\n[a-z]{0,4}",
        1 => any::<String>(),
    ]
}

fn time() -> impl Strategy<Value = i64> {
    prop_oneof![
        4 => 1_700_000_000_000i64..1_800_000_000_000,
        1 => Just(i64::MIN),
        1 => Just(i64::MAX),
        1 => any::<i64>(),
    ]
}

fn claim() -> impl Strategy<Value = RelayClaim> {
    (name(), name(), name(), time()).prop_map(|(from, to, player, at_ms)| RelayClaim {
        from,
        to,
        player,
        at_ms,
    })
}

/// How the signature is chosen: the real one, and what it is not.
#[derive(Debug, Clone)]
enum Sig {
    Signed,
    Text(String),
}

fn sig() -> impl Strategy<Value = Sig> {
    prop_oneof![
        3 => Just(Sig::Signed),
        1 => "[A-Za-z0-9_-]{0,48}".prop_map(Sig::Text),
        1 => any::<String>().prop_map(Sig::Text),
    ]
}

fn token() -> impl Strategy<Value = String> {
    prop_oneof!["[A-Za-z0-9_-]{0,40}\\.[A-Za-z0-9_-]{0,48}", any::<String>(),]
}

fn payload() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        (name(), any::<i64>()).prop_map(|(sub, exp)| serde_json::json!({"sub": sub, "exp": exp})
            .to_string()
            .into_bytes()),
        prop::sample::select(vec![
            "{}",
            "[]",
            "null",
            r#"{"sub":"alice"}"#,
            r#"{"sub":"alice","exp":1e30}"#,
            r#"{"sub":"alice","exp":"1"}"#,
            r#"{"sub":"alice","exp":9223372036854775807,"x":1}"#,
        ])
        .prop_map(|s| s.as_bytes().to_vec()),
        prop::collection::vec(any::<u8>(), 0..48),
    ]
}

fn input() -> impl Strategy<Value = Fields> {
    (
        "[a-z]{0,12}",
        claim(),
        sig(),
        any::<bool>(),
        -2 * RELAY_WINDOW_MS..=2 * RELAY_WINDOW_MS,
        claim(),
        token(),
        payload(),
    )
        .prop_map(
            |(secret, claim, sig, addressed, skew, other, token, payload)| {
                let signer = TokenSigner::new(SecretString::from(secret.clone()));
                let sig = match sig {
                    Sig::Signed => signer.sign_relay(&claim),
                    Sig::Text(t) => t,
                };
                let me = if addressed {
                    claim.to.clone()
                } else {
                    other.to.clone()
                };
                let now_ms = claim.at_ms.saturating_add(skew);
                Fields {
                    secret,
                    claim,
                    sig,
                    me,
                    now_ms,
                    other,
                    token,
                    payload,
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Every credential answers exactly what the rules say; a signed one
    /// round-trips within its window and at its addressee only, and its
    /// signature vouches for nothing else.
    #[test]
    fn relay_credentials_verify_exactly_as_signed(f in input()) {
        // What the fuzz target reads is what the generator wrote.
        prop_assert_eq!(&checks::fields(&checks::join(&f)), &f);
        checks::check_fields(&f);
    }

    /// Any bytes at all, as the fuzz target gets them.
    #[test]
    fn any_bytes_are_a_credential_refused_or_verified_by_the_rules(
        data in prop::collection::vec(any::<u8>(), 0..160),
    ) {
        checks::check_credential(&data);
    }
}

#[test]
fn a_server_signed_claim_verifies_only_as_signed() {
    let claim = RelayClaim {
        from: "inst-a".into(),
        to: "inst-b".into(),
        player: "alice".into(),
        at_ms: 1_700_000_000_000,
    };
    let signer = TokenSigner::new(SecretString::from("k".to_string()));
    let f = Fields {
        secret: "k".into(),
        sig: signer.sign_relay(&claim),
        me: "inst-b".into(),
        now_ms: claim.at_ms + RELAY_WINDOW_MS,
        other: RelayClaim {
            from: "inst-a\ninst-b".into(),
            to: "alice".into(),
            ..claim.clone()
        },
        claim,
        token: String::new(),
        payload: br#"{"sub":"alice","exp":1700000000}"#.to_vec(),
    };
    assert_eq!(checks::fields(&checks::join(&f)), f);
    checks::check_fields(&f);
}
