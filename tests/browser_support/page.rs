//! Reading and driving the browser test's pages: the table page read in one
//! round trip, the felt's winner lines, the icon a page declares, form
//! fields, clicks and screenshots.

use std::path::Path;

use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use fantoccini::{Client, Locator};
use serde_json::Value;

use super::POLL;

/// Everything the test reads off the table page, in one round trip.
const PROBE: &str = r#"
const q = (s) => document.querySelector(s);
const all = (s) => Array.from(document.querySelectorAll(s));
const stacks = {};
for (const e of all('#seats .seat[data-player]')) {
  stacks[e.dataset.player] = Number(e.querySelector('.stack').dataset.stack);
}
return {
  status: q('#status').dataset.state,
  status_text: q('#status').textContent,
  hole: all('#hole .card[data-card]').map((e) => e.dataset.card),
  board: all('#board .card[data-card]').map((e) => e.dataset.card),
  actions: all('#actions button:not(:disabled)').map((e) => e.dataset.action),
  ended: all('#log .entry[data-kind=hand_ended]').map((e) => Number(e.dataset.hand)),
  winners: window.__winners || [],
  pill_error: q('#status').dataset.error || null,
  folds_in_hand_1: all('#log .entry[data-kind=action][data-hand="1"]')
    .filter((e) => e.textContent.includes(' folds')).length,
  stacks,
  hand: q('#hand').textContent,
  banner: q('#banner').classList.contains('show') ? q('#banner-text').textContent : null,
  log: all('#log .entry').slice(-30).map((e) => e.textContent),
};
"#;

/// Records every winner line the felt shows (`#winner`, with its
/// `data-hand`) in `window.__winners`: a line lasts only until the next hand
/// starts, which with a 200 ms next-hand delay is shorter than a poll.
pub const WATCH_WINNER: &str = r#"
window.__winners = [];
const w = document.getElementById('winner');
const note = () => {
  const last = window.__winners[window.__winners.length - 1];
  const now = { hand: w.dataset.hand || null, text: w.textContent };
  if (now.text && !(last && last.hand === now.hand && last.text === now.text)) window.__winners.push(now);
};
new MutationObserver(note).observe(w, { childList: true, characterData: true, subtree: true, attributes: true });
return true;
"#;

/// The winner line the felt showed for `hand`, if any.
pub fn winner_of(p: &Value, hand: u64) -> Option<String> {
    p["winners"]
        .as_array()?
        .iter()
        .rev()
        .find(|w| w["hand"].as_str() == Some(hand.to_string().as_str()))?["text"]
        .as_str()
        .map(str::to_string)
}

/// The icon a page declares: an inline SVG, so the browser never asks the
/// server for `/favicon.ico`.
pub async fn check_favicon(c: &Client, page: &str) -> Result<()> {
    let href = c
        .execute(
            "const l = document.querySelector('link[rel=icon]'); return l ? l.getAttribute('href') : null;",
            vec![],
        )
        .await
        .with_context(|| format!("read the icon of {page}"))?;
    ensure!(
        href.as_str()
            .is_some_and(|h| h.starts_with("data:image/svg+xml")),
        "{page} declares no inline SVG icon: {href}"
    );
    Ok(())
}

pub async fn probe(c: &Client) -> Result<Value> {
    c.execute(PROBE, vec![])
        .await
        .context("read the table page")
}

/// Polls `PROBE` until `done` holds; the last reading either way.
pub async fn wait_page(
    c: &Client,
    what: &str,
    timeout: Duration,
    done: impl Fn(&Value) -> bool,
) -> Result<Value> {
    let deadline = Instant::now() + timeout;
    loop {
        let p = probe(c).await?;
        if done(&p) {
            return Ok(p);
        }
        if Instant::now() >= deadline {
            bail!("the table page never showed {what} within {timeout:?}; last reading: {p:#}");
        }
        tokio::time::sleep(POLL).await;
    }
}

pub async fn fill(c: &Client, css: &str, text: &str) -> Result<()> {
    let e = c
        .find(Locator::Css(css))
        .await
        .with_context(|| format!("find {css}"))?;
    e.clear().await.with_context(|| format!("clear {css}"))?;
    e.send_keys(text)
        .await
        .with_context(|| format!("type into {css}"))
}

pub async fn click(c: &Client, css: &str) -> Result<()> {
    c.find(Locator::Css(css))
        .await
        .with_context(|| format!("find {css}"))?
        .click()
        .await
        .with_context(|| format!("click {css}"))
}

pub async fn screenshot(c: &Client, path: &Path) -> Result<()> {
    let png = c.screenshot().await.context("take a screenshot")?;
    std::fs::write(path, png).with_context(|| format!("write {}", path.display()))
}

pub fn stack_of(view: &Value, player: &str) -> Option<u64> {
    view["seats"]
        .as_array()?
        .iter()
        .find(|s| s["player"] == player)?["stack"]
        .as_u64()
}
