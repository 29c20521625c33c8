#!/usr/bin/env bash
# Installs what the browser test (tests/browser.rs) needs: Debian's headless
# Chromium and its WebDriver, /usr/bin/chromium and /usr/bin/chromedriver.
# Idempotent: does nothing when both are already there.
set -euo pipefail

say() { echo "browser-deps: $*"; }
die() {
    echo "browser-deps: ERROR: $*" >&2
    exit 1
}

if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
    say "chromium and chromedriver present"
    exit 0
fi

as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        die "need root (or sudo) to run: $*"
    fi
}

command -v apt-get >/dev/null 2>&1 || die "apt-get not found; install chromium and chromedriver by hand"

say "installing chromium and chromium-driver from Debian's packages"
export DEBIAN_FRONTEND=noninteractive
as_root apt-get update -q
as_root apt-get install -y -q --no-install-recommends chromium chromium-driver fonts-dejavu-core

[ -x /usr/bin/chromium ] || die "/usr/bin/chromium is still missing after the install"
[ -x /usr/bin/chromedriver ] || die "/usr/bin/chromedriver is still missing after the install"
say "$(/usr/bin/chromium --version 2>/dev/null || echo chromium) / $(/usr/bin/chromedriver --version 2>/dev/null || echo chromedriver)"
