//! Shared pieces of the black-box tests: scripted players (each answers its
//! own `turn` events with a fixed policy and records what it receives) and
//! small readers of metrics, table views and seats.
#![allow(dead_code)]

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sqlx::Row;
use tokio::task::JoinHandle;

use crate::common::{Server, WsClient};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Check when possible, else call.
    CheckCall,
    /// Check when possible, else fold.
    CheckFold,
    /// Go all-in at every turn.
    AllIn,
    /// Never act: the action clock decides.
    Idle,
}

/// Picks the frame to send for a `turn` event, if any.
pub fn choose(policy: Policy, table: &str, turn: &Value) -> Option<Value> {
    let legal: Vec<&str> = turn["legal"]
        .as_array()?
        .iter()
        .filter_map(|l| l["action"].as_str())
        .collect();
    let action = match policy {
        Policy::Idle => return None,
        Policy::CheckCall if legal.contains(&"check") => "check",
        Policy::CheckCall if legal.contains(&"call") => "call",
        Policy::CheckCall => "all_in",
        Policy::CheckFold if legal.contains(&"check") => "check",
        Policy::CheckFold => "fold",
        Policy::AllIn if legal.contains(&"all_in") => "all_in",
        Policy::AllIn if legal.contains(&"check") => "check",
        Policy::AllIn => "call",
    };
    Some(json!({
        "type": "act", "table": table, "hand": turn["hand"], "decision": turn["decision"], "action": action
    }))
}

/// A connected, joined and seated player.
pub struct Player {
    pub name: String,
    pub seat: u64,
    pub client: WsClient,
}

impl Player {
    /// Connects, joins and sits; waits until the `seated` event for this
    /// player arrives.
    pub async fn sit(server: &Server, table: &str, name: &str, seat: u64, buy_in: u64) -> Player {
        let token = crate::common::mint_token(name);
        let mut client = WsClient::connect(server, &token)
            .await
            .unwrap_or_else(|e| panic!("{name} could not connect: {e}"));
        client.send(json!({"type": "join", "table": table})).await;
        client
            .recv_type("snapshot", Duration::from_secs(10))
            .await
            .unwrap_or_else(|| panic!("{name} got no snapshot: {:?}", client.seen));
        client
            .send(json!({"type": "sit", "table": table, "seat": seat, "buy_in": buy_in}))
            .await;
        client
            .recv_until(
                |v| v["kind"] == "seated" && v["player"] == name,
                Duration::from_secs(10),
            )
            .await
            .unwrap_or_else(|| panic!("{name} was not seated: {:?}", client.seen));
        Player {
            name: name.to_string(),
            seat,
            client,
        }
    }

    pub fn hands_ended(&self) -> Vec<u64> {
        self.client
            .seen
            .iter()
            .filter(|v| v["kind"] == "hand_ended")
            .filter_map(|v| v["hand"].as_u64())
            .collect()
    }

    /// Plays its turns with `policy` until `stop` says so or `timeout`
    /// passes; returns whether `stop` was reached.
    pub async fn play_until(
        &mut self,
        table: &str,
        policy: Policy,
        timeout: Duration,
        stop: impl Fn(&WsClient) -> bool,
    ) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if stop(&self.client) {
                return true;
            }
            let Some(v) = self.client.recv_json(Duration::from_millis(200)).await else {
                if self.client.closed.is_some() {
                    return stop(&self.client);
                }
                continue;
            };
            if v["kind"] == "turn" && v["seat"].as_u64() == Some(self.seat) && v["table"] == table {
                if let Some(frame) = choose(policy, table, &v) {
                    self.client.send(frame).await;
                }
            }
        }
        stop(&self.client)
    }
}

/// Runs every player on its own task until each has seen `hands` more
/// `hand_ended` events (or the timeout); gives the players back.
pub async fn play_hands(
    players: Vec<(Player, Policy)>,
    table: &str,
    hands: usize,
    timeout: Duration,
) -> Vec<Player> {
    let tasks: Vec<JoinHandle<Player>> = players
        .into_iter()
        .map(|(mut p, policy)| {
            let table = table.to_string();
            tokio::spawn(async move {
                let target = p.hands_ended().len() + hands;
                p.play_until(&table, policy, timeout, |c| {
                    c.seen.iter().filter(|v| v["kind"] == "hand_ended").count() >= target
                })
                .await;
                p
            })
        })
        .collect();
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.expect("player task panicked"));
    }
    out
}

/// Spawns a player that keeps playing until its connection closes, its
/// table freezes, or `timeout`.
pub fn spawn_forever(
    mut p: Player,
    table: &str,
    policy: Policy,
    timeout: Duration,
) -> JoinHandle<Player> {
    let table = table.to_string();
    tokio::spawn(async move {
        p.play_until(&table, policy, timeout, |c| {
            c.closed.is_some() || c.seen.iter().any(|v| v["type"] == "frozen")
        })
        .await;
        p
    })
}

