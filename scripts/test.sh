#!/usr/bin/env bash
# The project's test command: services (and the browser for the browser
# test; PITBOSS_SKIP_BROWSER=1 skips both), the exhaustive hand-evaluator
# check (release build; PITBOSS_SKIP_EXHAUSTIVE=1 skips it for a quick local
# run), the whole nextest suite (extra arguments go to `cargo nextest run`),
# then the soak, the short chaos run and the scan-cost benchmark.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

"$root/scripts/services.sh"
# Headless Chromium and its WebDriver for the browser test.
if [ "${PITBOSS_SKIP_BROWSER:-0}" != "1" ]; then "$root/scripts/browser-deps.sh"; fi

# chess.js, the independent engine tests/chess_rules.rs checks the chess
# rules against (npm; Node.js from the OS packages if absent).
if ! command -v npm >/dev/null 2>&1; then
    echo "test: installing Node.js and npm from the OS packages"
    if [ "$(id -u)" -eq 0 ]; then apt-get update -q && apt-get install -y -q nodejs npm;
    else sudo apt-get update -q && sudo apt-get install -y -q nodejs npm; fi
fi
(cd "$root/tests/chess_js" && npm ci --no-audit --no-fund --loglevel=error)

export PITBOSS_TEST_PG_URL=${PITBOSS_TEST_PG_URL:-postgres://postgres@127.0.0.1:5432/postgres}

if ! cargo nextest --version >/dev/null 2>&1; then
    echo "test: installing cargo-nextest from crates.io"
    cargo install cargo-nextest --locked
fi

# The exhaustive evaluator check runs first so the test runner's summary
# is the last thing printed.
if [ "${PITBOSS_SKIP_EXHAUSTIVE:-0}" = "1" ]; then
    echo "test: PITBOSS_SKIP_EXHAUSTIVE=1, skipping the exhaustive evaluator check"
else
    cargo run --release --example eval_exhaustive
fi

cargo nextest run --workspace --all-targets --no-fail-fast "$@"

# The soak (three instances, twelve tables, a seeded mix of faults for a
# minute) runs alone afterwards, so it never shares the cores with other
# tests. PITBOSS_SKIP_SOAK=1 skips it; PITBOSS_SOAK_SEED replays a schedule.
if [ "${PITBOSS_SKIP_SOAK:-0}" = "1" ]; then
    echo "test: PITBOSS_SKIP_SOAK=1, skipping the soak"
else
    cargo nextest run --test soak --run-ignored only --no-capture --retries 0
fi

# The short chaos run: three instances, 100 tables of bots, a seeded
# schedule of every fault kind for 90 s, then the invariants checked (about
# 2 minutes in all). Alone too; PITBOSS_SKIP_CHAOS=1 skips it,
# PITBOSS_CHAOS_SEED replays another schedule. docs/RELIABILITY.md has the
# long run.
if [ "${PITBOSS_SKIP_CHAOS:-0}" = "1" ]; then
    echo "test: PITBOSS_SKIP_CHAOS=1, skipping the chaos run"
else
    cargo build -p pitboss -p pitboss-bots -p pitboss-chaos --bins
    "${CARGO_TARGET_DIR:-$root/target}/debug/pitboss-chaos" --duration 90s --seed "${PITBOSS_CHAOS_SEED:-13}"
fi

# What idle instances cost Redis and Postgres at 1,000 and 10,000 tables: the
# revive scan must read nothing per hosted table (it asserts so and prints
# its figures beside the renew's). Alone too; PITBOSS_SKIP_SCALE=1 skips it.
if [ "${PITBOSS_SKIP_SCALE:-0}" = "1" ]; then
    echo "test: PITBOSS_SKIP_SCALE=1, skipping the scan-cost benchmark"
else
    cargo nextest run --test scan_scale --run-ignored only --no-capture --retries 0
fi
