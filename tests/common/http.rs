//! HTTP against a test server: any request, and the admin API calls tests
//! make again and again, each checking the status it must answer with.

use serde_json::{json, Value};

use super::server::{Server, ADMIN_TOKEN};

/// The default table body for `POST /admin/tables`.
pub fn table_config() -> Value {
    json!({
        "small_blind": 1,
        "big_blind": 2,
        "ante": 0,
        "seats": 6,
        "min_buy_in": 40,
        "max_buy_in": 200
    })
}

impl Server {
    /// Any request; the body as text.
    pub async fn request(
        &self,
        method: reqwest::Method,
        path: &str,
        bearer: Option<&str>,
        body: Option<&Value>,
    ) -> (u16, String) {
        let url = format!("{}{}", self.http, path);
        let mut req = self.client.request(method.clone(), &url);
        if let Some(token) = bearer {
            req = req.bearer_auth(token);
        }
        if let Some(b) = body {
            req = req.json(b);
        }
        let resp = req
            .send()
            .await
            .unwrap_or_else(|e| panic!("{method} {url}: {e}"));
        let status = resp.status().as_u16();
        let text = resp
            .text()
            .await
            .unwrap_or_else(|e| panic!("{method} {url}: reading body: {e}"));
        (status, text)
    }

    /// Unauthenticated GET; the body as text.
    pub async fn get(&self, path: &str) -> (u16, String) {
        self.request(reqwest::Method::GET, path, None, None).await
    }

    pub async fn admin_get(&self, path: &str) -> (u16, Value) {
        let (status, text) = self
            .request(reqwest::Method::GET, path, Some(ADMIN_TOKEN), None)
            .await;
        (status, body_json(text))
    }

    pub async fn admin_post(&self, path: &str, body: Value) -> (u16, Value) {
        let (status, text) = self
            .request(reqwest::Method::POST, path, Some(ADMIN_TOKEN), Some(&body))
            .await;
        (status, body_json(text))
    }

    /// `POST /admin/tables`, expecting 201; the table view.
    pub async fn create_table(&self, config: Value) -> Value {
        let (status, view) = self.admin_post("/admin/tables", config.clone()).await;
        assert_eq!(
            status, 201,
            "POST /admin/tables {config} -> {status} {view}"
        );
        view
    }

    /// `POST /admin/players/{player}/grant`, expecting 200; `{player, balance}`.
    pub async fn grant(&self, player: &str, chips: i64) -> Value {
        let path = format!("/admin/players/{player}/grant");
        let (status, body) = self.admin_post(&path, json!({ "chips": chips })).await;
        assert_eq!(status, 200, "POST {path} {chips} -> {status} {body}");
        body
    }

    /// `GET /admin/tables/{id}`, expecting 200; the table view.
    pub async fn table(&self, id: &str) -> Value {
        let path = format!("/admin/tables/{id}");
        let (status, body) = self.admin_get(&path).await;
        assert_eq!(status, 200, "GET {path} -> {status} {body}");
        body
    }

    /// `GET /admin/audit`, expecting 200.
    pub async fn audit(&self) -> Value {
        let (status, body) = self.admin_get("/admin/audit").await;
        assert_eq!(status, 200, "GET /admin/audit -> {status} {body}");
        body
    }
}

fn body_json(text: String) -> Value {
    if text.trim().is_empty() {
        return Value::Null;
    }
    // A non-JSON body stays visible in assertion messages as a string.
    serde_json::from_str(&text).unwrap_or(Value::String(text))
}
