//! Player tokens: `base64url(payload).base64url(hmac_sha256(payload))`, the
//! payload being `{"sub":player,"exp":unix_seconds}`.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, Mac};
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use crate::types::valid_player_name;

type HmacSha256 = Hmac<Sha256>;

/// How long a minted token is valid.
pub const TOKEN_LIFETIME_SECS: i64 = 30 * 24 * 3600;

/// When a token minted at `now_unix` expires, in unix seconds.
pub fn expires_at(now_unix: i64) -> i64 {
    now_unix.saturating_add(TOKEN_LIFETIME_SECS)
}

#[derive(Debug, Serialize, Deserialize)]
struct Claims {
    sub: String,
    exp: i64,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TokenError {
    #[error("token is malformed")]
    Malformed,
    #[error("token signature does not match")]
    BadSignature,
    #[error("token has expired")]
    Expired,
    #[error("player name must be 1-32 letters, digits, '_', '-' or '.'")]
    BadPlayer,
}

#[derive(Clone)]
pub struct TokenSigner {
    secret: SecretString,
}

impl TokenSigner {
    pub fn new(secret: SecretString) -> TokenSigner {
        TokenSigner { secret }
    }

    fn mac(&self) -> HmacSha256 {
        // HMAC accepts keys of any length, so this cannot fail.
        HmacSha256::new_from_slice(self.secret.expose_secret().as_bytes())
            .unwrap_or_else(|_| unreachable!("hmac takes any key length"))
    }

    pub fn mint(&self, player: &str, now_unix: i64) -> Result<String, TokenError> {
        if !valid_player_name(player) {
            return Err(TokenError::BadPlayer);
        }
        let claims = Claims {
            sub: player.to_string(),
            exp: expires_at(now_unix),
        };
        let payload = serde_json::to_vec(&claims).map_err(|_| TokenError::Malformed)?;
        let mut mac = self.mac();
        mac.update(&payload);
        let sig = mac.finalize().into_bytes();
        Ok(format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(&payload),
            URL_SAFE_NO_PAD.encode(sig)
        ))
    }

    pub fn verify(&self, token: &str, now_unix: i64) -> Result<String, TokenError> {
        let (payload_b64, sig_b64) = token.split_once('.').ok_or(TokenError::Malformed)?;
        let payload = URL_SAFE_NO_PAD
            .decode(payload_b64)
            .map_err(|_| TokenError::Malformed)?;
        let sig = URL_SAFE_NO_PAD
            .decode(sig_b64)
            .map_err(|_| TokenError::Malformed)?;
        let mut mac = self.mac();
        mac.update(&payload);
        mac.verify_slice(&sig)
            .map_err(|_| TokenError::BadSignature)?;
        // JSON is UTF-8 throughout: `from_slice` would skip a field it
        // ignores without checking its bytes, and take a payload that is
        // not JSON.
        let payload = std::str::from_utf8(&payload).map_err(|_| TokenError::Malformed)?;
        // Claims are a JSON object: serde would also take the fields of a
        // struct from an array in their order.
        let claims: serde_json::Value =
            serde_json::from_str(payload).map_err(|_| TokenError::Malformed)?;
        if !claims.is_object() {
            return Err(TokenError::Malformed);
        }
        let claims: Claims = serde_json::from_value(claims).map_err(|_| TokenError::Malformed)?;
        if claims.exp < now_unix {
            return Err(TokenError::Expired);
        }
        if !valid_player_name(&claims.sub) {
            return Err(TokenError::BadPlayer);
        }
        Ok(claims.sub)
    }
}

/// How far from the verifier's clock a relay credential's time may be
/// (either way, for clock skew between instances).
pub const RELAY_WINDOW_MS: i64 = 30_000;

/// Why an upstream relay connection was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RelayAuthError {
    #[error("relay credential is malformed")]
    Malformed,
    #[error("relay credential signature does not match")]
    BadSignature,
    #[error("relay credential is outside its time window")]
    Stale,
    #[error("relay credential names another instance")]
    WrongInstance,
}

/// What a relay credential vouches for: instance `from` opens a connection
/// to instance `to` on behalf of `player`, at `at_ms` (unix millis).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayClaim {
    pub from: String,
    pub to: String,
    pub player: String,
    pub at_ms: i64,
}

impl RelayClaim {
    /// The signed bytes. The prefix keeps them apart from player tokens,
    /// whose signed payload is a JSON object.
    fn message(&self) -> Vec<u8> {
        format!(
            "pitboss-relay-v1\n{}\n{}\n{}\n{}",
            self.from, self.to, self.player, self.at_ms
        )
        .into_bytes()
    }
}

impl TokenSigner {
    /// Signs a relay claim: instances share the player-token secret, so any
    /// instance of the environment can vouch for a player it has verified.
    pub fn sign_relay(&self, claim: &RelayClaim) -> String {
        let mut mac = self.mac();
        mac.update(&claim.message());
        URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes())
    }

    /// Checks a relay claim addressed to instance `me` at `now_ms`: the
    /// signature (in constant time), the addressee, the time window and the
    /// player name. Answers the player the connection plays for.
    pub fn verify_relay(
        &self,
        claim: &RelayClaim,
        sig: &str,
        me: &str,
        now_ms: i64,
    ) -> Result<String, RelayAuthError> {
        let sig = URL_SAFE_NO_PAD
            .decode(sig)
            .map_err(|_| RelayAuthError::Malformed)?;
        let mut mac = self.mac();
        mac.update(&claim.message());
        mac.verify_slice(&sig)
            .map_err(|_| RelayAuthError::BadSignature)?;
        if claim.to != me {
            return Err(RelayAuthError::WrongInstance);
        }
        if now_ms.abs_diff(claim.at_ms) > RELAY_WINDOW_MS.unsigned_abs() {
            return Err(RelayAuthError::Stale);
        }
        if !valid_player_name(&claim.player) {
            return Err(RelayAuthError::Malformed);
        }
        Ok(claim.player.clone())
    }
}

