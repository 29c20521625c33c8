//! The properties the `relay_credential` fuzz target and the credential
//! property tests both assert, kept in one place so that the two check
//! exactly the same thing on the inputs each of them grows.
//!
//! An input is a secret, a relay claim (`from`, `to`, `player`, `at`), a
//! signature, the verifying instance and its clock, a second claim and a
//! player token, all as arbitrary text (see [`fields`]). Checked on every
//! input:
//!
//! - `verify_relay` never panics and answers exactly what its rules say: a
//!   signature that is not unpadded URL-safe base64 is `Malformed`; any
//!   other signature but the one `sign_relay` makes for the claim is
//!   `BadSignature`; then `WrongInstance` unless the claim is addressed to
//!   the verifier, `Stale` outside the window, `Malformed` for a player name
//!   the server would not take, and the claim's player otherwise;
//! - a signed claim round-trips: it verifies at its addressee anywhere
//!   within the window (edges included) and is `Stale` one millisecond
//!   outside; the same signature is refused for a claim with any field
//!   changed, for a different claim that the server could be shown (one
//!   addressed to an instance id and naming a player without a line
//!   break), with one character changed, or under another secret;
//! - a player token built from arbitrary text never panics `verify`, is
//!   accepted only for a valid player name, and a token minted for a valid
//!   name verifies to it until it expires and is `Expired` a second later;
//! - a correctly signed token over an arbitrary payload is accepted only
//!   when the payload is a JSON object naming a valid player and a time not
//!   yet past, and is never `BadSignature`;
//! - the two kinds of signature never stand in for each other.
//!
//! Every refusal is one of the typed errors, whose message is one fixed
//! line that never repeats what the client sent.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::Mac;
use secrecy::SecretString;

use super::{
    expires_at, RelayAuthError, RelayClaim, TokenError, TokenSigner, RELAY_WINDOW_MS,
    TOKEN_LIFETIME_SECS,
};
use crate::types::valid_player_name;

/// Separates the fields of an input: a byte that never occurs in UTF-8,
/// so any text fits in a field.
pub const FIELD_SEPARATOR: u8 = 0xFF;

/// The fields an input is split into, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fields {
    pub secret: String,
    pub claim: RelayClaim,
    pub sig: String,
    pub me: String,
    pub now_ms: i64,
    /// A second claim, checked against the first one's signature.
    pub other: RelayClaim,
    pub token: String,
    /// A payload signed as a player token.
    pub payload: Vec<u8>,
}

/// A time field: decimal text as written, anything else folded into 64
/// bits so every input still names a time.
fn number(raw: &[u8]) -> i64 {
    if let Some(n) = std::str::from_utf8(raw)
        .ok()
        .and_then(|t| t.parse::<i64>().ok())
    {
        return n;
    }
    let mut bytes = [0u8; 8];
    for (i, b) in raw.iter().enumerate() {
        bytes[i % 8] ^= *b;
    }
    i64::from_le_bytes(bytes)
}

/// Splits `data` at [`FIELD_SEPARATOR`] into secret, from, to, player, at,
/// sig, me, now, the second claim's from, to, player and at, the token and
/// the payload (the rest of the input, separators included); missing
/// fields are empty (and times 0). Text fields are
/// read as UTF-8, a broken sequence becoming U+FFFD, as a query string's
/// values reach the handler.
pub fn fields(data: &[u8]) -> Fields {
    let mut parts = data.splitn(14, |&b| b == FIELD_SEPARATOR);
    let mut raw = || parts.next().unwrap_or_default();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let secret = text(raw());
    let claim = RelayClaim {
        from: text(raw()),
        to: text(raw()),
        player: text(raw()),
        at_ms: number(raw()),
    };
    let sig = text(raw());
    let me = text(raw());
    let now_ms = number(raw());
    let other = RelayClaim {
        from: text(raw()),
        to: text(raw()),
        player: text(raw()),
        at_ms: number(raw()),
    };
    let token = text(raw());
    let payload = raw().to_vec();
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
}

