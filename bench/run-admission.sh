#!/usr/bin/env bash
# The cost of admitting a chat run with a PostgreSQL store (docs/replicas.md,
# "Quotas across replicas"): 2,000 of the transactions `lovia serve` runs per
# run start (crates/serve/src/lease.rs, `RunLeases::take`): the tenant's
# advisory lock, the count of its unexpired leases, the lease's upsert and
# the commit, each statement its own round trip, through psql on the given
# database. 100 other runs of the tenant hold leases meanwhile, so the count
# reads as many rows as a busy tenant's would.
#   bench/run-admission.sh postgres://lovia@%2Ftmp%2Fpg/postgres
set -euo pipefail
url=${1:?usage: bench/run-admission.sh POSTGRES_URL}
n=2000
sql=$(mktemp)
trap 'rm -f "$sql"' EXIT
psql=(psql -q -X "$url" -v ON_ERROR_STOP=1)
"${psql[@]}" > /dev/null <<'SQL'
CREATE TABLE IF NOT EXISTS lovia_run_leases (tenant TEXT NOT NULL, session TEXT NOT NULL, owner TEXT NOT NULL, expires TIMESTAMPTZ NOT NULL, PRIMARY KEY (tenant, session));
INSERT INTO lovia_run_leases SELECT 'bench', 'other' || i, 'r2', now() + interval '1 hour' FROM generate_series(1, 100) i;
SQL
for _ in $(seq $n); do
  cat <<'SQL'
BEGIN;
SELECT pg_advisory_xact_lock(7420612, hashtext('bench'));
SELECT COUNT(*) FILTER (WHERE session <> 's1'), COALESCE(bool_or(session = 's1' AND owner <> 'r1'), false) FROM lovia_run_leases WHERE tenant = 'bench' AND expires >= now();
INSERT INTO lovia_run_leases (tenant, session, owner, expires) VALUES ('bench', 's1', 'r1', now() + 10000::bigint * interval '1 millisecond') ON CONFLICT (tenant, session) DO UPDATE SET owner = EXCLUDED.owner, expires = EXCLUDED.expires;
COMMIT;
SQL
done > "$sql"
start=$(date +%s%N)
PGOPTIONS="-c client_min_messages=warning" "${psql[@]}" -f "$sql" > /dev/null
end=$(date +%s%N)
"${psql[@]}" -c "DELETE FROM lovia_run_leases WHERE tenant = 'bench';" > /dev/null
echo "$n run admissions: $(( (end - start) / n / 1000 )) µs each"
