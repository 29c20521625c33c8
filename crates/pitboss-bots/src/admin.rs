//! The admin HTTP API: tables, wallets, player tokens and the audit.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _};
use serde_json::{json, Value};

use crate::endpoints::{Backoff, Endpoints};
use crate::options::{BIG_BLIND, MAX_BUY_IN, MIN_BUY_IN, SMALL_BLIND};

const HTTP_TIMEOUT: Duration = Duration::from_secs(15);

/// The server's admin API, called with the admin bearer token.
///
/// Every instance answers every admin call, so a call that cannot reach one
/// instance (it may be restarting mid-run) goes to the next, and later calls
/// start from the one that answered. Only a call the server cannot have
/// acted on, or may act on twice, moves on: one that never connected, a
/// read (also on a server error), a token, or a `503` or `408` (the server
/// refused, or gave up reading the request, before it acted). A grant
/// whose answer was lost is looked up in the wallet rather than sent again
/// blindly: that would break the bots' own count of what was granted.
pub struct Admin {
    http: reqwest::Client,
    urls: Endpoints,
    token: String,
    /// The URL calls go to first.
    preferred: AtomicUsize,
}

/// Why a call failed.
enum Failure {
    /// Nothing was done, or doing it again is harmless: another URL (or
    /// the same one later) may be asked.
    TryNext(anyhow::Error),
    /// The request went out and its answer was lost (the instance went
    /// away mid-call): it may or may not have been done.
    Unknown(anyhow::Error),
    Final(anyhow::Error),
}

impl From<Failure> for anyhow::Error {
    fn from(f: Failure) -> anyhow::Error {
        match f {
            Failure::TryNext(e) | Failure::Final(e) => e,
            Failure::Unknown(e) => e.context("it may or may not have been done"),
        }
    }
}

impl Admin {
    pub fn new(urls: Endpoints, token: String) -> anyhow::Result<Admin> {
        let http = reqwest::Client::builder()
            .timeout(HTTP_TIMEOUT)
            .build()
            .context("building the HTTP client")?;
        Ok(Admin {
            http,
            urls,
            token,
            preferred: AtomicUsize::new(0),
        })
    }

    /// Starting with URL `first`, asks each URL in turn until one answers.
    /// When none could, waits as a bot waits for a connection and asks them
    /// all again, for up to the same bound: a lone instance may be
    /// restarting. `repeatable`: sending the call twice does no harm.
    async fn try_urls(
        &self,
        first: usize,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
        repeatable: bool,
    ) -> Result<Value, Failure> {
        let n = self.urls.count();
        let mut backoff = Backoff::new(Instant::now());
        loop {
            let mut failures = Vec::new();
            for k in 0..n {
                let i = (first + k) % n;
                match self
                    .call_at(i, method.clone(), path, body, repeatable)
                    .await
                {
                    Ok(v) => {
                        if k > 0 {
                            self.preferred.store(i, Ordering::Relaxed);
                        }
                        return Ok(v);
                    }
                    Err(Failure::TryNext(e)) => failures.push(format!("{e:#}")),
                    Err(other) if failures.is_empty() => return Err(other),
                    Err(Failure::Unknown(e)) => {
                        return Err(Failure::Unknown(e.context(failures.join("; then "))))
                    }
                    Err(Failure::Final(e)) => {
                        return Err(Failure::Final(e.context(failures.join("; then "))))
                    }
                }
            }
            match backoff.next_wait(Instant::now()) {
                Some(wait) => tokio::time::sleep(wait).await,
                None => return Err(Failure::Final(anyhow!("{}", failures.join("; then ")))),
            }
        }
    }

    /// A call starting with the URL that answered last. Reads may be sent
    /// twice; other calls only when they never reached a server.
    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<Value> {
        let first = self.preferred.load(Ordering::Relaxed);
        let repeatable = method == reqwest::Method::GET;
        Ok(self
            .try_urls(first, method, path, body.as_ref(), repeatable)
            .await?)
    }

