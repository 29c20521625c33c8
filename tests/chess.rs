//! Chess on the runtime, black-box: real instances, real WebSockets, real
//! Postgres. Full games to checkmate direct (`/ws`) and relayed
//! (`/ws/relay`), a flag fall, threefold repetition and the fifty-move rule
//! reached by real moves, a draw by agreement, resignation, an illegal
//! move refused with nothing changed, `game_ended` told only once Postgres
//! holds the result and the settlement, stakes conserved, and a game that
//! survives a SIGKILL of its owner at the same position with its clocks.

mod common;

use std::time::{Duration, Instant};

use common::{mint_token, test_db, unique_env, Server, ServerConfig, TestDb, WsClient};
use cozy_chess::{Board, Piece};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(15);

fn last(c: &WsClient) -> Vec<&Value> {
    c.seen.iter().rev().take(6).collect()
}

/// The next event of `kind` that `pred` accepts.
async fn event(c: &mut WsClient, kind: &str, pred: impl Fn(&Value) -> bool) -> Value {
    let found = c
        .recv_until(
            |v| v["type"] == "event" && v["kind"] == kind && pred(v),
            WAIT,
        )
        .await;
    found.unwrap_or_else(|| panic!("no {kind} event; last frames: {:?}", last(c)))
}

async fn chess_table(server: &Server, clock_ms: u64, increment_ms: u64, stake: u64) -> String {
    let view = server
        .create_table(json!({
            "game": "chess", "clock_ms": clock_ms, "increment_ms": increment_ms, "stake": stake
        }))
        .await;
    assert_eq!(view["game_kind"], "chess", "{view}");
    view["id"].as_str().expect("id").to_string()
}

/// The boundaries Postgres holds for `table`: `(number, result)`.
async fn boundaries(db: &TestDb, table: &str) -> Vec<(i64, Value)> {
    sqlx::query_as("SELECT number, result FROM boundaries WHERE table_id = $1 ORDER BY number")
        .bind(table)
        .fetch_all(&db.pool().await)
        .await
        .expect("read boundaries")
}

/// The stacks Postgres holds for `table`'s seats, by seat.
async fn stacks(db: &TestDb, table: &str) -> Vec<(i16, String, i64)> {
    sqlx::query_as("SELECT seat, player, stack FROM seats WHERE table_id = $1 ORDER BY seat")
        .bind(table)
        .fetch_all(&db.pool().await)
        .await
        .expect("read seats")
}

/// Two players at a chess table: white in seat 0, black in seat 1.
struct Match {
    table: String,
    players: [WsClient; 2],
    /// The `turn` read last, while it is still open.
    open: Option<Value>,
}

impl Match {
    /// `white` connects to `at_white` and `black` to `at_black`; both join
    /// and sit with `stake`, and wait for the game to start.
    async fn sit(
        table: &str,
        (at_white, white): (&Server, &str),
        (at_black, black): (&Server, &str),
        stake: u64,
    ) -> Match {
        let mut players = Vec::new();
        for (seat, (server, name)) in [(at_white, white), (at_black, black)]
            .into_iter()
            .enumerate()
        {
            let mut c = WsClient::connect(server, &mint_token(name))
                .await
                .unwrap_or_else(|e| panic!("{name} connects: {e}"));
            c.send(json!({"type": "join", "table": table})).await;
            let snapshot = c.recv_type("snapshot", WAIT).await.expect("a snapshot");
            assert_eq!(snapshot["state"]["game_kind"], "chess", "{snapshot}");
            c.send(json!({"type": "sit", "table": table, "seat": seat, "buy_in": stake}))
                .await;
            event(&mut c, "seated", |v| v["seat"] == seat).await;
            players.push(c);
        }
        let players: [WsClient; 2] = players.try_into().ok().expect("two players");
        let mut m = Match {
            table: table.to_string(),
            players,
            open: None,
        };
        for c in &mut m.players {
            event(c, "game_started", |_| true).await;
        }
        m
    }

