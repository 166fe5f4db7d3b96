#!/usr/bin/env bash
# The newcomer's clock: seconds from a fresh clone of this checkout's HEAD
# to the first tool call the main command (scripts/serve) answers. The cargo
# registry is as warm as this machine's; the target directory starts empty.
#
#   bash bench/first-call.sh            # clones into a temporary directory
#
# Prints one line: the seconds to the first served call, the seconds until
# the service listened, and the call's answer.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
dir=$(mktemp -d)
port=8700
pid=
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$dir"' EXIT
git clone -q "$repo" "$dir"
cd "$dir"
if curl -s -o /dev/null "http://127.0.0.1:$port/healthz"; then
  echo "first-call: port $port is in use; stop what serves there first" >&2
  exit 1
fi
start=$(date +%s)
scripts/serve > "$dir/serve.log" 2>&1 &
pid=$!
until curl -sf -o /dev/null -H 'authorization: Bearer demo-key' "http://127.0.0.1:$port/api/tools"; do
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "first-call: scripts/serve exited before it served; its last lines:" >&2
    tail -20 "$dir/serve.log" >&2
    exit 1
  fi
  sleep 1
done
listening=$(date +%s)
answer=$(curl -sf -X POST -H 'authorization: Bearer demo-key' \
  "http://127.0.0.1:$port/api/tools/lookup_order/call" -d '{"order_id":"A-1002"}')
served=$(date +%s)
echo "first served call: $((served - start)) s from a fresh clone (listening after $((listening - start)) s): $answer"