/// A sample's value from Prometheus text (`name{labels}` as written), 0 if
/// the series does not exist yet.
pub fn metric(text: &str, name_and_labels: &str) -> f64 {
    text.lines()
        .find(|l| l.starts_with(name_and_labels))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

/// Polls the admin view until the table is in `state`; the view, or `None`.
pub async fn wait_state(
    server: &Server,
    table: &str,
    state: &str,
    within: Duration,
) -> Option<Value> {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        let v = server.table(table).await;
        if v["state"] == state {
            return Some(v);
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    None
}

/// Seat → stack as Postgres holds them.
pub async fn db_stacks(pool: &sqlx::PgPool, table: &str) -> HashMap<u64, u64> {
    sqlx::query("SELECT seat, stack FROM seats WHERE table_id = $1")
        .bind(table)
        .fetch_all(pool)
        .await
        .expect("read seats")
        .iter()
        .map(|r| {
            (
                r.get::<i16, _>("seat") as u64,
                r.get::<i64, _>("stack") as u64,
            )
        })
        .collect()
}

/// Seat → stack from a `hand_ended` or `hand_voided` event.
pub fn stacks_of(ev: &Value) -> HashMap<u64, u64> {
    ev["stacks"]
        .as_array()
        .expect("stacks")
        .iter()
        .map(|s| {
            (
                s["seat"].as_u64().expect("seat"),
                s["stack"].as_u64().expect("stack"),
            )
        })
        .collect()
}

/// A new table with the default config on `server`; its id.
pub async fn new_table(server: &Server) -> String {
    server.create_table(crate::common::table_config()).await["id"]
        .as_str()
        .expect("id")
        .to_string()
}

/// A fresh table on `server` with alice in seat 0 and bob in seat 1, each
/// granted 1000 chips and bought in for `buy_in`.
pub async fn heads_up(server: &Server, buy_in: u64) -> (String, Player, Player) {
    let t = new_table(server).await;
    server.grant("alice", 1000).await;
    server.grant("bob", 1000).await;
    let alice = Player::sit(server, &t, "alice", 0, buy_in).await;
    let bob = Player::sit(server, &t, "bob", 1, buy_in).await;
    (t, alice, bob)
}

/// A heads-up table (`heads_up`) and its first hand's first `turn`: the
/// player the turn names, the other player, and the event.
pub async fn heads_up_first_turn(server: &Server, buy_in: u64) -> (String, Player, Player, Value) {
    let (t, mut alice, bob) = heads_up(server, buy_in).await;
    let turn = alice
        .client
        .recv_event("turn", Duration::from_secs(10))
        .await
        .expect("the first hand's turn");
    if turn["seat"].as_u64() == Some(alice.seat) {
        (t, alice, bob, turn)
    } else {
        (t, bob, alice, turn)
    }
}

/// What `p` was told across a pause: never `frozen`, a `paused` with
/// `reason`, and later a `resumed`. Returns where the first `paused` and the
/// `resumed` after it stand in what it saw.
pub fn paused_then_resumed(p: &Player, reason: &str) -> (usize, usize) {
    let seen = &p.client.seen;
    assert!(
        !seen.iter().any(|v| v["type"] == "frozen"),
        "{} was never told frozen",
        p.name
    );
    let paused = seen
        .iter()
        .position(|v| v["type"] == "paused")
        .unwrap_or_else(|| panic!("{} was told paused: {:?}", p.name, seen.last()));
    assert_eq!(seen[paused]["reason"], reason, "{}", seen[paused]);
    let resumed = seen[paused..]
        .iter()
        .position(|v| v["type"] == "resumed")
        .map(|i| i + paused)
        .unwrap_or_else(|| panic!("{} was told resumed", p.name));
    (paused, resumed)
}

/// No state transition of `table` ever went to `frozen`.
pub async fn no_freeze_recorded(server: &Server, table: &str) {
    let (_, events) = server
        .admin_get(&format!("/admin/tables/{table}/events"))
        .await;
    assert!(
        !events["events"]
            .as_array()
            .expect("events")
            .iter()
            .any(|e| e["to"] == "frozen"),
        "{events}"
    );
}

/// Plays `players` (check or call) at `table` until each has seen `hands`
/// more hands; checks that each kept its connection, finished them, and was
/// never told `frozen`.
pub async fn play_on_unfrozen(players: Vec<Player>, table: &str, hands: usize) -> Vec<Player> {
    let before: Vec<usize> = players.iter().map(|p| p.hands_ended().len()).collect();
    let players = play_hands(
        players
            .into_iter()
            .map(|p| (p, Policy::CheckCall))
            .collect(),
        table,
        hands,
        Duration::from_secs(30),
    )
    .await;
    for (p, n) in players.iter().zip(before) {
        assert!(p.client.closed.is_none(), "{} kept its connection", p.name);
        assert!(
            p.hands_ended().len() >= n + hands,
            "{} played on: {:?}",
            p.name,
            p.client.seen.last()
        );
        assert!(
            !p.client.seen.iter().any(|v| v["type"] == "frozen"),
            "{} was told frozen",
            p.name
        );
    }
    players
}