    fn act(&self, decision: u64, fields: Value) -> Value {
        let mut frame = json!({"type": "act", "table": self.table, "decision": decision});
        for (k, v) in fields.as_object().expect("fields") {
            frame[k] = v.clone();
        }
        frame
    }

    /// `seat`'s open turn: the one read already, or the next `turn` event.
    async fn turn(&mut self, seat: usize) -> Value {
        if let Some(open) = self.open.as_ref().filter(|t| t["seat"] == seat) {
            return open.clone();
        }
        let turn = event(&mut self.players[seat], "turn", |v| v["seat"] == seat).await;
        self.open = Some(turn.clone());
        turn
    }

    /// `seat` sends `frame`, an act that answers the open turn.
    async fn send(&mut self, seat: usize, frame: Value) {
        self.open = None;
        self.players[seat].send(frame).await;
    }

    /// Plays `moves` (UCI) from the side to move; the last `action` event
    /// each player saw, or the `game_ended` that ended it.
    async fn play(&mut self, moves: &[&str]) -> Value {
        let mut told = Value::Null;
        for mv in moves {
            let seat = self.mover();
            let turn = self.turn(seat).await;
            assert!(
                turn["legal"]
                    .as_array()
                    .expect("legal")
                    .contains(&json!(mv)),
                "{mv} is not listed as legal: {turn}"
            );
            let frame = self.act(
                turn["decision"].as_u64().expect("decision"),
                json!({"action": "move", "move": mv}),
            );
            self.send(seat, frame).await;
            for c in &mut self.players {
                told = event(c, "action", |v| v["move"] == *mv).await;
            }
        }
        told
    }

    /// Whose move it is, by the last `turn` either player saw.
    fn mover(&self) -> usize {
        let last_turn = self.players[0]
            .seen
            .iter()
            .rev()
            .find(|v| v["kind"] == "turn" || v["kind"] == "action");
        match last_turn {
            Some(v) if v["kind"] == "turn" => v["seat"].as_u64().expect("seat") as usize,
            Some(v) => 1 - v["seat"].as_u64().expect("seat") as usize,
            None => 0,
        }
    }

    /// Both players' `game_ended`, which must agree.
    async fn ended(&mut self) -> Value {
        let mut ended = Vec::new();
        for c in &mut self.players {
            ended.push(event(c, "game_ended", |_| true).await);
        }
        assert_eq!(ended[0], ended[1], "both were told the same end");
        ended.remove(0)
    }
}

/// A `game_ended` is told only once Postgres holds its boundary: checked
/// the moment it arrives.
async fn recorded_when_told(db: &TestDb, table: &str, ended: &Value) -> Value {
    let game = ended["game"].as_i64().expect("game");
    let rows = boundaries(db, table).await;
    let row = rows.iter().find(|(n, _)| *n == game);
    let (_, result) =
        row.unwrap_or_else(|| panic!("game {game} told ended but not recorded: {rows:?}"));
    assert_eq!(result["result"], ended["result"], "{result}");
    assert_eq!(result["reason"], ended["reason"], "{result}");
    assert_eq!(result["moves"], ended["moves"], "{result}");
    result.clone()
}

