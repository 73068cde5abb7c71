#!/usr/bin/env bash
# Record the thread-state captures in tests/data/pyspy/states_*.txt (run as root, from the
# repo root; review, then FLAMEDECK_UPDATE_GOLDEN=1 for their expected JSON).
# bench/targets/states_target.py plants the causes (see its doc); each target is recorded with
# `--native --threads --idle` (both gloo ranks at once) and, for `starved`, also
# without --idle. py-spy's stdout is
# kept beside each file as FILE.log. Needs a torch venv (TORCH_PYTHON, default /work/torchenv).
set -euo pipefail
PS=${PYSPY:-.venv/bin/py-spy}
TPY=${TORCH_PYTHON:-/work/torchenv/bin/python}
D=${OUT:-tests/data/pyspy}
RATE=${RATE:-40}
SECONDS_=${DURATION:-4}
rec() {  # rec OUT PID [py-spy options]
  local out=$1 pid=$2; shift 2
  "$PS" record --native --threads --rate "$RATE" -d "$SECONDS_" --pid "$pid" --format raw \
    -o "$D/$out" "$@" > "$D/$out.log" 2>&1
  sed -i "s#$D/##" "$D/$out.log"
}
for mode in starved backpressure; do
  "$TPY" bench/targets/states_target.py "$mode" 40 2>/dev/null &
  P=$!
  sleep 6  # torch import and first steps
  rec "states_${mode}_idle.txt" "$P" --idle
  [ "$mode" = starved ] && rec "states_${mode}.txt" "$P"
  kill "$P" 2>/dev/null || true
  wait "$P" 2>/dev/null || true
done
PIDS=$(mktemp)
STATES_PIDS=$PIDS "$TPY" bench/targets/states_target.py gloo 40 2>/dev/null &
G=$!
for _ in $(seq 120); do [ -e "$PIDS.0" ] && [ -e "$PIDS.1" ] && break; sleep 1; done
sleep 2
read -r R0 R1 < "$PIDS"
rec states_gloo_rank0_idle.txt "$R0" --idle &
W=$!
rec states_gloo_rank1_idle.txt "$R1" --idle
wait "$W"
kill "$R0" "$R1" "$G" 2>/dev/null || true
wait "$G" 2>/dev/null || true
rm -f "$PIDS" "$PIDS".*
ls -la "$D"/states_*
