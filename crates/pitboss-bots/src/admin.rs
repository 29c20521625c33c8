//! The admin HTTP API: tables, wallets, player tokens and the audit.

use std::time::Duration;

use anyhow::{anyhow, bail, Context as _};
use serde_json::{json, Value};

use crate::options::{BIG_BLIND, MAX_BUY_IN, MIN_BUY_IN, SMALL_BLIND};

const HTTP_TIMEOUT: Duration = Duration::from_secs(15);

/// The server's admin API, called with the admin bearer token.
pub struct Admin {
    http: reqwest::Client,
    base: String,
    token: String,
}

impl Admin {
    /// `base` is the server's base URL, without a trailing slash.
    pub fn new(base: String, token: String) -> anyhow::Result<Admin> {
        let http = reqwest::Client::builder()
            .timeout(HTTP_TIMEOUT)
            .build()
            .context("building the HTTP client")?;
        Ok(Admin { http, base, token })
    }

    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<Value> {
        let url = format!("{}{path}", self.base);
        let mut req = self
            .http
            .request(method.clone(), &url)
            .bearer_auth(&self.token);
        if let Some(b) = &body {
            req = req.json(b);
        }
        let resp = req.send().await.map_err(|e| {
            // reqwest's own chain repeats the URL at every level; the
            // innermost cause ("Connection refused") is the useful part.
            let root = std::iter::successors(Some(&e as &dyn std::error::Error), |e| e.source())
                .last()
                .map(ToString::to_string)
                .unwrap_or_default();
            anyhow!("{method} {url}: the server did not answer ({root})")
        })?;
        let status = resp.status();
        let text = resp
            .text()
            .await
            .with_context(|| format!("{method} {url}: reading the answer"))?;
        if status == reqwest::StatusCode::UNAUTHORIZED {
            bail!(
                "the server refused the admin token (401 on {method} {path}): pass --admin-token \
                 or set PITBOSS__ADMIN__TOKEN to the server's admin token"
            );
        }
        if !status.is_success() {
            bail!("{method} {path} -> {status}: {text:.300}");
        }
        serde_json::from_str(&text)
            .with_context(|| format!("{method} {path}: the answer is not JSON: {text:.300}"))
    }

    pub async fn create_table(&self, seats: usize) -> anyhow::Result<String> {
        let view = self
            .call(
                reqwest::Method::POST,
                "/admin/tables",
                Some(json!({
                    "small_blind": SMALL_BLIND,
                    "big_blind": BIG_BLIND,
                    "ante": 0,
                    "seats": seats,
                    "min_buy_in": MIN_BUY_IN,
                    "max_buy_in": MAX_BUY_IN,
                })),
            )
            .await?;
        view["id"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| anyhow!("POST /admin/tables answered without an id: {view}"))
    }

    pub async fn grant(&self, player: &str, chips: u64) -> anyhow::Result<()> {
        let path = format!("/admin/players/{player}/grant");
        self.call(
            reqwest::Method::POST,
            &path,
            Some(json!({ "chips": chips })),
        )
        .await
        .map(drop)
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

    /// A player token minted by the server (`POST /admin/players/{p}/token`).
    pub async fn player_token(&self, player: &str) -> anyhow::Result<String> {
        let path = format!("/admin/players/{player}/token");
        let v = self
            .call(reqwest::Method::POST, &path, Some(json!({})))
            .await?;
        v["token"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| anyhow!("POST {path} answered without a token: {v}"))
    }
}
