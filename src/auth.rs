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
        let claims: Claims = serde_json::from_slice(&payload).map_err(|_| TokenError::Malformed)?;
        if claims.exp < now_unix {
            return Err(TokenError::Expired);
        }
        if !valid_player_name(&claims.sub) {
            return Err(TokenError::BadPlayer);
        }
        Ok(claims.sub)
    }
}

pub fn now_unix() -> i64 {
    chrono::Utc::now().timestamp()
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn junk_is_malformed() {
        assert_eq!(signer("k").verify("nope", 0), Err(TokenError::Malformed));
    }
}
