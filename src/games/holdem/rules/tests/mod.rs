//! Rule-by-rule scenario tests for the table state machine, one child
//! module per topic; the helpers they share are here.

use super::*;

mod betting;
mod positions;
mod refusals;
mod seats;
mod visibility;
mod wire;

fn pid(s: &str) -> PlayerId {
    PlayerId(s.to_string())
}

fn config(seats: u8, sb: u64, bb: u64, ante: u64) -> TableConfig {
    TableConfig {
        small_blind: Chips(sb),
        big_blind: Chips(bb),
        ante: Chips(ante),
        seats,
        min_buy_in: Chips(bb),
        max_buy_in: Chips(bb * 1000),
    }
}

/// A table with players "p<seat>" at the given seats; the first hand's
/// button will be the lowest dealt-in seat.
fn table(cfg: TableConfig, stacks: &[(SeatNo, u64)]) -> Game {
    let seats = stacks
        .iter()
        .map(|&(s, c)| (s, pid(&format!("p{s}")), Chips(c)))
        .collect();
    Game::resume(cfg, 0, None, seats).expect("resume")
}

/// A deck dealing `holes` (two cards each, in dealing order: first the seat
/// after the button, clockwise) and then `board`, followed by the unused
/// cards.
fn rigged(holes: &[&str], board: &str) -> Vec<Card> {
    let mut deck: Vec<Card> = holes
        .iter()
        .flat_map(|h| h.split_whitespace())
        .chain(board.split_whitespace())
        .map(|c| c.parse().expect("card"))
        .collect();
    for c in standard_deck() {
        if !deck.contains(&c) {
            deck.push(c);
        }
    }
    assert_eq!(deck.len(), 52);
    deck
}

fn start(g: &mut Game, deck: Vec<Card>) -> Vec<Event> {
    g.apply(Command::StartHand { deck }).expect("start hand")
}

fn act(g: &mut Game, seat: SeatNo, action: Action) -> Vec<Event> {
    try_act(g, seat, action).unwrap_or_else(|e| panic!("seat {seat} {action:?}: {e}"))
}

/// An action answering the open decision.
fn act_cmd(g: &Game, seat: SeatNo, action: Action) -> Command {
    Command::Act {
        hand: g.hand_no(),
        seat,
        decision: g.decision().unwrap_or(0),
        action,
    }
}

fn try_act(g: &mut Game, seat: SeatNo, action: Action) -> Result<Vec<Event>, RuleError> {
    let cmd = act_cmd(g, seat, action);
    g.apply(cmd)
}

/// Asserts the command is refused with `err` and changes nothing.
fn refused(g: &mut Game, cmd: Command, err: RuleError) {
    let before = g.clone();
    let json = serde_json::to_string(g).expect("json");
    assert_eq!(g.apply(cmd.clone()), Err(err), "{cmd:?}");
    assert_eq!(*g, before);
    assert_eq!(serde_json::to_string(g).expect("json"), json);
}

fn stack(g: &Game, seat: SeatNo) -> u64 {
    g.seats()
        .iter()
        .find(|s| s.seat == seat)
        .map_or(0, |s| s.stack.0)
}

fn kinds(events: &[Event]) -> Vec<&EventKind> {
    events.iter().map(|e| &e.kind).collect()
}

fn actions(events: &[Event]) -> Vec<(SeatNo, ActionKind, u64)> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Action {
                seat,
                action,
                amount,
                ..
            } => Some((*seat, *action, amount.0)),
            _ => None,
        })
        .collect()
}

fn awards(events: &[Event]) -> Vec<(u64, Vec<SeatNo>)> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::PotAwarded { amount, seats, .. } => Some((amount.0, seats.clone())),
            _ => None,
        })
        .collect()
}

fn shown(events: &[Event]) -> Option<Vec<SeatNo>> {
    events.iter().find_map(|e| match &e.kind {
        EventKind::Showdown { hands, .. } => Some(hands.iter().map(|h| h.seat).collect()),
        _ => None,
    })
}

fn streets(events: &[Event]) -> Vec<Street> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Street { street, .. } => Some(*street),
            _ => None,
        })
        .collect()
}

/// Whoever is to act folds (or checks when free) until the hand ends.
fn fold_around(g: &mut Game) -> Vec<Event> {
    let mut all = Vec::new();
    while let Some(seat) = g.to_act() {
        let hand = g.hand_no();
        all.extend(g.apply(Command::Timeout { hand, seat }).expect("timeout"));
    }
    all
}

fn check_down(g: &mut Game) -> Vec<Event> {
    let mut all = Vec::new();
    while let Some(seat) = g.to_act() {
        let a = if g.legal_actions().contains(&LegalAction::Check) {
            Action::Check
        } else {
            Action::Call
        };
        all.extend(act(g, seat, a));
    }
    all
}