pub fn now_unix_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

pub fn now_unix() -> i64 {
    chrono::Utc::now().timestamp()
}

#[doc(hidden)]
pub mod checks;
#[cfg(test)]
mod proptests;

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by the `relay_credential` fuzz target: a signed payload with
    /// bytes that are not UTF-8 in a field the claims do not read was
    /// accepted, although it is no JSON.
    #[test]
    fn a_signed_payload_that_is_not_utf8_or_not_an_object_is_malformed() {
        let signer = TokenSigner::new(SecretString::from("s3cret".to_string()));
        let sign = |payload: &[u8]| {
            let mut mac = signer.mac();
            mac.update(payload);
            format!(
                "{}.{}",
                URL_SAFE_NO_PAD.encode(payload),
                URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes())
            )
        };
        let bad = b"{\"sub\":\"alice\",\"exp\":745,\"x\":\"\xa7ic\"}";
        assert_eq!(signer.verify(&sign(bad), 700), Err(TokenError::Malformed));
        let good = b"{\"sub\":\"alice\",\"exp\":745,\"x\":\"ic\"}";
        assert_eq!(signer.verify(&sign(good), 700), Ok("alice".to_string()));
        // The same claims as an array, correctly signed, are no token.
        let array = b"[\"alice\",745]";
        assert_eq!(signer.verify(&sign(array), 700), Err(TokenError::Malformed));
    }

    fn signer(s: &str) -> TokenSigner {
        TokenSigner::new(SecretString::from(s.to_string()))
    }

    #[test]
    fn minted_token_verifies_to_its_player() {
        let s = signer("k");
        let t = s.mint("alice", 1000).expect("mint");
        assert_eq!(s.verify(&t, 1000), Ok("alice".to_string()));
    }

    #[test]
    fn token_signed_with_another_secret_is_refused() {
        let t = signer("k1").mint("alice", 1000).expect("mint");
        assert_eq!(signer("k2").verify(&t, 1000), Err(TokenError::BadSignature));
    }

    #[test]
    fn tampered_payload_is_refused() {
        let s = signer("k");
        let t = s.mint("alice", 1000).expect("mint");
        let other = s.mint("mallory", 1000).expect("mint");
        let forged = format!(
            "{}.{}",
            other.split('.').next().unwrap_or_default(),
            t.split('.').nth(1).unwrap_or_default()
        );
        assert_eq!(s.verify(&forged, 1000), Err(TokenError::BadSignature));
    }

    #[test]
    fn expired_token_is_refused() {
        let s = signer("k");
        let t = s.mint("alice", 0).expect("mint");
        assert_eq!(
            s.verify(&t, TOKEN_LIFETIME_SECS + 1),
            Err(TokenError::Expired)
        );
    }

    fn claim() -> RelayClaim {
        RelayClaim {
            from: "a".into(),
            to: "b".into(),
            player: "alice".into(),
            at_ms: 1_000_000,
        }
    }

    #[test]
    fn relay_claim_verifies_at_its_addressee() {
        let s = signer("k");
        let sig = s.sign_relay(&claim());
        assert_eq!(
            s.verify_relay(&claim(), &sig, "b", 1_000_500),
            Ok("alice".to_string())
        );
    }

    #[test]
    fn forged_or_replayed_relay_claims_are_refused() {
        let s = signer("k");
        let sig = s.sign_relay(&claim());
        let forged = signer("other").sign_relay(&claim());
        assert_eq!(
            s.verify_relay(&claim(), &forged, "b", 1_000_000),
            Err(RelayAuthError::BadSignature)
        );
        let mallory = RelayClaim {
            player: "mallory".into(),
            ..claim()
        };
        assert_eq!(
            s.verify_relay(&mallory, &sig, "b", 1_000_000),
            Err(RelayAuthError::BadSignature)
        );
        assert_eq!(
            s.verify_relay(&claim(), &sig, "c", 1_000_000),
            Err(RelayAuthError::WrongInstance)
        );
        assert_eq!(
            s.verify_relay(&claim(), &sig, "b", 1_000_000 + RELAY_WINDOW_MS + 1),
            Err(RelayAuthError::Stale)
        );
        assert_eq!(
            s.verify_relay(&claim(), "!!", "b", 1_000_000),
            Err(RelayAuthError::Malformed)
        );
        // A player token's signature never passes as a relay signature.
        let token = s.mint("alice", 0).expect("mint");
        let token_sig = token.split('.').nth(1).unwrap_or_default();
        assert_eq!(
            s.verify_relay(&claim(), token_sig, "b", 1_000_000),
            Err(RelayAuthError::BadSignature)
        );
    }

    #[test]
    fn junk_is_malformed() {
        assert_eq!(signer("k").verify("nope", 0), Err(TokenError::Malformed));
    }
}
