//! The fan-out without an actor: numbering, audiences, replay, the kept
//! history, and letting go of watchers that are gone or too slow.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use super::*;

/// A transport end that takes frames up to `cap` bytes and records what it
/// was sent and told.
struct TestWatcher {
    cap: usize,
    queued: Mutex<usize>,
    frames: Mutex<Vec<String>>,
    notices: Mutex<Vec<String>>,
    connected: AtomicBool,
}

impl TestWatcher {
    fn new(cap: usize) -> Arc<TestWatcher> {
        Arc::new(TestWatcher {
            cap,
            queued: Mutex::new(0),
            frames: Mutex::new(Vec::new()),
            notices: Mutex::new(Vec::new()),
            connected: AtomicBool::new(true),
        })
    }

    fn frames(&self) -> Vec<String> {
        self.frames.lock().unwrap().clone()
    }

    fn notices(&self) -> Vec<String> {
        self.notices.lock().unwrap().clone()
    }
}

impl Watcher for TestWatcher {
    fn offer(&self, frame: &Arc<str>) -> Delivery {
        if !self.connected() {
            return Delivery::Gone;
        }
        let mut queued = self.queued.lock().unwrap();
        if *queued + frame.len() > self.cap {
            return Delivery::TooSlow;
        }
        *queued += frame.len();
        self.frames.lock().unwrap().push(frame.to_string());
        Delivery::Queued
    }

    fn notify(&self, notice: Outbound) {
        let text = match notice {
            Outbound::Frame(f) => format!("frame {f}"),
            Outbound::Unsubscribed(t) => format!("unsubscribed {t}"),
            Outbound::Released(t) => format!("released {t}"),
            Outbound::Moved(t) => format!("moved {t}"),
        };
        self.notices.lock().unwrap().push(text);
    }

    fn connected(&self) -> bool {
        self.connected.load(Ordering::Relaxed)
    }
}

fn table() -> TableId {
    TableId::parse("tbl_fanout").unwrap()
}

fn player(name: &str) -> PlayerId {
    PlayerId(name.to_string())
}

fn sub(name: &str, w: &Arc<TestWatcher>) -> Subscriber {
    Subscriber {
        player: player(name),
        watcher: w.clone(),
    }
}

fn snap() -> Arc<str> {
    Arc::from("snap")
}

fn event(seq: u64) -> Arc<str> {
    Arc::from(format!("e{seq}").as_str())
}

/// Each case joins on a session of its own, `name` with `since`, and must
/// be sent exactly `want`.
fn assert_joins<const N: usize>(f: &mut Fanout, cases: [(&str, Option<u64>, Vec<String>); N]) {
    for (i, (name, since, want)) in cases.into_iter().enumerate() {
        let w = TestWatcher::new(1 << 20);
        f.subscribe(10 + i as u64, sub(name, &w), since, &snap(), None)
            .unwrap();
        assert_eq!(w.frames(), want, "{name} since {since:?}");
    }
}

#[test]
fn events_are_numbered_from_the_fences_epoch_and_each_goes_to_whom_may_see_it() {
    let mut f = Fanout::new(table(), Fence(3), 10);
    let epoch = 3 << 32;
    assert_eq!(f.seq(), epoch);
    let (alice, bob) = (TestWatcher::new(1 << 20), TestWatcher::new(1 << 20));
    f.subscribe(1, sub("alice", &alice), None, &snap(), None)
        .unwrap();
    f.subscribe(2, sub("bob", &bob), None, &snap(), None)
        .unwrap();
    assert!(f.publish(None, event).is_empty());
    assert!(f.publish(Some(player("alice")), event).is_empty());
    assert_eq!(f.seq(), epoch + 2);
    let (e1, e2) = (format!("e{}", epoch + 1), format!("e{}", epoch + 2));
    assert_eq!(alice.frames(), ["snap", e1.as_str(), e2.as_str()]);
    assert_eq!(
        bob.frames(),
        ["snap", e1.as_str()],
        "alice's event is hers alone"
    );
}

