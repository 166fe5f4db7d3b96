#!/usr/bin/env bash
# The cost of the shared calls-per-minute count (docs/replicas.md): 2,000 of
# the upserts `lovia serve` runs per call (crates/serve/src/stored.rs), one
# autocommitted statement each, through psql on the given database.
#   bench/quota-upsert.sh postgres://lovia@%2Ftmp%2Fpg/postgres
set -euo pipefail
url=${1:?usage: bench/quota-upsert.sh POSTGRES_URL}
n=2000
sql=$(mktemp)
trap 'rm -f "$sql"' EXIT
{
  echo "CREATE TABLE IF NOT EXISTS lovia_call_minutes (tenant TEXT NOT NULL, minute TIMESTAMPTZ NOT NULL, calls BIGINT NOT NULL, PRIMARY KEY (tenant, minute));"
  for _ in $(seq $n); do
    echo "INSERT INTO lovia_call_minutes (tenant, minute, calls) VALUES ('bench', date_trunc('minute', now()), 1) ON CONFLICT (tenant, minute) DO UPDATE SET calls = lovia_call_minutes.calls + 1 WHERE lovia_call_minutes.calls < 1000000000 RETURNING calls;"
  done
  echo "DELETE FROM lovia_call_minutes WHERE tenant = 'bench';"
} > "$sql"
start=$(date +%s%N)
PGOPTIONS="-c client_min_messages=warning" psql -q -X "$url" -f "$sql" > /dev/null
end=$(date +%s%N)
echo "$n upserts: $(( (end - start) / n / 1000 )) µs each"
