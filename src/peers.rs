//! The other instances of this environment, as Postgres knows them: the
//! one directory the relay (a client's frames to the table's owner) and
//! moves (an operator's move forwarded to the owner, or sent to the
//! target) look a peer up in. A peer is reachable only while it is live
//! (seen within one TTL) and not draining, at the address it advertises
//! (`instance.advertise_url`).

use url::Url;

use crate::store::{Store, StoreError};

/// Why a peer cannot be reached.
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    /// Unknown, gone (not seen for a TTL) or draining.
    #[error("instance {0:?} is not live (unknown, gone or draining)")]
    NotLive(String),
    /// It advertises an address this process cannot use.
    #[error("instance {instance:?} advertises {url:?}: {why}")]
    BadAddress {
        instance: String,
        url: String,
        why: &'static str,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A live peer, and where it listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    pub id: String,
    /// Its advertised base URL, as it advertises it.
    pub advertise_url: String,
}

impl Peer {
    /// The base of its HTTP API, without a trailing `/`.
    pub fn http_base(&self) -> &str {
        self.advertise_url.trim_end_matches('/')
    }

    /// Its `/ws/relay` endpoint, without a query. Relays reach peers over
    /// `http://` (a private network) only.
    pub fn relay_url(&self) -> Result<Url, PeerError> {
        let bad = |why| PeerError::BadAddress {
            instance: self.id.clone(),
            url: self.advertise_url.clone(),
            why,
        };
        let mut url = Url::parse(&self.advertise_url).map_err(|_| bad("not a URL"))?;
        if !matches!(url.scheme(), "http" | "ws") {
            return Err(bad("relays reach peers over http:// only"));
        }
        url.set_scheme("ws").map_err(|()| bad("no ws:// form"))?;
        url.set_path("/ws/relay");
        url.set_query(None);
        Ok(url)
    }
}

/// Looks peers up in one environment's `instances` rows.
#[derive(Clone)]
pub struct PeerDirectory {
    store: Store,
    environment: String,
}

impl PeerDirectory {
    pub fn new(store: Store, environment: impl Into<String>) -> PeerDirectory {
        PeerDirectory {
            store,
            environment: environment.into(),
        }
    }

    /// `instance`, if it is live and not draining.
    pub async fn live(&self, instance: &str) -> Result<Peer, PeerError> {
        match self
            .store
            .instance_seen(&self.environment, instance)
            .await?
        {
            Some(row) if row.live && !row.draining => Ok(Peer {
                id: row.id,
                advertise_url: row.advertise_url,
            }),
            _ => Err(PeerError::NotLive(instance.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(url: &str) -> Peer {
        Peer {
            id: "host-b".into(),
            advertise_url: url.into(),
        }
    }

    #[test]
    fn a_peer_is_reached_at_its_advertised_address() {
        let p = peer("http://10.0.0.2:8080/");
        assert_eq!(p.http_base(), "http://10.0.0.2:8080");
        assert_eq!(
            p.relay_url().unwrap().as_str(),
            "ws://10.0.0.2:8080/ws/relay"
        );
        let p = peer("http://host-b:8080/some/path?x=1");
        assert_eq!(p.relay_url().unwrap().as_str(), "ws://host-b:8080/ws/relay");
    }

    #[test]
    fn a_relay_is_not_made_to_an_address_that_is_not_plain_http() {
        for url in ["https://host-b:8443", "not a url", "ftp://host-b"] {
            assert!(
                matches!(peer(url).relay_url(), Err(PeerError::BadAddress { .. })),
                "{url}"
            );
        }
    }
}
