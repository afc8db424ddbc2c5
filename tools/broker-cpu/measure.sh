#!/usr/bin/env bash
# The broker's own instructions per message at pops of BATCH (default 100), counted by callgrind
# (repeatable on a busy machine, unlike CPU time): a throwaway PostgreSQL, the broker under
# callgrind with its defaults, 20 warm-up cycles, then CYCLES (default 50) cycles of push BATCH /
# pop BATCH / ack BATCH counted. Prints the total and the instructions per message; keeps the profile for
# callgrind_annotate.
#
# Usage: [BATCH=N] tools/broker-cpu/measure.sh BROKER_BINARY [CYCLES] [OUT_DIR]
# (build it with: CARGO_PROFILE_RELEASE_DEBUG=1 cargo build --release -p ackbench-broker -p ackbench)
set -euo pipefail
BIN=$(realpath "$1")
CYCLES=${2:-50}
export BATCH=${BATCH:-100}
OUT=${3:-$(mktemp -d /tmp/broker-cpu.XXXXXX)}
HERE=$(cd "$(dirname "$0")" && pwd)
PGBIN=/usr/lib/postgresql/15/bin
PGPORT=${PGPORT:-55791}
PORT=${PORT:-56791}
mkdir -p "$OUT" && chmod 777 "$OUT"
run_pg() { if [ "$(id -u)" = 0 ]; then su postgres -c "$*"; else bash -c "$*"; fi; }
run_pg "$PGBIN/initdb -D $OUT/pg -A trust -U postgres >$OUT/initdb.log 2>&1"
run_pg "$PGBIN/pg_ctl -D $OUT/pg -o '-p $PGPORT -k $OUT -c listen_addresses=127.0.0.1' -l $OUT/pg.log -w start >/dev/null"
trap 'kill $BROKER 2>/dev/null; run_pg "$PGBIN/pg_ctl -D $OUT/pg -m fast stop >/dev/null"' EXIT
DATABASE_URL=postgres://postgres@127.0.0.1:$PGPORT/postgres QUEEN_LISTEN=127.0.0.1:$PORT RUST_LOG=warn \
  valgrind --tool=callgrind --callgrind-out-file="$OUT/callgrind.out" "$BIN" >"$OUT/broker.log" 2>&1 &
BROKER=$!
for _ in $(seq 120); do curl -sf "127.0.0.1:$PORT/health" >/dev/null && break; sleep 1; done
python3 "$HERE/drive.py" "$PORT" setup
python3 "$HERE/drive.py" "$PORT" 20
callgrind_control -z "$BROKER" >/dev/null
python3 "$HERE/drive.py" "$PORT" "$CYCLES"
callgrind_control -d "$BROKER" >/dev/null
sleep 1
PROFILE=$(ls -t "$OUT"/callgrind.out.* | head -1)
TOTAL=$(callgrind_annotate "$PROFILE" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
echo "profile: $PROFILE"
echo "instructions: $TOTAL over $((CYCLES * BATCH)) messages (push+pop+ack): $((TOTAL / (CYCLES * BATCH))) per message"
