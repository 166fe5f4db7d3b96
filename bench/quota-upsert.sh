#!/usr/bin/env bash
# The cost of the shared per-minute quotas (docs/replicas.md, "Quotas across
# replicas"): 2,000 of the upserts `lovia serve` runs per call to count it and
# hold its fuel, then 2,000 of the statements that give a call's fuel hold
# back and charge what was burned (run after each call of a tenant with
# `fuel_per_minute`) (crates/serve/src/stored.rs), one autocommitted
# statement each, through psql on the given database.
#   bench/quota-upsert.sh postgres://lovia@%2Ftmp%2Fpg/postgres
set -euo pipefail
url=${1:?usage: bench/quota-upsert.sh POSTGRES_URL}
n=2000
upserts=$(mktemp)
charges=$(mktemp)
trap 'rm -f "$upserts" "$charges"' EXIT
psql=(psql -q -X "$url" -v ON_ERROR_STOP=1)
PGOPTIONS="-c client_min_messages=warning" "${psql[@]}" > /dev/null <<'SQL'
CREATE TABLE IF NOT EXISTS lovia_call_minutes (tenant TEXT NOT NULL, minute TIMESTAMPTZ NOT NULL, calls BIGINT NOT NULL, PRIMARY KEY (tenant, minute));
ALTER TABLE lovia_call_minutes ADD COLUMN IF NOT EXISTS fuel BIGINT NOT NULL DEFAULT 0;
SQL
for _ in $(seq $n); do
  echo "INSERT INTO lovia_call_minutes AS m (tenant, minute, calls, fuel) VALUES ('bench', date_trunc('minute', now()), 1, 1000) ON CONFLICT (tenant, minute) DO UPDATE SET calls = m.calls + 1, fuel = m.fuel + 1000 WHERE m.calls < 1000000000 AND m.fuel <= 9000000000000000000 - 1000 RETURNING extract(epoch FROM m.minute)::bigint;"
done > "$upserts"
for _ in $(seq $n); do
  echo "UPDATE lovia_call_minutes SET fuel = GREATEST(fuel - 1000, 0) + 600 WHERE tenant = 'bench' AND minute = date_trunc('minute', now());"
done > "$charges"
time_file() {
  local start end
  start=$(date +%s%N)
  PGOPTIONS="-c client_min_messages=warning" "${psql[@]}" -f "$1" > /dev/null
  end=$(date +%s%N)
  echo $(( (end - start) / n / 1000 ))
}
echo "$n upserts (count a call, hold its fuel): $(time_file "$upserts") µs each"
echo "$n fuel charges (after a call): $(time_file "$charges") µs each"
"${psql[@]}" -c "DELETE FROM lovia_call_minutes WHERE tenant = 'bench';" > /dev/null