/// The inverse of [`fields`], for generators: the fields joined by the
/// separator.
pub fn join(f: &Fields) -> Vec<u8> {
    let parts: [Vec<u8>; 14] = [
        f.secret.clone().into_bytes(),
        f.claim.from.clone().into_bytes(),
        f.claim.to.clone().into_bytes(),
        f.claim.player.clone().into_bytes(),
        f.claim.at_ms.to_string().into_bytes(),
        f.sig.clone().into_bytes(),
        f.me.clone().into_bytes(),
        f.now_ms.to_string().into_bytes(),
        f.other.from.clone().into_bytes(),
        f.other.to.clone().into_bytes(),
        f.other.player.clone().into_bytes(),
        f.other.at_ms.to_string().into_bytes(),
        f.token.clone().into_bytes(),
        f.payload.clone(),
    ];
    parts.join(&FIELD_SEPARATOR)
}

/// Splits `data` into fields and checks them.
///
/// # Panics
///
/// When a property does not hold, naming the input.
pub fn check_credential(data: &[u8]) {
    check_fields(&fields(data));
}

/// Checks every property in the module docs on one input.
///
/// # Panics
///
/// When a property does not hold, naming the input.
pub fn check_fields(f: &Fields) {
    let signer = TokenSigner::new(SecretString::from(f.secret.clone()));
    check_arbitrary_relay(&signer, f);
    check_signed_relay(&signer, f);
    check_tokens(&signer, f);
}

/// The answer `verify_relay` must give, from its rules as documented.
fn expected_relay(
    signer: &TokenSigner,
    claim: &RelayClaim,
    sig: &str,
    me: &str,
    now_ms: i64,
) -> Result<String, RelayAuthError> {
    if URL_SAFE_NO_PAD.decode(sig).is_err() {
        return Err(RelayAuthError::Malformed);
    }
    // Unpadded base64 with no stray trailing bits writes each byte string
    // one way only, so the one signature that verifies is the one signed.
    if sig != signer.sign_relay(claim) {
        return Err(RelayAuthError::BadSignature);
    }
    if claim.to != me {
        return Err(RelayAuthError::WrongInstance);
    }
    if i128::from(now_ms).abs_diff(i128::from(claim.at_ms)) > RELAY_WINDOW_MS.unsigned_abs().into()
    {
        return Err(RelayAuthError::Stale);
    }
    if !valid_player_name(&claim.player) {
        return Err(RelayAuthError::Malformed);
    }
    Ok(claim.player.clone())
}

fn verify_relay_checked(
    signer: &TokenSigner,
    claim: &RelayClaim,
    sig: &str,
    me: &str,
    now_ms: i64,
) -> Result<String, RelayAuthError> {
    let got = signer.verify_relay(claim, sig, me, now_ms);
    if let Err(e) = &got {
        check_relay_message(e);
    }
    got
}

/// A refusal's message: one fixed line of our own.
fn check_relay_message(e: &RelayAuthError) {
    let text = e.to_string();
    assert!(
        [
            "relay credential is malformed",
            "relay credential signature does not match",
            "relay credential is outside its time window",
            "relay credential names another instance",
        ]
        .contains(&text.as_str()),
        "{e:?}: {text:?}"
    );
}

fn check_token_message(e: &TokenError) {
    let text = e.to_string();
    assert!(
        [
            "token is malformed",
            "token signature does not match",
            "token has expired",
            "player name must be 1-32 letters, digits, '_', '-' or '.'",
        ]
        .contains(&text.as_str()),
        "{e:?}: {text:?}"
    );
}

/// The credential exactly as the input gives it.
fn check_arbitrary_relay(signer: &TokenSigner, f: &Fields) {
    let got = verify_relay_checked(signer, &f.claim, &f.sig, &f.me, f.now_ms);
    let want = expected_relay(signer, &f.claim, &f.sig, &f.me, f.now_ms);
    assert_eq!(got, want, "{f:?}");
}