#[test]
fn a_resume_replays_what_it_missed_while_kept_else_it_gets_a_snapshot() {
    let mut f = Fanout::new(table(), Fence(1), 2);
    let epoch = 1 << 32;
    for _ in 0..3 {
        f.publish(None, event);
    }
    f.publish(Some(player("alice")), event);
    // Kept: the last two (epoch+3 and alice's epoch+4).
    let cases = [
        ("carol", Some(epoch + 2), vec![format!("e{}", epoch + 3)]),
        (
            "alice",
            Some(epoch + 2),
            vec![format!("e{}", epoch + 3), format!("e{}", epoch + 4)],
        ),
        // Older than the kept history, from the future, or none at all.
        ("dave", Some(epoch + 1), vec!["snap".to_string()]),
        ("erin", Some(epoch + 9), vec!["snap".to_string()]),
        ("fay", None, vec!["snap".to_string()]),
        // Up to date: nothing to send.
        ("gus", Some(epoch + 4), vec![]),
    ];
    assert_joins(&mut f, cases);
}

#[test]
fn a_second_join_of_a_session_sends_only_what_comes_next() {
    let mut f = Fanout::new(table(), Fence(1), 10);
    let w = TestWatcher::new(1 << 20);
    f.subscribe(1, sub("alice", &w), None, &snap(), None)
        .unwrap();
    f.publish(None, event);
    // The same session joins again with an older `since`.
    f.subscribe(1, sub("alice", &w), Some(1 << 32), &snap(), None)
        .unwrap();
    f.publish(None, event);
    let e = |n: u64| format!("e{}", (1u64 << 32) + n);
    assert_eq!(
        w.frames(),
        ["snap".to_string(), e(1), e(2)],
        "nothing twice"
    );
}

#[test]
fn a_watcher_too_slow_is_let_go_and_told_so_and_a_gone_one_silently() {
    let mut f = Fanout::new(table(), Fence(1), 10);
    // Room for the snapshot and one event only.
    let slow = TestWatcher::new(4 + 12);
    let gone = TestWatcher::new(1 << 20);
    let fine = TestWatcher::new(1 << 20);
    f.subscribe(1, sub("slow", &slow), None, &snap(), None)
        .unwrap();
    f.subscribe(2, sub("gone", &gone), None, &snap(), None)
        .unwrap();
    f.subscribe(3, sub("fine", &fine), None, &snap(), None)
        .unwrap();
    assert!(f.publish(None, event).is_empty());
    gone.connected.store(false, Ordering::Relaxed);
    let dropped = f.publish(None, event);
    let mut who: Vec<(String, bool)> = dropped
        .iter()
        .map(|d| (d.sub.player.0.clone(), d.too_slow))
        .collect();
    who.sort();
    assert_eq!(who, [("gone".into(), false), ("slow".into(), true)]);
    assert_eq!(slow.notices(), ["unsubscribed tbl_fanout"]);
    assert!(gone.notices().is_empty());
    assert!(!f.is_watching(&player("slow")) && !f.is_watching(&player("gone")));
    assert!(f.is_watching(&player("fine")));
    assert_eq!(fine.frames().len(), 3);
    // Let go once: later events reach only who is left.
    assert!(f.publish(None, event).is_empty());
}

#[test]
fn a_join_that_cannot_take_its_snapshot_or_whose_connection_is_gone_is_refused() {
    let mut f = Fanout::new(table(), Fence(1), 10);
    let tiny = TestWatcher::new(3);
    assert_eq!(
        f.subscribe(1, sub("alice", &tiny), None, &snap(), None),
        Err(Refused::TooSlow)
    );
    let gone = TestWatcher::new(1 << 20);
    gone.connected.store(false, Ordering::Relaxed);
    assert_eq!(
        f.subscribe(2, sub("bob", &gone), None, &snap(), None),
        Err(Refused::Gone)
    );
    assert_eq!(f.watchers().count(), 0, "neither subscribed");
}

