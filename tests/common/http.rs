//! HTTP against a test server: any request, and the admin API calls tests
//! make again and again, each checking the status it must answer with.

use reqwest::Method;
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

/// The same table as the rules take it, for tests that use the store.
#[allow(dead_code)] // not every test binary uses the store directly
pub fn rules_config() -> pitboss::games::holdem::rules::TableConfig {
    serde_json::from_value(table_config()).expect("the default table is valid")
}

impl Server {
    /// Any request; the body as text.
    pub async fn request(
        &self,
        method: Method,
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
        self.request(Method::GET, path, None, None).await
    }

    pub async fn admin_get(&self, path: &str) -> (u16, Value) {
        self.admin(Method::GET, path, None).await
    }

    pub async fn admin_post(&self, path: &str, body: Value) -> (u16, Value) {
        self.admin(Method::POST, path, Some(&body)).await
    }

    /// `POST /admin/tables`, expecting 201; the table view.
    pub async fn create_table(&self, config: Value) -> Value {
        self.admin_expect(Method::POST, "/admin/tables", Some(&config), 201)
            .await
    }

    /// `POST /admin/players/{player}/grant`, expecting 200; `{player, balance}`.
    pub async fn grant(&self, player: &str, chips: i64) -> Value {
        let path = format!("/admin/players/{player}/grant");
        let body = json!({ "chips": chips });
        self.admin_expect(Method::POST, &path, Some(&body), 200)
            .await
    }

    /// `GET /admin/tables/{id}`, expecting 200; the table view.
    pub async fn table(&self, id: &str) -> Value {
        let path = format!("/admin/tables/{id}");
        self.admin_expect(Method::GET, &path, None, 200).await
    }

    /// `GET /admin/audit`, expecting 200.
    pub async fn audit(&self) -> Value {
        self.admin_expect(Method::GET, "/admin/audit", None, 200)
            .await
    }

    /// A request with the admin token; the body as JSON.
    async fn admin(&self, method: Method, path: &str, body: Option<&Value>) -> (u16, Value) {
        let (status, text) = self.request(method, path, Some(ADMIN_TOKEN), body).await;
        (status, body_json(text))
    }

    /// Like `admin`, asserting the answer's status is `want`; the body.
    async fn admin_expect(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        want: u16,
    ) -> Value {
        let (status, answer) = self.admin(method.clone(), path, body).await;
        let sent = body.map(|b| format!(" {b}")).unwrap_or_default();
        assert_eq!(status, want, "{method} {path}{sent} -> {status} {answer}");
        answer
    }
}

fn body_json(text: String) -> Value {
    if text.trim().is_empty() {
        return Value::Null;
    }
    // A non-JSON body stays visible in assertion messages as a string.
    serde_json::from_str(&text).unwrap_or(Value::String(text))
}
