//! The server's instances as the bots see them: which URL hosts which
//! table, which URL each bot connects through, and how long a bot waits
//! between attempts to get a connection back.

use std::time::{Duration, Instant};

/// The first wait after a connection is lost; each failed attempt doubles it.
const FIRST_RETRY: Duration = Duration::from_millis(100);
const LONGEST_RETRY: Duration = Duration::from_secs(1);
/// How long a bot keeps trying to get a connection back, counted from the
/// loss. Longer than a drain's hand or a crashed owner's lease takes to
/// hand over is not needed: the bot's own instance only has to come back
/// or another one answer, and every instance serves every table.
pub const GIVE_UP_AFTER: Duration = Duration::from_secs(30);

/// The `--url`s and their WebSocket twins, in the order given.
#[derive(Debug, Clone)]
pub struct Endpoints {
    http: Vec<String>,
    ws: Vec<String>,
}

impl Endpoints {
    /// `urls` are `http://` base URLs without a trailing slash (as
    /// `Options` leaves them); `None` when there is none or one is not.
    pub fn new(urls: &[String]) -> Option<Endpoints> {
        let ws = urls
            .iter()
            .map(|u| u.strip_prefix("http://").map(|rest| format!("ws://{rest}")))
            .collect::<Option<Vec<_>>>()?;
        (!ws.is_empty()).then(|| Endpoints {
            http: urls.to_vec(),
            ws,
        })
    }

    pub fn count(&self) -> usize {
        self.http.len()
    }

    pub fn http(&self, i: usize) -> &str {
        &self.http[i % self.http.len()]
    }

    /// `ws://host:port` of URL `i`.
    pub fn ws(&self, i: usize) -> &str {
        &self.ws[i % self.ws.len()]
    }

    /// The URL to try after `i`.
    pub fn next(&self, i: usize) -> usize {
        (i + 1) % self.count()
    }

    /// Every URL, as the summary names them.
    pub fn describe(&self) -> String {
        self.http.join(",")
    }
}

/// The URL that creates (and so first hosts) table `t`: round robin, so
/// each instance hosts some tables.
pub fn table_url(t: usize, n: usize) -> usize {
    t % n.max(1)
}

/// The URL bot `p` of table `t` connects through: shifted by the seat, so
/// a table's players come in through different instances and most of them
/// reach their table through another instance's relay.
pub fn bot_url(t: usize, p: usize, n: usize) -> usize {
    (t + p) % n.max(1)
}

/// The waits between attempts to get a connection back: 100 ms, doubling
/// to 1 s, for at most [`GIVE_UP_AFTER`] since the loss.
#[derive(Debug, Clone)]
pub struct Backoff {
    since: Instant,
    next: Duration,
}

impl Backoff {
    pub fn new(since: Instant) -> Backoff {
        Backoff {
            since,
            next: FIRST_RETRY,
        }
    }

    /// The wait before the next attempt; `None` once that attempt would
    /// start past the bound.
    pub fn next_wait(&mut self, now: Instant) -> Option<Duration> {
        let wait = self.next;
        if now.saturating_duration_since(self.since) + wait > GIVE_UP_AFTER {
            return None;
        }
        self.next = (wait * 2).min(LONGEST_RETRY);
        Some(wait)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_round_robin_and_a_tables_bots_come_through_different_urls() {
        let n = 3;
        let hosts: Vec<usize> = (0..5).map(|t| table_url(t, n)).collect();
        assert_eq!(hosts, [0, 1, 2, 0, 1]);
        // Table 1's four bots: every URL is used, starting with its host.
        let bots: Vec<usize> = (0..4).map(|p| bot_url(1, p, n)).collect();
        assert_eq!(bots, [1, 2, 0, 1]);
        // One URL (a load balancer): everything goes there.
        assert!((0..4).all(|t| table_url(t, 1) == 0 && bot_url(t, 3, 1) == 0));
    }

    #[test]
    fn endpoints_turn_http_into_ws_and_rotate() {
        let e = Endpoints::new(&["http://a:1".into(), "http://b:2".into()]).expect("valid");
        assert_eq!(
            (e.ws(0), e.ws(1), e.http(3)),
            ("ws://a:1", "ws://b:2", "http://b:2")
        );
        assert_eq!((e.next(0), e.next(1)), (1, 0));
        assert_eq!(e.describe(), "http://a:1,http://b:2");
        assert!(Endpoints::new(&["https://a".into()]).is_none());
        assert!(Endpoints::new(&[]).is_none());
    }

    #[test]
    fn backoff_doubles_from_100_ms_to_1_s_and_gives_up_after_30_s() {
        let t0 = Instant::now();
        let mut b = Backoff::new(t0);
        let waits: Vec<u64> = (0..7)
            .map(|_| b.next_wait(t0).map_or(0, |d| d.as_millis() as u64))
            .collect();
        assert_eq!(waits, [100, 200, 400, 800, 1000, 1000, 1000]);
        assert_eq!(
            b.next_wait(t0 + Duration::from_millis(28_900)),
            Some(Duration::from_secs(1))
        );
        assert_eq!(b.next_wait(t0 + Duration::from_millis(29_001)), None);
    }
}