#[test]
fn a_watcher_joining_a_paused_table_learns_it_after_its_snapshot() {
    let mut f = Fanout::new(table(), Fence(1), 10);
    let w = TestWatcher::new(1 << 20);
    let paused: Arc<str> = Arc::from("paused");
    f.subscribe(1, sub("alice", &w), None, &snap(), Some(&paused))
        .unwrap();
    assert_eq!(w.frames(), ["snap", "paused"]);
}

#[test]
fn each_session_gets_its_own_frame_and_dismissal_tells_everyone_and_forgets_them() {
    let mut f = Fanout::new(table(), Fence(1), 10);
    let (a, b) = (TestWatcher::new(1 << 20), TestWatcher::new(1 << 20));
    f.subscribe(1, sub("alice", &a), None, &snap(), None)
        .unwrap();
    f.subscribe(2, sub("bob", &b), None, &snap(), None).unwrap();
    let frames = f
        .watchers()
        .map(|(id, p)| (id, Arc::from(format!("view of {}", p.0).as_str())))
        .collect();
    assert!(f.send_each(frames).is_empty());
    assert_eq!(a.frames(), ["snap", "view of alice"]);
    assert_eq!(b.frames(), ["snap", "view of bob"]);
    f.dismiss_all(&Dismissal::Notice(Arc::from("frozen")));
    assert_eq!(a.notices(), ["frame frozen", "unsubscribed tbl_fanout"]);
    assert_eq!(f.watchers().count(), 0);
    f.subscribe(3, sub("alice", &a), None, &snap(), None)
        .unwrap();
    f.dismiss_all(&Dismissal::Moved);
    assert_eq!(
        a.notices().last().map(String::as_str),
        Some("moved tbl_fanout")
    );
}

#[test]
fn a_since_of_the_hosting_before_is_answered_from_what_the_journal_rebuilt() {
    // The hosting under fence 1 told 1<<32 + 1..=7; the journal rebuilt
    // 5..=7 (5 is alice's own), the last of them without a gap.
    let (before, epoch) = (1u64 << 32, 2u64 << 32);
    let mut f = Fanout::new(table(), Fence(2), 10);
    let earlier = (5..=7)
        .map(|n| Sent {
            seq: before + n,
            only: (n == 5).then(|| player("alice")),
            frame: event(before + n),
        })
        .collect();
    f.keep_earlier(earlier);
    f.publish(None, event);
    let e = |n: u64| format!("e{n}");
    let cases = [
        // Caught up across the hostings, each seeing what it may.
        (
            "alice",
            Some(before + 4),
            vec![e(before + 5), e(before + 6), e(before + 7), e(epoch + 1)],
        ),
        (
            "bob",
            Some(before + 4),
            vec![e(before + 6), e(before + 7), e(epoch + 1)],
        ),
        ("carol", Some(before + 7), vec![e(epoch + 1)]),
        // Before what the journal rebuilt, or after it: events the
        // journal does not keep may lie there, so a snapshot.
        ("dave", Some(before + 3), vec!["snap".to_string()]),
        ("erin", Some(before + 8), vec!["snap".to_string()]),
        // This hosting's own numbering goes on as before.
        ("fay", Some(epoch), vec![e(epoch + 1)]),
        ("gus", Some(epoch + 1), vec![]),
    ];
    assert_joins(&mut f, cases);
}

#[test]
fn only_events_numbered_below_this_hostings_epoch_are_kept_as_an_earlier_hostings() {
    let epoch = 2u64 << 32;
    let mut f = Fanout::new(table(), Fence(2), 10);
    // Numbered as this hosting numbers its own: not an earlier hosting's.
    f.keep_earlier(vec![Sent {
        seq: epoch + 1,
        only: None,
        frame: Arc::from("bogus"),
    }]);
    f.publish(None, event);
    let e1 = format!("e{}", epoch + 1);
    assert_joins(&mut f, [("alice", Some(epoch), vec![e1])]);
}
