#!/usr/bin/env bash
# The noisy neighbour, driven from processes of their own: one `lovia serve`
# with tenant A (the hostile test fixtures: spinning, holding an instance
# slot, memory bombs, host-call floods, argument checks up to their work
# budget) and tenant B (the diagnostics plugin's `echo`). One wrk drives A's
# attack (16 connections cycling the five attacks), another B's ordinary
# calls (4 connections). Each run prints B's p99:
#
#   floor  the service pinned to one core, B alone: what B gets from one
#          free core, which is what A's max_cpu_cores (all the cores but
#          one, by default) leaves it;
#   quiet  the service on every core, B alone;
#   loud   the service on every core, B under A's attack;
#
# and loud / floor (target ≤ 3×, docs/performance.md "The noisy neighbour").
#
#   bench/neighbour.sh [RUNS] [SECONDS]      # defaults: 5 runs of 10 s phases
#   ATTACKS=loop_forever,nest bench/neighbour.sh 1   # only these of A's attacks
#   SERVE_ENV=TOKIO_WORKER_THREADS=2 bench/neighbour.sh  # the service's environment
#   A_CORES=0.5 bench/neighbour.sh          # A's max_cpu_cores [default: the service's]
#
# Needs target/release/lovia, the test fixtures (scripts/test builds them into
# target/fixtures/wasm32-wasip2/release) and wrk (apt-get install wrk).
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
seconds=${2:-10}
lovia=${LOVIA:-target/release/lovia}
fixtures=target/fixtures/wasm32-wasip2/release
command -v wrk >/dev/null || { echo "wrk is not installed: apt-get install wrk" >&2; exit 1; }
for f in hostile slow union_bomb diagnostics; do
  [[ -f "$fixtures/$f.wasm" ]] || { echo "$fixtures/$f.wasm is missing: run scripts/test once" >&2; exit 1; }
done
[[ -x "$lovia" ]] || { echo "$lovia is missing: cargo build --release -p lovia-cli" >&2; exit 1; }
dir=$(mktemp -d)
source bench/lib.sh
trap 'stop_server; rm -rf "$dir"' EXIT

abs() { realpath "$fixtures/$1.wasm"; }
cat > "$dir/serve.toml" <<EOF
store = "$dir/bench.db"

[[tenants]]
name = "a"
api_keys = ["$(printf a-key | "$lovia" serve --hash-key)"]
calls_per_minute = 100000000
${A_CORES:+max_cpu_cores = $A_CORES}

[[tenants.plugins]]
path = "$(abs slow)"

[[tenants.plugins]]
path = "$(abs union_bomb)"

[[tenants.plugins]]
path = "$(abs hostile)"
limits = { max_wall_clock_ms = 200 }

[[tenants]]
name = "b"
api_keys = ["$(printf b-key | "$lovia" serve --hash-key)"]
calls_per_minute = 100000000

[[tenants.plugins]]
path = "$(abs diagnostics)"
EOF
cat > "$dir/a.lua" <<'EOF'
local attacks = {
  {"/api/tools/loop_forever/call", "{}"},
  {"/api/tools/hold/call", '{"ms": 2000}'},
  {"/api/tools/memory_bomb/call", "{}"},
  {"/api/tools/hammer_import/call", "{}"},
  -- Invalid at the leaf of 14 nested unions: checked up to its work budget.
  {"/api/tools/nest/call", string.rep('{"a":', 15) .. '"x"' .. string.rep("}", 15)},
}
local only = os.getenv("ATTACKS")
if only and only ~= "" then
  local kept = {}
  for _, a in ipairs(attacks) do
    if string.find("," .. only .. ",", "," .. a[1]:match("/api/tools/([%w_]+)/call") .. ",", 1, true) then
      table.insert(kept, a)
    end
  end
  assert(#kept > 0, "ATTACKS names none of loop_forever, hold, memory_bomb, hammer_import, nest")
  attacks = kept
end
local i = 0
request = function()
  i = i + 1
  local a = attacks[(i % #attacks) + 1]
  return wrk.format("POST", a[1], {["Content-Type"] = "application/json", ["Authorization"] = "Bearer a-key"}, a[2])
end
EOF
cat > "$dir/b.lua" <<'EOF'
wrk.method = "POST"
wrk.body = '{"text": "b"}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer b-key"
EOF

attacks_named=${ATTACKS:-}
for a in ${attacks_named//,/ }; do
  case $a in
    loop_forever | hold | memory_bomb | hammer_import | nest) ;;
    *) echo "ATTACKS: unknown attack '$a' (allowed: loop_forever, hold, memory_bomb, hammer_import, nest)" >&2; exit 2 ;;
  esac
done

port=18095
url="http://127.0.0.1:$port"
# Starts the service ("$@" before it: a taskset or nothing) and waits for it.
start() {
  # SERVE_ENV is split into NAME=VALUE words on purpose.
  # shellcheck disable=SC2086
  start_server "$@" env ${SERVE_ENV:-} "$lovia" serve --config "$dir/serve.toml" --listen "127.0.0.1:$port"
}
# B's p99 in ms over $seconds, after a one-second warm-up; fails on any non-2xx answer.
b_p99() {
  wrk -t1 -c4 -d1s -s "$dir/b.lua" "$url/api/tools/echo/call" >/dev/null
  local out
  # A timed-out request is left out of wrk's latencies: the timeout is
  # long, and any socket error fails the run rather than flatter B's p99.
  out=$(wrk -t1 -c4 -d"${seconds}s" --timeout 30s --latency -s "$dir/b.lua" "$url/api/tools/echo/call")
  if grep -q "Non-2xx\|Socket errors" <<<"$out"; then echo "B got errors or answers that were not 2xx:" >&2; echo "$out" >&2; exit 1; fi
  awk '$1 == "99%" && NF == 2 { v = $2; if (v ~ /us$/) print v / 1000; else if (v ~ /ms$/) print v + 0; else if (v ~ /[0-9]s$/) print v * 1000; else { print "wrk printed a p99 this script cannot read: " v > "/dev/stderr"; exit 1 } }' <<<"$out"
}

printf 'B'"'"'s p99 (ms), %s s phases, 4 connections; A: 16 connections of attacks (%s)\n' "$seconds" "$(lscpu | sed -n 's/^Model name: *//p')"
for run in $(seq "$runs"); do
  start taskset -c 0
  floor=$(b_p99)
  stop_server
  start
  quiet=$(b_p99)
  wrk -t1 -c16 -d"$((seconds + 3))s" --timeout 10s -s "$dir/a.lua" "$url" >"$dir/attack.out" 2>&1 &
  attack=$!
  sleep 1
  loud=$(b_p99)
  wait "$attack"
  attacks=$(awk '/requests in/ { print $1 }' "$dir/attack.out")
  stop_server
  python3 -c "import sys; f, q, l, a = sys.argv[1:]; print(f'  run $run: floor {float(f):7.2f}  quiet {float(q):7.2f}  loud {float(l):7.2f}  loud/floor {float(l)/float(f):5.2f}x  ({a} attack requests)')" \
    "$floor" "$quiet" "$loud" "$attacks"
done
