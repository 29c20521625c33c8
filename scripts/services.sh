#!/usr/bin/env bash
# Makes sure the services pitboss and its tests need are there and answering:
#   - Postgres on 127.0.0.1:5432, trust auth for user postgres
#   - Redis on 127.0.0.1:6379
#   - the redis-server, redis-cli, psql and pg_isready binaries (tests spawn
#     private redis-servers of their own)
# Idempotent: a service that already answers is left exactly as it is (never
# stopped, restarted or flushed). Missing pieces are installed from Debian's
# packages and started without systemd.
set -euo pipefail

PG_HOST=127.0.0.1
PG_PORT=5432
REDIS_HOST=127.0.0.1
REDIS_PORT=6379
WAIT_SECONDS=${PITBOSS_SERVICES_WAIT_SECONDS:-60}

say() { echo "services: $*"; }
die() {
    echo "services: ERROR: $*" >&2
    exit 1
}

as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        die "need root (or sudo) to run: $*"
    fi
}

apt_updated=0
apt_install() {
    command -v apt-get >/dev/null 2>&1 || die "apt-get not found; install $* by hand"
    if [ "$apt_updated" -eq 0 ]; then
        say "apt-get update"
        # An offline machine may still install from the lists and archives
        # it already has; apt-get install below says so if it cannot.
        as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q ||
            say "warning: apt-get update failed; trying the package lists already here"
        apt_updated=1
    fi
    say "installing $*"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@"
}

pg_answers() {
    pg_isready -q -h "$PG_HOST" -p "$PG_PORT" >/dev/null 2>&1
}

# pg_isready only says the server accepts connections; the harness also
# needs password-less (trust) login as postgres over TCP.
pg_trusts() {
    psql -w -h "$PG_HOST" -p "$PG_PORT" -U postgres -d postgres -Atqc 'SELECT 1' >/dev/null 2>&1
}

# Something listens on host:port (no client binary needed).
port_open() {
    timeout 2 bash -c "exec 3<>/dev/tcp/$1/$2" >/dev/null 2>&1
}

redis_answers() {
    [ "$(redis-cli -h "$REDIS_HOST" -p "$REDIS_PORT" ping 2>/dev/null)" = "PONG" ]
}

# The newest cluster version Debian's postgresql-common knows about.
pg_version() {
    find /etc/postgresql -mindepth 1 -maxdepth 1 -type d -printf '%f\n' 2>/dev/null |
        sort -V | tail -n 1 || true
}

pg_server_installed() {
    compgen -G "/usr/lib/postgresql/*/bin/postgres" >/dev/null
}

# First matching pg_hba line wins, so the trust lines go on top.
pg_ensure_trust() {
    local ver hba
    ver=$(pg_version)
    [ -n "$ver" ] || die "no Postgres cluster under /etc/postgresql"
    hba=/etc/postgresql/$ver/main/pg_hba.conf
    [ -f "$hba" ] || die "$hba not found"
    if grep -Eq '^[[:space:]]*host[[:space:]]+all[[:space:]]+all[[:space:]]+127\.0\.0\.1/32[[:space:]]+trust' "$hba"; then
        return 1
    fi
    say "adding trust auth for 127.0.0.1 and ::1 to $hba"
    local tmp
    tmp=$(mktemp)
    {
        echo "# added by pitboss scripts/services.sh: password-less local TCP for dev and CI"
        echo "host    all    all    127.0.0.1/32    trust"
        echo "host    all    all    ::1/128         trust"
        cat "$hba"
    } >"$tmp"
    as_root cp "$tmp" "$hba"
    rm -f "$tmp"
    return 0
}

pg_cluster_running() {
    local ver
    ver=$(pg_version)
    [ -n "$ver" ] && as_root pg_ctlcluster --skip-systemctl-redirect "$ver" main status >/dev/null 2>&1
}

wait_for() {
    local what=$1 check=$2 hint=$3 waited=0
    until "$check"; do
        if [ "$waited" -ge $((WAIT_SECONDS * 2)) ]; then
            die "$what did not answer within ${WAIT_SECONDS}s. $hint"
        fi
        sleep 0.5
        waited=$((waited + 1))
    done
}

# ---------------------------------------------------------------- Postgres --

if ! command -v psql >/dev/null 2>&1 || ! command -v pg_isready >/dev/null 2>&1; then
    # A server that already runs, here or elsewhere, needs only the client.
    if pg_server_installed || port_open "$PG_HOST" "$PG_PORT"; then
        apt_install postgresql-client
    else
        apt_install postgresql
    fi
fi

if pg_answers; then
    say "Postgres already answers on $PG_HOST:$PG_PORT"
else
    if ! pg_server_installed; then
        apt_install postgresql
    fi
    ver=$(pg_version)
    if [ -z "$ver" ]; then
        ver=$(basename "$(compgen -G "/usr/lib/postgresql/*" | sort -V | tail -n 1)")
        say "creating Postgres $ver cluster 'main'"
        as_root pg_createcluster "$ver" main
    fi
    pg_ensure_trust || true
    # The package's postinst may already have started it (it answers now).
    if pg_answers; then
        say "Postgres answers on $PG_HOST:$PG_PORT (started by its package)"
    else
        say "starting Postgres $ver (pg_ctlcluster, no systemd)"
        as_root pg_ctlcluster --skip-systemctl-redirect "$(pg_version)" main start
    fi
fi
wait_for "Postgres on $PG_HOST:$PG_PORT" pg_answers \
    "See /var/log/postgresql/postgresql-$(pg_version)-main.log"

if pg_trusts; then
    say "Postgres accepts user postgres without a password over TCP"
else
    # Only a cluster on this machine can be fixed here, and only by a
    # reload: running sessions are never disturbed. The trust lines may be
    # in the file already, written before the package's own start.
    if [ -n "$(pg_version)" ] && pg_cluster_running; then
        pg_ensure_trust || true
        say "reloading Postgres to apply trust auth"
        as_root pg_ctlcluster --skip-systemctl-redirect "$(pg_version)" main reload
        wait_for "Postgres trust login" pg_trusts \
            "Check pg_hba.conf under /etc/postgresql/$(pg_version)/main"
    else
        die "Postgres on $PG_HOST:$PG_PORT refuses password-less login as postgres; allow trust for 127.0.0.1 in pg_hba.conf or set PITBOSS_TEST_PG_URL with a password"
    fi
fi

# ------------------------------------------------------------------- Redis --

if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
    apt_install redis-server
fi

if redis_answers; then
    say "Redis already answers on $REDIS_HOST:$REDIS_PORT"
else
    say "starting Redis on $REDIS_HOST:$REDIS_PORT (no persistence, daemonized)"
    as_root mkdir -p /var/lib/redis /var/log/redis
    as_root redis-server --daemonize yes --bind 127.0.0.1 -::1 --port "$REDIS_PORT" \
        --save "" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log
fi
wait_for "Redis on $REDIS_HOST:$REDIS_PORT" redis_answers "See /var/log/redis/ci.log"

say "ready: postgres://postgres@$PG_HOST:$PG_PORT, redis://$REDIS_HOST:$REDIS_PORT ($(redis-server --version | awk '{print $3}'), $(psql --version))"
