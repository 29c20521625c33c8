//! Visibility: hole cards go only to their owner, a view shows only the
//! viewer's own cards, and at showdown a beaten hand is mucked, folded cards
//! stay hidden and a better hand shown after the first is tabled too.

use super::*;

#[test]
fn hole_cards_are_sent_only_to_their_owner() {
    let mut g = table(config(6, 1, 2, 0), &[(0, 100), (1, 100), (2, 100)]);
    let ev = start(&mut g, standard_deck());
    let mut seen = 0;
    for e in &ev {
        match &e.kind {
            EventKind::HoleCards { seat, .. } => {
                assert_eq!(e.to, Audience::Seat(*seat));
                seen += 1;
            }
            _ => assert_eq!(e.to, Audience::All),
        }
    }
    assert_eq!(seen, 3);
}

#[test]
fn view_shows_only_the_viewers_own_cards_during_a_hand() {
    let mut g = table(config(6, 1, 2, 0), &[(0, 100), (1, 100), (2, 100)]);
    start(&mut g, standard_deck());
    for viewer in [
        None,
        Some(pid("p0")),
        Some(pid("p1")),
        Some(pid("stranger")),
    ] {
        let view = g.view_for(viewer.as_ref());
        for s in &view.seats {
            let own = viewer.as_ref() == Some(&s.player);
            assert_eq!(s.cards.is_some(), own, "{viewer:?} sees seat {}", s.seat);
        }
        let mine = viewer.as_ref().and_then(|v| g.seat_of(v));
        assert_eq!(view.you, mine);
        assert_eq!(!view.legal.is_empty(), mine == Some(0));
    }
}

#[test]
fn at_showdown_a_beaten_hand_is_mucked_and_folded_cards_stay_hidden() {
    let mut g = table(config(6, 1, 2, 0), &[(0, 100), (1, 100), (2, 100)]);
    // Seat 1 folds; seat 2 bets the river and shows; seat 0 loses and mucks.
    let deck = rigged(&["Ac Ad", "Kc Kd", "2h 7s"], "Ks 3d 8h 9s Jc");
    start(&mut g, deck);
    act(&mut g, 0, Action::Call);
    act(&mut g, 1, Action::Fold);
    act(&mut g, 2, Action::Check);
    for _ in 0..2 {
        act(&mut g, 2, Action::Check);
        act(&mut g, 0, Action::Check);
    }
    act(&mut g, 2, Action::Bet(Chips(10)));
    let ev = act(&mut g, 0, Action::Call);
    assert_eq!(shown(&ev), Some(vec![2]));
    let view = g.view_for(None);
    let cards: Vec<(SeatNo, bool)> = view
        .seats
        .iter()
        .map(|s| (s.seat, s.cards.is_some()))
        .collect();
    assert_eq!(cards, vec![(0, false), (1, false), (2, true)]);
    assert_eq!(view.board.len(), 5);
    // The loser still sees their own cards.
    let own = g.view_for(Some(&pid("p0")));
    assert!(own.seats[0].cards.is_some());
}

#[test]
fn a_better_hand_shown_after_the_first_is_tabled_too() {
    let mut g = table(config(6, 1, 2, 0), &[(0, 100), (1, 100)]);
    // River checked through: the seat after the button (1) shows first.
    let deck = rigged(&["2h 7s", "Ac Ad"], "Ks 3d 8h 9s Jc");
    start(&mut g, deck);
    let ev = check_down(&mut g);
    let shown_hands = ev.iter().find_map(|e| match &e.kind {
        EventKind::Showdown { hands, .. } => Some(hands.clone()),
        _ => None,
    });
    let shown_hands = shown_hands.expect("showdown");
    assert_eq!(
        shown_hands.iter().map(|h| h.seat).collect::<Vec<_>>(),
        vec![1, 0]
    );
    assert_eq!(shown_hands[1].rank, "one pair, aces");
    assert_eq!(shown_hands[0].rank, "high card, king");
}
