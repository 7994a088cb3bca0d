#!/usr/bin/env bash
# The main job (`make demo`): a workspace of real public data (NYC flights and weather, 2013)
# ingested from monthly files, transformed by the Spark engine (embedded: a local engine
# process, no container runtime needed), pulled again as new months arrive, then verified by
# replaying every transformation.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PY="$ROOT/.venv/bin/python"
ODF="$ROOT/.venv/bin/odf"
WS="${DEMO_WORKSPACE:-$ROOT/demo-workspace}"
EXAMPLE="$ROOT/examples/nycflights"

# Each step says how long the one before it took (the walkthrough's timings, docs/walkthrough.md).
STARTED=$SECONDS
LAST=
step() {
  if [ -n "$LAST" ]; then
    printf '   (%d s)\n' "$((SECONDS - LAST))"
  fi
  LAST=$SECONDS
  printf '\n\033[1m== %s\033[0m\n' "$*"
}

rm -rf "$WS"
mkdir -p "$WS"
cd "$WS"

step "A new workspace in $WS"
"$ODF" init

step "Datasets: 2 root (flights, weather) and 3 derivative (filter, aggregation, join)"
"$ODF" add "$EXAMPLE"/datasets/*.yaml
"$ODF" list

step "Round 1: January is published; pull everything"
"$PY" "$EXAMPLE/stage_data.py" --months 1 --out incoming
"$ODF" pull --all

step "Round 2: February and March arrive; pull again (only new data is processed)"
"$PY" "$EXAMPLE/stage_data.py" --months 2 3 --out incoming
"$ODF" pull --all
"$ODF" list

step "The aggregation: flights per day and carrier"
"$ODF" tail nyc.flights.daily-by-carrier -n 8

step "The join: departures with the weather at their origin"
"$ODF" tail nyc.flights.with-weather -n 5

step "Ad-hoc SQL over the datasets: does snow or fog delay departures?"
"$ODF" sql -c '
  SELECT CASE WHEN visib < 1 THEN "under 1 mile" WHEN visib < 5 THEN "1-5 miles"
              ELSE "5+ miles" END AS visibility,
         COUNT(*) AS departures, ROUND(AVG(dep_delay), 1) AS avg_delay_min
  FROM `nyc.flights.with-weather`
  GROUP BY 1 ORDER BY avg_delay_min DESC'

step "History of a derivative dataset (engine pinned in SetTransform)"
"$ODF" log nyc.flights.delayed -n 4

step "Verify: hashes of every block and file, then replay every transformation"
"$ODF" verify --recursive nyc.flights.delayed nyc.flights.daily-by-carrier nyc.flights.with-weather

step "Done: the example pipeline is ingested, transformed and verified in $WS ($((SECONDS - STARTED)) s in all)"