/// No line break: what an instance id (no whitespace) and a player name
/// the server takes both are.
fn one_line(s: &str) -> bool {
    !s.contains('\n')
}

/// A signature with the character at `at` replaced by another of the
/// alphabet.
fn with_one_char_changed(sig: &str, at: usize) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut bytes = sig.as_bytes().to_vec();
    let i = at % bytes.len();
    let pos = ALPHABET.iter().position(|&c| c == bytes[i]).unwrap_or(0);
    bytes[i] = ALPHABET[(pos + 1 + at % 63) % 64];
    String::from_utf8(bytes).unwrap_or_default()
}

/// The input's claim, signed, then shown around.
fn check_signed_relay(signer: &TokenSigner, f: &Fields) {
    let claim = &f.claim;
    let sig = signer.sign_relay(claim);
    assert_eq!(
        URL_SAFE_NO_PAD.decode(&sig).map(|b| b.len()),
        Ok(32),
        "{sig:?}"
    );
    let valid = valid_player_name(&claim.player);
    let verdict = |now_ms: i64| verify_relay_checked(signer, claim, &sig, &claim.to, now_ms);
    let accepted = || {
        if valid {
            Ok(claim.player.clone())
        } else {
            Err(RelayAuthError::Malformed)
        }
    };
    assert_eq!(verdict(claim.at_ms), accepted(), "{claim:?}");
    let now = f.now_ms;
    let in_window =
        i128::from(now).abs_diff(i128::from(claim.at_ms)) <= RELAY_WINDOW_MS.unsigned_abs().into();
    assert_eq!(
        verdict(now),
        if in_window {
            accepted()
        } else {
            Err(RelayAuthError::Stale)
        },
        "{claim:?} at {now}"
    );
    for (edge, inside) in [
        (claim.at_ms.checked_sub(RELAY_WINDOW_MS), true),
        (claim.at_ms.checked_add(RELAY_WINDOW_MS), true),
        (claim.at_ms.checked_sub(RELAY_WINDOW_MS + 1), false),
        (claim.at_ms.checked_add(RELAY_WINDOW_MS + 1), false),
    ] {
        if let Some(edge) = edge {
            let want = if inside {
                accepted()
            } else {
                Err(RelayAuthError::Stale)
            };
            assert_eq!(verdict(edge), want, "{claim:?} at {edge}");
        }
    }
    // Addressed to another instance.
    let elsewhere = format!("{}x", claim.to);
    assert_eq!(
        verify_relay_checked(signer, claim, &sig, &elsewhere, claim.at_ms),
        Err(RelayAuthError::WrongInstance),
        "{claim:?}"
    );
    // Any field changed: the signature no longer vouches for the claim.
    let changed = [
        RelayClaim {
            from: format!("{}x", claim.from),
            ..claim.clone()
        },
        RelayClaim {
            to: format!("{}x", claim.to),
            ..claim.clone()
        },
        RelayClaim {
            player: format!("{}x", claim.player),
            ..claim.clone()
        },
        RelayClaim {
            at_ms: claim.at_ms.wrapping_add(1),
            ..claim.clone()
        },
        RelayClaim {
            at_ms: claim.at_ms.wrapping_sub(1),
            ..claim.clone()
        },
    ];
    for forged in &changed {
        assert_eq!(
            verify_relay_checked(signer, forged, &sig, &forged.to, forged.at_ms),
            Err(RelayAuthError::BadSignature),
            "{forged:?} passed with the signature of {claim:?}"
        );
    }
    // A different claim the server could be shown (addressed to an id,
    // naming a player without a line break), signed for a claim a server
    // would sign: never the same signature.
    let other = &f.other;
    if other != claim
        && one_line(&claim.to)
        && one_line(&claim.player)
        && one_line(&other.to)
        && one_line(&other.player)
    {
        assert_eq!(
            verify_relay_checked(signer, other, &sig, &other.to, other.at_ms),
            Err(RelayAuthError::BadSignature),
            "{other:?} passed with the signature of {claim:?}"
        );
    }
    // One character of the signature changed; the last one may then carry
    // stray bits, which is malformed rather than a mismatch.
    let at = usize::try_from(claim.at_ms.unsigned_abs() % 64).unwrap_or(0);
    let tampered = with_one_char_changed(&sig, at);
    assert!(
        matches!(
            verify_relay_checked(signer, claim, &tampered, &claim.to, claim.at_ms),
            Err(RelayAuthError::BadSignature | RelayAuthError::Malformed)
        ),
        "{tampered:?} passed for {claim:?}"
    );
    // Another secret.
    let stranger = TokenSigner::new(SecretString::from(format!("{}x", f.secret)));
    assert_eq!(
        verify_relay_checked(&stranger, claim, &sig, &claim.to, claim.at_ms),
        Err(RelayAuthError::BadSignature),
        "{claim:?}"
    );
}

