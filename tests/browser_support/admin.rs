//! The browser test's last step, the admin page (`/admin`): it lists the
//! table with its owner and fence and a zero audit, keeps a row's buttons
//! across refreshes, and shows the table's history as an HTML table and a
//! balance above 2^53 exactly.

use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use fantoccini::Client;

use super::page::{check_favicon, click, fill, screenshot};
use super::POLL;
use crate::common::ADMIN_TOKEN;
use crate::World;

/// 2^53 + 1: the smallest whole number a JavaScript number cannot hold, so
/// a page that rounds through `Number` shows 9007199254740992 instead.
const BIG_CHIPS: i64 = 9_007_199_254_740_993;

/// Checks the admin page against the server of `w`, where the table page
/// last showed alice with `page_stack`.
pub async fn admin_page(c: &Client, w: &World, page_stack: u64) -> Result<()> {
    // ---- the admin page ----------------------------------------------------
    // A balance beyond 2^53, which a page parsing with plain JSON.parse
    // would round.
    let whale = w.server.grant("whale", BIG_CHIPS).await;
    ensure!(
        whale["balance"].as_u64() == Some(BIG_CHIPS as u64),
        "the server answered the grant of {BIG_CHIPS} with {whale}"
    );
    let audit = w.server.audit().await;
    let view = w.server.table(&w.table).await;
    c.goto(&format!("{}/admin", w.server.http))
        .await
        .context("open /admin")?;
    check_favicon(c, "/admin").await?;
    fill(c, "#admin-token", ADMIN_TOKEN).await?;
    click(c, "#save-token").await?;
    let row_css = format!("#tables tr[data-table=\"{}\"]", w.table);
    let read_row = format!(
        r#"const r = document.querySelector('{row_css}');
           const d = document.querySelector('#delta');
           if (!r) return null;
           const cell = (c) => r.querySelector('td[data-col=' + c + ']').textContent;
           return {{ owner: cell('owner'), fence: cell('fence'), state: cell('state'),
                    seats: cell('seats'), delta: d.textContent, delta_ok: d.dataset.ok,
                    granted: document.querySelector('#a-granted').textContent }};"#
    );
    let deadline = Instant::now() + Duration::from_secs(15);
    let row = loop {
        let row = c.execute(&read_row, vec![]).await.context("read /admin")?;
        if !row.is_null() && row["delta"] != "–" {
            break row;
        }
        ensure!(
            Instant::now() < deadline,
            "the admin page never listed table {}",
            w.table
        );
        tokio::time::sleep(POLL).await;
    };
    let owner = view["owner"].as_str().context("owner in the table view")?;
    ensure!(
        row["owner"] == owner,
        "admin page owner {} != server's {owner}",
        row["owner"]
    );
    let fence = view["fence"].as_u64().context("fence in the table view")?;
    ensure!(
        row["fence"].as_str() == Some(fence.to_string().as_str()),
        "admin page fence {} != server's {}",
        row["fence"],
        view["fence"]
    );
    ensure!(
        row["seats"]
            .as_str()
            .is_some_and(|s| s.contains(&format!("alice {page_stack}"))),
        "admin page seats {} do not show alice with {page_stack}",
        row["seats"]
    );
    ensure!(
        row["delta"] == "0" && row["delta_ok"] == "true",
        "admin page audit delta: {row}"
    );
    let granted = audit["granted"]
        .as_u64()
        .context("granted in the audit")?
        .to_string();
    ensure!(
        row["granted"].as_str() == Some(granted.as_str()),
        "admin page shows {} granted, the server {granted}",
        row["granted"]
    );

    // The row's buttons survive refreshes: the same node, still focused.
    let history_css = format!("{row_css} button[data-op=events]");
    c.execute(
        &format!(
            "const b = document.querySelector('{history_css}'); b.focus(); window.__history = b; \
             window.__refreshed = document.getElementById('refreshed').textContent; return true;"
        ),
        vec![],
    )
    .await
    .context("focus the History button")?;
    let deadline = Instant::now() + Duration::from_secs(10);
    let kept = loop {
        let kept = c
            .execute(
                &format!(
                    "const b = document.querySelector('{history_css}'); \
                     return {{ refreshed: document.getElementById('refreshed').textContent !== window.__refreshed, \
                               same: b === window.__history, focused: document.activeElement === window.__history }};"
                ),
                vec![],
            )
            .await
            .context("read the History button")?;
        if kept["refreshed"] == true {
            break kept;
        }
        ensure!(
            Instant::now() < deadline,
            "the admin page did not refresh its list within 10 s"
        );
        tokio::time::sleep(POLL).await;
    };
    ensure!(
        kept["same"] == true && kept["focused"] == true,
        "a refresh replaced or unfocused the row's History button: {kept}"
    );

    // History: an HTML table with one row per state transition.
    let (status, events) = w
        .server
        .admin_get(&format!("/admin/tables/{}/events", w.table))
        .await;
    ensure!(status == 200, "GET events -> {status} {events}");
    let transitions = events["events"].as_array().map_or(0, Vec::len);
    click(c, &history_css).await?;
    let read_history = r#"const box = document.getElementById('result');
        if (box.dataset.what !== 'history') return null;
        return { rows: box.querySelectorAll('table.grid tbody tr').length,
                 to: Array.from(box.querySelectorAll('td[data-col=to]')).map((e) => e.textContent),
                 text: box.innerText };"#;
    let deadline = Instant::now() + Duration::from_secs(10);
    let history = loop {
        let h = c
            .execute(read_history, vec![])
            .await
            .context("read the history")?;
        if !h.is_null() {
            break h;
        }
        ensure!(
            Instant::now() < deadline,
            "the admin page never showed the table's history"
        );
        tokio::time::sleep(POLL).await;
    };
    screenshot(c, &w.artifacts.join("admin-history.png")).await?;
    ensure!(
        transitions > 0 && history["rows"].as_u64() == Some(transitions as u64),
        "the history table has {} rows for {transitions} transitions: {history}",
        history["rows"]
    );
    ensure!(
        history["to"]
            .as_array()
            .is_some_and(|t| t.iter().any(|s| s == "open")),
        "the history table shows no transition to open: {history}"
    );
    ensure!(
        history["text"]
            .as_str()
            .is_some_and(|t| !t.contains('{') && !t.contains('"')),
        "the history is shown as JSON: {history}"
    );

    // A balance above 2^53, exactly.
    fill(c, "#grant-player", "whale").await?;
    click(c, "#balance").await?;
    let read_balance = r#"const box = document.getElementById('result');
        const cell = box.querySelector('tr[data-key=balance] td');
        return box.dataset.what === 'balance' && cell ? cell.textContent : null;"#;
    let deadline = Instant::now() + Duration::from_secs(10);
    let balance = loop {
        let b = c
            .execute(read_balance, vec![])
            .await
            .context("read the balance")?;
        if !b.is_null() {
            break b;
        }
        ensure!(
            Instant::now() < deadline,
            "the admin page never showed whale's balance"
        );
        tokio::time::sleep(POLL).await;
    };
    screenshot(c, &w.artifacts.join("admin.png")).await?;
    ensure!(
        balance.as_str() == Some(BIG_CHIPS.to_string().as_str()),
        "the admin page shows whale's balance as {balance}, not {BIG_CHIPS}"
    );
    Ok(())
}
