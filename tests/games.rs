//! A table plays the game it was created with: `POST /admin/tables` takes
//! `"game"` (hold'em when absent, so every existing body creates what it
//! always did), refuses a game this build does not host, and the table
//! view and every snapshot say which game the table plays.

mod common;

use std::time::Duration;

use common::{mint_token, test_db, unique_env, Server, ServerConfig, WsClient};
use serde_json::{json, Value};

const SECS: fn(u64) -> Duration = Duration::from_secs;

fn with_game(game: Value) -> Value {
    let mut body = common::table_config();
    body["game"] = game;
    body
}

#[tokio::test]
async fn a_table_plays_holdem_by_default_or_by_name_and_says_so() {
    let db = test_db().await;
    let env = unique_env();
    let server = Server::start(ServerConfig::new(&db, &env)).await;
    for body in [common::table_config(), with_game(json!("holdem"))] {
        let view = server.create_table(body.clone()).await;
        assert_eq!(view["game_kind"], "holdem", "{body} → {view}");
        assert_eq!(view["config"]["big_blind"], 2, "{view}");
        let id = view["id"].as_str().expect("id").to_string();
        // Every instance answers from Postgres; so does this one.
        assert_eq!(server.table(&id).await["game_kind"], "holdem");

        let mut c = WsClient::connect(&server, &mint_token("alice"))
            .await
            .expect("connect");
        c.send(json!({"type": "join", "table": id})).await;
        let snapshot = c
            .recv_type("snapshot", SECS(5))
            .await
            .unwrap_or_else(|| panic!("no snapshot: {:?}", c.seen));
        assert_eq!(snapshot["state"]["game_kind"], "holdem", "{snapshot}");
        // The hold'em view is where hold'em clients always found it.
        assert_eq!(snapshot["state"]["game"]["hand"], 0, "{snapshot}");
        c.close().await;
    }
    let (_, tables) = server.admin_get("/admin/tables").await;
    let kinds: Vec<&Value> = tables["tables"]
        .as_array()
        .expect("tables")
        .iter()
        .map(|t| &t["game_kind"])
        .collect();
    assert_eq!(kinds, [&json!("holdem"), &json!("holdem")], "{tables}");
}

#[tokio::test]
async fn a_game_this_build_does_not_host_is_bad_field_naming_game_and_creates_nothing() {
    let db = test_db().await;
    let env = unique_env();
    let server = Server::start(ServerConfig::new(&db, &env)).await;
    for game in [
        json!("checkers"),
        json!("Holdem"),
        json!(5),
        json!(["holdem"]),
    ] {
        let (status, v) = server
            .admin_post("/admin/tables", with_game(game.clone()))
            .await;
        assert_eq!(
            (status, v["error"]["code"].as_str()),
            (400, Some("bad_field")),
            "{game} → {v}"
        );
        let message = v["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("game") && message.contains("holdem"),
            "{game}: the message should name the field and the games: {message:?}"
        );
    }
    // An unknown field's refusal lists "game" among the fields.
    let mut body = common::table_config();
    body["colour"] = json!("red");
    let (status, v) = server.admin_post("/admin/tables", body).await;
    assert_eq!(status, 400, "{v}");
    let message = v["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("colour") && message.contains("game"),
        "{message}"
    );

    let (_, tables) = server.admin_get("/admin/tables").await;
    assert_eq!(tables["tables"], json!([]), "a table was created");
}