fn verify_checked(signer: &TokenSigner, token: &str, now: i64) -> Result<String, TokenError> {
    let got = signer.verify(token, now);
    match &got {
        Ok(player) => assert!(valid_player_name(player), "{token:?} gave {player:?}"),
        Err(e) => check_token_message(e),
    }
    got
}

/// Player tokens: arbitrary, minted, and arbitrary payloads signed.
fn check_tokens(signer: &TokenSigner, f: &Fields) {
    let now = f.now_ms.div_euclid(1000);
    let _ = verify_checked(signer, &f.token, now);

    // Minted for the claim's player, at the input's time.
    let player = &f.claim.player;
    match signer.mint(player, now) {
        Ok(token) => {
            assert!(valid_player_name(player), "minted for {player:?}");
            let exp = expires_at(now);
            assert_eq!(verify_checked(signer, &token, now), Ok(player.clone()));
            assert_eq!(verify_checked(signer, &token, exp), Ok(player.clone()));
            if let Some(after) = exp.checked_add(1) {
                assert_eq!(
                    verify_checked(signer, &token, after),
                    Err(TokenError::Expired)
                );
            }
            if now.checked_add(TOKEN_LIFETIME_SECS).is_none() {
                assert_eq!(exp, i64::MAX);
            }
            let stranger = TokenSigner::new(SecretString::from(format!("{}x", f.secret)));
            assert_eq!(
                verify_checked(&stranger, &token, now),
                Err(TokenError::BadSignature)
            );
            // A token's signature is no relay signature.
            let token_sig = token.split_once('.').map(|(_, s)| s).unwrap_or_default();
            assert_eq!(
                verify_relay_checked(signer, &f.claim, token_sig, &f.claim.to, f.claim.at_ms),
                Err(RelayAuthError::BadSignature)
            );
        }
        Err(e) => {
            assert_eq!(e, TokenError::BadPlayer, "{player:?}");
            assert!(!valid_player_name(player), "{player:?} refused");
        }
    }

    // A relay signature is no token signature: its signed bytes are no
    // JSON object.
    let relay_sig = signer.sign_relay(&f.claim);
    let as_token = format!("{}.{relay_sig}", URL_SAFE_NO_PAD.encode(f.claim.message()));
    assert!(
        verify_checked(signer, &as_token, now).is_err(),
        "{as_token:?}"
    );

    // An arbitrary payload, correctly signed.
    let mut mac = signer.mac();
    mac.update(&f.payload);
    let sig = mac.finalize().into_bytes();
    let token = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(&f.payload),
        URL_SAFE_NO_PAD.encode(sig)
    );
    match verify_checked(signer, &token, now) {
        Ok(player) => {
            let value: serde_json::Value = serde_json::from_slice(&f.payload).unwrap_or_default();
            assert_eq!(
                value.get("sub").and_then(serde_json::Value::as_str),
                Some(player.as_str()),
                "{value}"
            );
            assert!(
                value
                    .get("exp")
                    .and_then(serde_json::Value::as_i64)
                    .is_some_and(|exp| exp >= now),
                "{value} at {now}"
            );
        }
        Err(e) => assert_ne!(e, TokenError::BadSignature, "{:?}", f.payload),
    }
}
