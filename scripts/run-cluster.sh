#!/usr/bin/env bash
# Runs three pitboss instances on this machine, one environment, against the
# local Postgres and Redis (started by services.sh if needed), with the
# `local` config: ids local-1, local-2, local-3 on ports 8081, 8082, 8083
# (`--base-port N` for N+1..N+3). Any instance serves any table; move tables
# between them and stop one to watch its tables go elsewhere.
# Ctrl-C drains and stops all three.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

base=8080
while [ $# -gt 0 ]; do
    case $1 in
        --base-port) base=${2:?--base-port needs a number}; shift 2 ;;
        --base-port=*) base=${1#--base-port=}; shift ;;
        -h|--help)
            sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'
            exit 0 ;;
        *) echo "run-cluster: unknown argument $1 (only --base-port N)" >&2; exit 2 ;;
    esac
done
case $base in
    ''|*[!0-9]*) echo "run-cluster: --base-port must be a number" >&2; exit 2 ;;
esac

"$root/scripts/services.sh"

db=pitboss
exists=$(psql -w -h 127.0.0.1 -p 5432 -U postgres -d postgres -Atqc \
    "SELECT 1 FROM pg_database WHERE datname = '$db'")
if [ "$exists" != "1" ]; then
    echo "run-cluster: creating database $db"
    psql -w -h 127.0.0.1 -p 5432 -U postgres -d postgres -qc "CREATE DATABASE $db"
fi

cargo build --release --bin pitboss
bin="$root/target/release/pitboss"

export PITBOSS__DATABASE__URL="postgres://postgres@127.0.0.1:5432/$db"
export PITBOSS__HTTP__HOST=127.0.0.1
pids=()
# The instances run in sessions of their own, so Ctrl-C reaches only this
# script, which passes one TERM to each: a second signal would force an
# instance to release its leases without finishing its hands.
stop() {
    trap - INT TERM
    echo "run-cluster: draining all three"
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    exit 0
}
trap stop INT TERM

for n in 1 2 3; do
    port=$((base + n))
    id="local-$n"
    PITBOSS__INSTANCE__ID=$id \
        PITBOSS__HTTP__PORT=$port \
        PITBOSS__INSTANCE__ADVERTISE_URL="http://127.0.0.1:$port" \
        setsid "$bin" serve > >(sed -u "s/^/[$id] /") 2>&1 &
    pids+=($!)
done

cat <<MSG

  Three pitboss instances (environment local) are starting:
    local-1  http://127.0.0.1:$((base + 1))/
    local-2  http://127.0.0.1:$((base + 2))/
    local-3  http://127.0.0.1:$((base + 3))/
  Play at any table through any of them; the admin page of each lists the
  instances (/admin, bearer token local-admin).

  Move a table:   curl -X POST -H 'Authorization: Bearer local-admin' \\
                    -H 'content-type: application/json' -d '{"to":"local-3"}' \\
                    http://127.0.0.1:$((base + 1))/admin/tables/<id>/move
  Bots on all three:
                  cargo run --release -p pitboss-bots -- --admin-token local-admin --tables 6 \\
                    --url http://127.0.0.1:$((base + 1)),http://127.0.0.1:$((base + 2)),http://127.0.0.1:$((base + 3))
  Restart one:    kill -TERM <pid> (its tables move to the others at once)
                  pids: ${pids[*]}

  Ctrl-C drains and stops all three.

MSG

# Until Ctrl-C, or until every instance has exited.
wait "${pids[@]}" || true