fn config(db: &TestDb, env: &str) -> ServerConfig {
    ServerConfig::new(db, env)
        .with_env("PITBOSS__TABLE__NEXT_HAND_DELAY_MS", "300")
        .with_env("PITBOSS__WS__RATE_PER_SEC", "500")
        .with_env("PITBOSS__WS__RATE_BURST", "1000")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_game_to_checkmate_over_ws_settles_the_stakes_and_an_illegal_move_changes_nothing() {
    let db = test_db().await;
    let env = unique_env();
    let a = Server::start(config(&db, &env).with_instance("chess-a")).await;
    // A bad config is refused, naming the field.
    let (status, refused) = a
        .admin_post(
            "/admin/tables",
            json!({"game": "chess", "clock_ms": 5, "stake": 0}),
        )
        .await;
    assert_eq!(
        (status, &refused["error"]["code"]),
        (400, &json!("bad_field")),
        "{refused}"
    );
    let t = chess_table(&a, 300_000, 2_000, 100).await;
    a.grant("alice", 1_000).await;
    a.grant("bob", 1_000).await;

    // A buy-in other than the stake is refused and debits nothing.
    let mut carol = WsClient::connect(&a, &mint_token("alice"))
        .await
        .expect("connect");
    carol.send(json!({"type": "join", "table": t})).await;
    carol.recv_type("snapshot", WAIT).await.expect("snapshot");
    carol
        .send(json!({"type": "sit", "table": t, "seat": 0, "buy_in": 99}))
        .await;
    let e = carol.recv_type("error", WAIT).await.expect("refused");
    assert_eq!(e["code"], "buy_in_out_of_range", "{e}");
    carol.close().await;

    let mut m = Match::sit(&t, (&a, "alice"), (&a, "bob"), 100).await;
    assert_eq!(a.audit().await["delta"], 0);
    let turn = m.turn(0).await;
    assert_eq!(turn["clocks_ms"], json!([300_000, 300_000]), "{turn}");
    assert_eq!(turn["legal"].as_array().map(Vec::len), Some(20), "{turn}");

    // An illegal move, a move out of turn and a stale decision are refused
    // with the protocol's codes; nothing changes.
    let d = turn["decision"].as_u64().expect("decision");
    let mut watcher = WsClient::connect(&a, &mint_token("watcher"))
        .await
        .expect("watcher");
    watcher.send(json!({"type": "join", "table": t})).await;
    let before = watcher.recv_type("snapshot", WAIT).await.expect("snapshot");
    for (seat, frame, code) in [
        (
            0,
            m.act(d, json!({"action": "move", "move": "e2e5"})),
            "illegal_action",
        ),
        (
            0,
            m.act(d, json!({"action": "move", "move": "e7e5"})),
            "illegal_action",
        ),
        (
            1,
            m.act(d, json!({"action": "move", "move": "e7e5"})),
            "not_your_turn",
        ),
        (
            0,
            m.act(d + 5, json!({"action": "move", "move": "e2e4"})),
            "stale_decision",
        ),
        (0, m.act(d, json!({"action": "castle"})), "bad_field"),
    ] {
        m.players[seat].send(frame).await;
        let e = m.players[seat]
            .recv_type("error", WAIT)
            .await
            .expect("refused");
        assert_eq!(e["code"], code, "{e}");
    }
    watcher.send(json!({"type": "join", "table": t})).await;
    let after = watcher.recv_type("snapshot", WAIT).await.expect("snapshot");
    assert_eq!(
        after["state"]["game"], before["state"]["game"],
        "nothing changed"
    );
    assert_eq!(after["seq"], before["seq"], "nothing was told");

    // Scholar's mate.
    let told = m
        .play(&["e2e4", "e7e5", "f1c4", "b8c6", "d1h5", "g8f6"])
        .await;
    assert_eq!(told["san"], "Nf6", "{told}");
    assert_eq!(
        told["fen"],
        "r1bqkb1r/pppp1ppp/2n2n2/4p2Q/2B1P3/8/PPPP1PPP/RNB1K1NR w KQkq - 4 4"
    );
    let seat = m.mover();
    let turn = m.turn(seat).await;
    // Each side was charged its time and given the increment.
    let clocks = turn["clocks_ms"].as_array().expect("clocks").clone();
    for c in &clocks {
        let ms = c.as_u64().expect("ms");
        assert!(ms > 290_000 && ms <= 306_000, "{turn}");
    }
    let mate = m.play(&["h5f7"]).await;
    assert_eq!(mate["san"], "Qxf7#");
    let ended = m.ended().await;
    let result = recorded_when_told(&db, &t, &ended).await;
    assert_eq!(
        (&ended["result"], &ended["reason"]),
        (&json!("1-0"), &json!("checkmate"))
    );
    assert_eq!(ended["moves"].as_array().map(Vec::len), Some(7));
    assert_eq!(result["game"], 1);
    // The winner takes both stakes.
    assert_eq!(
        stacks(&db, &t).await,
        vec![(0, "alice".into(), 200), (1, "bob".into(), 0)]
    );
    assert_eq!(
        ended["stacks"],
        json!([{"seat": 0, "player": "alice", "stack": 200}, {"seat": 1, "player": "bob", "stack": 0}])
    );
    assert_eq!(a.audit().await["delta"], 0);
    // The snapshot after the end shows the result and the final position.
    watcher.send(json!({"type": "join", "table": t})).await;
    let snap = watcher.recv_type("snapshot", WAIT).await.expect("snapshot");
    let game = &snap["state"]["game"];
    assert_eq!(
        (&game["result"], &game["reason"]),
        (&json!("1-0"), &json!("checkmate")),
        "{game}"
    );
    assert_eq!(game["to_act"], Value::Null);
    assert_eq!(game["moves"], ended["moves"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_game_to_checkmate_over_the_relay_and_a_flag_fall() {
    let db = test_db().await;
    let env = unique_env();
    let cfg = config(&db, &env);
    let a = Server::start(cfg.clone().with_instance("relay-a")).await;
    let b = Server::start(cfg.with_instance("relay-b")).await;
    let t = chess_table(&a, 60_000, 0, 0).await;
    // Hosted at A (its creator); both players connect to B and play
    // through B's relay. A stake of 0 needs no wallet.
    let mut m = Match::sit(&t, (&b, "wanda"), (&b, "bart"), 0).await;
    let owner = a.table(&t).await["owner"].clone();
    assert_eq!(owner, "relay-a");
    m.play(&["f2f3", "e7e5", "g2g4"]).await;
    m.play(&["d8h4"]).await;
    let ended = m.ended().await;
    assert_eq!(
        (&ended["result"], &ended["reason"]),
        (&json!("0-1"), &json!("checkmate"))
    );
    recorded_when_told(&db, &t, &ended).await;
    assert_eq!(a.audit().await["delta"], 0);

    // Game 2 starts by itself. White moves; black lets the clock run out:
    // 2 s, as this table's clock is (a table of its own).
    let t = chess_table(&a, 2_000, 0, 0).await;
    let mut m = Match::sit(&t, (&a, "wanda"), (&b, "bart"), 0).await;
    m.play(&["e2e4"]).await;
    let started = Instant::now();
    let ended = m.ended().await;
    assert!(
        started.elapsed() >= Duration::from_millis(1_500),
        "the flag fell at the clock's end"
    );
    assert_eq!(
        (&ended["result"], &ended["reason"]),
        (&json!("1-0"), &json!("timeout"))
    );
    assert_eq!(ended["clocks_ms"][1], 0, "{ended}");
    recorded_when_told(&db, &t, &ended).await;
}

/// A line of quiet moves from the start that never repeats a position: a
/// few pawn moves to free the pieces, then piece moves that capture
/// nothing, chosen so that no position stands twice, until the fifty-move
/// rule ends the game.
fn fifty_quiet_moves() -> Vec<String> {
    let mut board = Board::default();
    let mut line: Vec<String> = Vec::new();
    for uci in [
        "e2e4", "e7e5", "d2d4", "d7d5", "b2b3", "b7b6", "g2g3", "g7g6",
    ] {
        let mv = cozy_chess::util::parse_uci_move(&board, uci).expect("uci");
        board.play(mv);
        line.push(uci.into());
    }
    let mut seen = vec![board.clone()];
    while board.halfmove_clock() < 100 {
        let mut next = None;
        board.generate_moves(|moves| {
            for mv in moves {
                if moves.piece == Piece::Pawn || board.occupied().has(mv.to) {
                    continue;
                }
                let mut after = board.clone();
                after.play(mv);
                let fresh = !seen.iter().any(|p| p.same_position(&after));
                if fresh && after.checkers().is_empty() && after.generate_moves(|_| true) {
                    next = Some(mv);
                    return true;
                }
            }
            false
        });
        let mv = next.expect("a quiet move to a new position");
        line.push(cozy_chess::util::display_uci_move(&board, mv).to_string());
        board.play(mv);
        seen.push(board.clone());
    }
    line
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn threefold_repetition_and_the_fifty_move_rule_end_games_by_themselves() {
    let db = test_db().await;
    let env = unique_env();
    let a = Server::start(config(&db, &env).with_instance("draws-a")).await;

    let t = chess_table(&a, 300_000, 0, 0).await;
    let mut m = Match::sit(&t, (&a, "ann"), (&a, "ben"), 0).await;
    m.play(&[
        "g1f3", "g8f6", "f3g1", "f6g8", "g1f3", "g8f6", "f3g1", "f6g8",
    ])
    .await;
    let ended = m.ended().await;
    assert_eq!(
        (&ended["result"], &ended["reason"]),
        (&json!("1/2-1/2"), &json!("threefold_repetition"))
    );
    recorded_when_told(&db, &t, &ended).await;

    let t = chess_table(&a, 300_000, 0, 0).await;
    let mut m = Match::sit(&t, (&a, "ann"), (&a, "ben"), 0).await;
    let line = fifty_quiet_moves();
    let moves: Vec<&str> = line.iter().map(String::as_str).collect();
    m.play(&moves).await;
    let ended = m.ended().await;
    assert_eq!(
        (&ended["result"], &ended["reason"]),
        (&json!("1/2-1/2"), &json!("fifty_moves"))
    );
    assert_eq!(ended["moves"].as_array().map(Vec::len), Some(line.len()));
    recorded_when_told(&db, &t, &ended).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_draw_by_agreement_returns_each_stake_and_a_resignation_pays_the_other_side() {
    let db = test_db().await;
    let env = unique_env();
    let a = Server::start(config(&db, &env).with_instance("agree-a")).await;
    let t = chess_table(&a, 300_000, 0, 50).await;
    a.grant("cleo", 100).await;
    a.grant("dave", 100).await;
    let mut m = Match::sit(&t, (&a, "cleo"), (&a, "dave"), 50).await;
    m.play(&["d2d4", "d7d5"]).await;
    // White offers on its move; black may not accept its own offer, and
    // accepts white's.
    let turn = m.turn(0).await;
    let d = turn["decision"].as_u64().unwrap();
    m.send(0, m.act(d, json!({"action": "offer_draw"}))).await;
    for c in &mut m.players {
        event(c, "draw_offered", |v| v["seat"] == 0).await;
    }
    m.send(0, m.act(d, json!({"action": "accept_draw"}))).await;
    let e = m.players[0]
        .recv_type("error", WAIT)
        .await
        .expect("refused");
    assert_eq!(e["code"], "illegal_action", "{e}");
    m.send(1, m.act(d, json!({"action": "accept_draw"}))).await;
    let ended = m.ended().await;
    assert_eq!(
        (&ended["result"], &ended["reason"]),
        (&json!("1/2-1/2"), &json!("agreement"))
    );
    recorded_when_told(&db, &t, &ended).await;
    assert_eq!(
        stacks(&db, &t).await,
        vec![(0, "cleo".into(), 50), (1, "dave".into(), 50)]
    );

    // The next game starts by itself; black resigns while white is to move.
    for c in &mut m.players {
        event(c, "game_started", |v| v["game"] == 2).await;
    }
    let turn = m.turn(0).await;
    m.send(
        1,
        m.act(
            turn["decision"].as_u64().unwrap(),
            json!({"action": "resign"}),
        ),
    )
    .await;
    let ended = m.ended().await;
    assert_eq!(
        (&ended["result"], &ended["reason"]),
        (&json!("1-0"), &json!("resignation"))
    );
    recorded_when_told(&db, &t, &ended).await;
    assert_eq!(
        stacks(&db, &t).await,
        vec![(0, "cleo".into(), 100), (1, "dave".into(), 0)]
    );
    assert_eq!(a.audit().await["delta"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_sigkilled_owner_s_game_resumes_elsewhere_at_the_same_position_with_its_clocks() {
    let db = test_db().await;
    let env = unique_env();
    let cfg = config(&db, &env).with_ttl_ms(1_500);
    let a = Server::start(cfg.clone().with_instance("kill-a")).await;
    let b = Server::start(cfg.with_instance("kill-b")).await;
    let t = chess_table(&a, 120_000, 1_000, 25).await;
    b.grant("erin", 100).await;
    b.grant("finn", 100).await;
    // Both play through B; A hosts.
    let mut m = Match::sit(&t, (&b, "erin"), (&b, "finn"), 25).await;
    m.play(&["f2f3", "e7e5"]).await;
    let turn = m.turn(0).await;
    let told_at = Instant::now();
    let before = turn["clocks_ms"].clone();
    let deadline = turn["deadline_ms"].as_i64().expect("deadline");
    a.sigkill();

    // The heir (B) hosts the table, and the players, relayed until now,
    // are told the same position, decision and clocks.
    let resumed = m.players[0]
        .recv_until(
            |v| {
                (v["type"] == "snapshot" && v["state"]["owner"] == "kill-b")
                    || (v["type"] == "event"
                        && v["kind"] == "turn"
                        && (v["seq"].as_u64().unwrap_or(0) >> 32)
                            > (turn["seq"].as_u64().unwrap_or(0) >> 32))
            },
            Duration::from_secs(20),
        )
        .await
        .unwrap_or_else(|| panic!("not resumed: {:?}", last(&m.players[0])));
    let mut fresh = WsClient::connect(&b, &mint_token("watcher"))
        .await
        .expect("watcher");
    fresh.send(json!({"type": "join", "table": t})).await;
    let snap = fresh.recv_type("snapshot", WAIT).await.expect("snapshot");
    let game = &snap["state"]["game"];
    assert_eq!(snap["state"]["owner"], "kill-b", "{snap}");
    assert_eq!(game["moves"], json!(["f2f3", "e7e5"]), "{game}");
    assert_eq!(
        game["fen"],
        "rnbqkbnr/pppp1ppp/8/4p3/8/5P2/PPPPP1PP/RNBQKBNR w KQkq e6 0 2"
    );
    assert_eq!(game["to_act"], 0);
    assert_eq!(game["decision"], turn["decision"]);
    assert_eq!(game["clocks_ms"], before, "each side's clock as it was");
    // White's clock runs on from where it stood: what is left is at most
    // what it had, less the time since its turn opened (the time the owner
    // was gone is not given back, and nothing more is taken).
    let left = snap["state"]["action_deadline_ms"]
        .as_i64()
        .expect("deadline")
        - chrono_now_ms();
    let had = before[0].as_i64().unwrap();
    assert_eq!(
        snap["state"]["action_deadline_ms"].as_i64(),
        Some(deadline),
        "{snap}"
    );
    assert!(
        left <= had && left >= had - told_at.elapsed().as_millis() as i64 - 1_000,
        "{left} of {had}"
    );
    assert!(resumed["seq"].as_u64() > turn["seq"].as_u64(), "{resumed}");

    // The game ends normally at the new owner, recorded under its fence.
    let d = game["decision"].as_u64().expect("decision");
    m.send(0, m.act(d, json!({"action": "move", "move": "g2g4"})))
        .await;
    for c in &mut m.players {
        event(c, "action", |v| v["move"] == "g2g4").await;
    }
    m.play(&["d8h4"]).await;
    let ended = m.ended().await;
    assert_eq!(
        (&ended["result"], &ended["reason"]),
        (&json!("0-1"), &json!("checkmate"))
    );
    recorded_when_told(&db, &t, &ended).await;
    assert_eq!(
        stacks(&db, &t).await,
        vec![(0, "erin".into(), 0), (1, "finn".into(), 50)]
    );
    assert_eq!(b.audit().await["delta"], 0);
}

fn chrono_now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