    async fn call_at(
        &self,
        i: usize,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
        repeatable: bool,
    ) -> Result<Value, Failure> {
        let url = format!("{}{path}", self.urls.http(i));
        let mut req = self
            .http
            .request(method.clone(), &url)
            .bearer_auth(&self.token);
        if let Some(b) = body {
            req = req.json(b);
        }
        let resp = req.send().await.map_err(|e| {
            // reqwest's own chain repeats the URL at every level; the
            // innermost cause ("Connection refused") is the useful part.
            let root = std::iter::successors(Some(&e as &dyn std::error::Error), |e| e.source())
                .last()
                .map(ToString::to_string)
                .unwrap_or_default();
            let err = anyhow!("{method} {url}: the server did not answer ({root})");
            if e.is_connect() || repeatable {
                Failure::TryNext(err)
            } else if e.is_timeout() {
                // A server that is slow, not gone, may still do it later.
                Failure::Final(err)
            } else {
                Failure::Unknown(err)
            }
        })?;
        let status = resp.status();
        let text = resp.text().await.map_err(|e| {
            let err = anyhow!(e).context(format!("{method} {url}: reading the answer"));
            if repeatable {
                Failure::TryNext(err)
            } else {
                Failure::Unknown(err)
            }
        })?;
        if status == reqwest::StatusCode::UNAUTHORIZED {
            return Err(Failure::Final(anyhow!(
                "the server refused the admin token (401 on {method} {path}): pass --admin-token \
                 or set PITBOSS__ADMIN__TOKEN to the server's admin token"
            )));
        }
        // 503: refused before acting. 408: the server gave up reading the
        // request (an instance stopped and resumed), so it did not act.
        // A read may go again on any server error.
        if status == reqwest::StatusCode::SERVICE_UNAVAILABLE
            || status == reqwest::StatusCode::REQUEST_TIMEOUT
            || (repeatable && status.is_server_error())
        {
            return Err(Failure::TryNext(anyhow!(
                "{method} {url} -> {status}: {text:.300}"
            )));
        }
        if status.is_server_error() {
            // It may have acted before it failed (a connection lost during
            // the commit): the caller looks before it asks again.
            return Err(Failure::Unknown(anyhow!(
                "{method} {path} -> {status}: {text:.300}"
            )));
        }
        if !status.is_success() {
            return Err(Failure::Final(anyhow!(
                "{method} {path} -> {status}: {text:.300}"
            )));
        }
        serde_json::from_str(&text).map_err(|e| {
            Failure::Final(anyhow!(e).context(format!(
                "{method} {path}: the answer is not JSON: {text:.300}"
            )))
        })
    }

    /// Creates a table on URL `at`, whose instance then hosts it (or on the
    /// next URL that answers, when that one does not).
    pub async fn create_table(&self, at: usize, seats: usize) -> anyhow::Result<String> {
        let body = json!({
            "small_blind": SMALL_BLIND,
            "big_blind": BIG_BLIND,
            "ante": 0,
            "seats": seats,
            "min_buy_in": MIN_BUY_IN,
            "max_buy_in": MAX_BUY_IN,
        });
        let view = self
            .try_urls(
                at,
                reqwest::Method::POST,
                "/admin/tables",
                Some(&body),
                false,
            )
            .await?;
        view["id"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| anyhow!("POST /admin/tables answered without an id: {view}"))
    }

    /// Grants `chips` exactly once, so that the bots' own count of what
    /// they were granted stays exact even when an instance goes away with
    /// the grant in flight: the wallet then tells whether it landed. Only
    /// for a wallet nothing else changes meanwhile, as a bot's is while it
    /// has no seat.
    pub async fn grant(&self, player: &str, chips: u64) -> anyhow::Result<()> {
        let path = format!("/admin/players/{player}/grant");
        let body = json!({ "chips": chips });
        let before = self.balance(player).await?;
        let mut lost = 0;
        loop {
            let first = self.preferred.load(Ordering::Relaxed);
            match self
                .try_urls(first, reqwest::Method::POST, &path, Some(&body), false)
                .await
            {
                Ok(_) => return Ok(()),
                Err(Failure::Unknown(e)) if lost < 3 => {
                    lost += 1;
                    // A commit the instance sent just before it went away
                    // lands within moments.
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    let now = self.balance(player).await?;
                    if now == before + chips {
                        return Ok(());
                    }
                    if now != before {
                        bail!(
                            "{e:#}; then the wallet held {now}, neither {before} nor {}",
                            before + chips
                        );
                    }
                }
                Err(f) => return Err(f.into()),
            }
        }
    }

    pub async fn balance(&self, player: &str) -> anyhow::Result<u64> {
        let path = format!("/admin/players/{player}");
        let v = self.call(reqwest::Method::GET, &path, None).await?;
        v["balance"]
            .as_u64()
            .ok_or_else(|| anyhow!("GET {path} answered without a balance: {v}"))
    }

    pub async fn seats_taken(&self, table: &str) -> anyhow::Result<usize> {
        let path = format!("/admin/tables/{table}");
        let v = self.call(reqwest::Method::GET, &path, None).await?;
        v["seats"]
            .as_array()
            .map(Vec::len)
            .ok_or_else(|| anyhow!("GET {path} answered without seats: {v}"))
    }

    pub async fn audit(&self) -> anyhow::Result<Value> {
        self.call(reqwest::Method::GET, "/admin/audit", None).await
    }

    /// `GET /admin/audit` on every URL, so that a mistyped one fails the
    /// run before anything is created.
    pub async fn check_each(&self) -> anyhow::Result<()> {
        for i in 0..self.urls.count() {
            self.call_at(i, reqwest::Method::GET, "/admin/audit", None, true)
                .await?;
        }
        Ok(())
    }

    /// A player token minted by the server (`POST /admin/players/{p}/token`).
    pub async fn player_token(&self, player: &str) -> anyhow::Result<String> {
        let path = format!("/admin/players/{player}/token");
        // A second token does no harm.
        let first = self.preferred.load(Ordering::Relaxed);
        let v = self
            .try_urls(first, reqwest::Method::POST, &path, Some(&json!({})), true)
            .await?;
        v["token"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| anyhow!("POST {path} answered without a token: {v}"))
    }
}
