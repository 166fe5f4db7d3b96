#!/usr/bin/env bash
# `lovia serve` and its HTTP floor, each driven by wrk (Debian's package)
# from a process of its own: the server pinned to CPU 0 and wrk to CPU 1, so
# the generator's share (one core of the two) is the same on both sides. The
# floor is `lovia bench --serve-floor`: a fixed answer to every POST from the
# same axum stack, as `lovia bench --only serve` measures beside the service.
# Prints wrk's figures for each, the server's CPU time per call, and the
# ratios (docs/performance.md, "The service door under wrk").
#
#   bench/wrk.sh [SECONDS] [CONNECTIONS]    # defaults: 5 s, 16 connections
#   PERF=1 bench/wrk.sh                     # also perf record the service, and
#                                           # print its self time by crate
#
# Needs target/release/lovia and target/plugins/diagnostics.wasm (bench/run
# builds both) and wrk (apt-get install wrk); LOVIA=path picks another lovia,
# PLUGIN=path another plugin with an `echo` tool.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-5}
conns=${2:-16}
lovia=${LOVIA:-target/release/lovia}
command -v wrk >/dev/null || { echo "wrk is not installed: apt-get install wrk" >&2; exit 1; }
[[ -x "$lovia" && -f "${PLUGIN:-target/plugins/diagnostics.wasm}" ]] ||
  { echo "$lovia or target/plugins/diagnostics.wasm is missing: run bench/run first" >&2; exit 1; }
[[ $(nproc) -ge 2 ]] || { echo "pinning the server and wrk apart needs 2 CPUs; this machine has $(nproc)" >&2; exit 1; }
plugin=$(realpath "${PLUGIN:-target/plugins/diagnostics.wasm}")
dir=$(mktemp -d)
source bench/lib.sh
trap 'stop_server; rm -rf "$dir"' EXIT

key=lovia-bench-key
hash=$(printf %s "$key" | "$lovia" serve --hash-key)
limit=$((conns * 2 + 4))
cat > "$dir/serve.toml" <<EOF
store = "$dir/bench.db"
max_connections_per_ip = $limit
max_connections = $limit

[[tenants]]
name = "bench"
api_keys = ["$hash"]
max_concurrent_calls = $limit
calls_per_minute = 1000000000

[[tenants.plugins]]
path = "$plugin"
EOF
cat > "$dir/post.lua" <<EOF
wrk.method = "POST"
wrk.body = '{"text": "hi"}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer $key"
EOF

# The server's user and system CPU time so far, in clock ticks.
ticks() { awk '{print $14 + $15}' "/proc/$server/stat"; }

# Drives $url with wrk pinned to CPU 1; prints "calls/s p50_us p99_us cpu_us_per_call".
drive() {
  local url=$1 before after out recorder=
  # Warm-up: every connection's first call.
  taskset -c 1 wrk -t1 -c"$conns" -d1s -s "$dir/post.lua" "$url" >/dev/null
  before=$(ticks)
  if [[ -n "${PERF:-}" && "$2" == lovia ]]; then
    perf record -q -F 4999 -g -p "$server" -o "$dir/perf.data" -- sleep "$seconds" &
    recorder=$!
  fi
  out=$(taskset -c 1 wrk -t1 -c"$conns" -d"${seconds}s" --timeout 30s --latency -s "$dir/post.lua" "$url")
  [[ -z "$recorder" ]] || wait "$recorder"
  after=$(ticks)
  [[ -n "${PERF:-}" && "$2" == lovia ]] && mkdir -p target/bench && cp "$dir/perf.data" target/bench/wrk-serve.perf.data
  python3 - "$out" "$before" "$after" "$(getconf CLK_TCK)" <<'PY'
import re, sys
out, before, after, hz = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
def us(text):
    m = re.fullmatch(r"([\d.]+)(us|ms|s|m|h)", text)
    if not m:
        sys.exit(f"wrk printed a latency this script cannot read: {text!r}")
    return float(m.group(1)) * {"us": 1, "ms": 1e3, "s": 1e6, "m": 6e7, "h": 3.6e9}[m.group(2)]
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
total = int(re.search(r"(\d+) requests in", out).group(1))
# The latency distribution's lines only: "50%" also ends a Stdev column.
p50 = us(re.search(r"^\s*50%\s+(\S+)", out, re.M).group(1))
p99 = us(re.search(r"^\s*99%\s+(\S+)", out, re.M).group(1))
bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
if bad:
    sys.exit(f"{bad.group(1)} answers were not 2xx:\n{out}")
if "Socket errors" in out:
    sys.exit(f"wrk saw socket errors (timeouts are left out of its latencies):\n{out}")
cpu_us = (after - before) / hz * 1e6 / max(total, 1)
print(f"{rps:.0f} {p50:.0f} {p99:.0f} {cpu_us:.1f}")
PY
}

port=18091
start_server taskset -c 0 "$lovia" bench --serve-floor "127.0.0.1:$port"
read -r f_rps f_p50 f_p99 f_cpu < <(drive "http://127.0.0.1:$port/echo" floor)
stop_server
port=18092
start_server taskset -c 0 "$lovia" serve --config "$dir/serve.toml" --listen "127.0.0.1:$port"
read -r l_rps l_p50 l_p99 l_cpu < <(drive "http://127.0.0.1:$port/api/tools/echo/call" lovia)
stop_server

printf 'wrk -t1 -c%s -d%ss, server on CPU 0, wrk on CPU 1 (%s)\n' "$conns" "$seconds" "$(lscpu | sed -n 's/^Model name: *//p')"
printf '  %-32s %9s calls/s  p50 %6s µs  p99 %6s µs  server CPU %6s µs/call\n' \
  "floor (lovia bench --serve-floor)" "$f_rps" "$f_p50" "$f_p99" "$f_cpu" \
  "lovia serve, POST echo" "$l_rps" "$l_p50" "$l_p99" "$l_cpu"
python3 -c "import sys; f, l = [float(x) for x in sys.argv[1:5:2]], [float(x) for x in sys.argv[2:6:2]]; print(f'  lovia serve / floor: {l[0]/f[0]:.0%} of the calls/s, p99 {l[1]/f[1]:.2f}x')" \
  "$f_rps" "$l_rps" "$f_p99" "$l_p99"
if [[ -n "${PERF:-}" ]]; then
  echo "  the service's self time by crate (perf report -i target/bench/wrk-serve.perf.data):"
  perf report -i target/bench/wrk-serve.perf.data --no-children --sort dso,sym --stdio 2>/dev/null |
    python3 bench/perf-crates.py | sed 's/^/    /'
fi
exit 0
