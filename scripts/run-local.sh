#!/usr/bin/env bash
# Runs one pitboss instance on this machine against the local Postgres and
# Redis (started by services.sh if needed), with the `local` config.
# Its arguments go to `pitboss serve`: --port N, --host H, --config-dir DIR.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

"$root/scripts/services.sh"

db=pitboss
exists=$(psql -w -h 127.0.0.1 -p 5432 -U postgres -d postgres -Atqc \
    "SELECT 1 FROM pg_database WHERE datname = '$db'")
if [ "$exists" = "1" ]; then
    echo "run-local: database $db exists"
else
    echo "run-local: creating database $db"
    psql -w -h 127.0.0.1 -p 5432 -U postgres -d postgres -qc "CREATE DATABASE $db"
fi

export PITBOSS__DATABASE__URL="postgres://postgres@127.0.0.1:5432/$db"
# Where to tell the user to connect: the flags win over the variables, as
# they do in pitboss itself.
host=${PITBOSS__HTTP__HOST:-127.0.0.1}
port=${PITBOSS__HTTP__PORT:-8080}
config_dir=()
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
    case ${args[i]} in
        --host) host=${args[i + 1]:-$host} ;;
        --host=*) host=${args[i]#--host=} ;;
        --port) port=${args[i + 1]:-$port} ;;
        --port=*) port=${args[i]#--port=} ;;
        --config-dir) config_dir=(--config-dir "${args[i + 1]:-}") ;;
        --config-dir=*) config_dir=("${args[i]}") ;;
    esac
done
[ "$host" = "0.0.0.0" ] && host=127.0.0.1

cargo build --release --bin pitboss
# A ready-made token for the message below; not fatal, serve matters more.
token=$(cargo run --release -q --bin pitboss -- token "${config_dir[@]}" alice 2>/dev/null | tail -n 1) || token=""
[ -n "$token" ] || token="<token>"

cat <<MSG

  pitboss (PITBOSS_ENV=${PITBOSS_ENV:-local}) is starting; the binary applies its migrations itself.

  Play in a browser:  http://$host:$port/
  Operators:          http://$host:$port/admin   (bearer token: PITBOSS__ADMIN__TOKEN, see config/local.toml)
  WebSocket:          ws://$host:$port/ws?token=$token
  A token for any player:
                      cargo run --release -- token alice
  Chips for alice:    curl -X POST -H 'Authorization: Bearer <admin token>' \\
                        -H 'content-type: application/json' -d '{"chips":1000}' \\
                        http://$host:$port/admin/players/alice/grant

  Ctrl-C drains and stops it.

MSG

exec cargo run --release --bin pitboss -- serve "$@"
