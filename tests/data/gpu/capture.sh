#!/bin/bash
# Real CUDA/NCCL py-spy captures for tests/data/gpu (see its README.md).
# Usage: bash .gpu/capture.sh OUT   (OUT gets at most 8 files)
set -u
OUT=${1:?}
G=$(cd "$(dirname "$0")" && pwd)
PYSPY=$G/py-spy
INFO=$OUT/info.txt
export PYTHONUNBUFFERED=1 MASTER_ADDR=127.0.0.1
PY=${PY:-python3}
say() { echo "$@" | tee -a "$INFO"; }
say "== versions"
"$PY" -c 'import torch,sys;print("python",sys.version.split()[0]);print("torch",torch.__version__,"cuda",torch.version.cuda,"nccl",".".join(map(str,torch.cuda.nccl.version())),"device",torch.cuda.get_device_name(0))' 2>&1 | tee -a "$INFO"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | tee -a "$INFO"
"$PYSPY" --version 2>&1 | tee -a "$INFO"
uname -r | tee -a "$INFO"

say "== two NCCL ranks on one GPU"
rm -f /tmp/pair.ready.*
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_PORT=29511 timeout 90 "$PY" "$G/train.py" pair 30 /tmp/pair.ready.$r >/tmp/pair.$r.log 2>&1 &
  eval "PAIR$r=\$!"
done
PAIRED=no
for i in $(seq 1 60); do
  if [ -f /tmp/pair.ready.0 ] && [ -f /tmp/pair.ready.1 ]; then PAIRED=yes; break; fi
  if ! kill -0 $PAIR0 2>/dev/null && ! kill -0 $PAIR1 2>/dev/null; then break; fi
  sleep 1
done
say "two ranks running: $PAIRED"
if [ $PAIRED = yes ]; then
  for r in 0 1; do
    pid=$(cut -d' ' -f1 /tmp/pair.ready.$r)
    timeout -s INT 10 "$PYSPY" record --native --idle --threads --rate 50 --format raw -o "$OUT/gpu_pair_rank$r.txt" --pid "$pid" >"/tmp/pair.rec.$r" 2>&1 &
    eval "REC$r=\$!"
  done
  wait $REC0 $REC1
  cat /tmp/pair.rec.0 /tmp/pair.rec.1 >>"$INFO"
fi
kill $PAIR0 $PAIR1 2>/dev/null; wait $PAIR0 $PAIR1 2>/dev/null
for r in 0 1; do say "-- rank $r log (grep NCCL/Error, last 15)"; grep -iE "nccl|error|duplicate" /tmp/pair.$r.log | tail -15 | tee -a "$INFO"; done

capture() {  # NAME MODE SECONDS DUMP(yes|no)
  local name=$1 mode=$2 secs=$3 dump=$4
  say "== $name ($mode)"
  rm -f /tmp/$name.ready
  RANK=0 WORLD_SIZE=1 MASTER_PORT=$((29600 + RANDOM % 300)) "$PY" "$G/train.py" "$mode" "$secs" /tmp/$name.ready >/tmp/$name.log 2>&1 &
  local job=$!
  for i in $(seq 1 90); do [ -f /tmp/$name.ready ] && break; kill -0 $job 2>/dev/null || break; sleep 1; done
  if [ ! -f /tmp/$name.ready ]; then say "$name did not start"; tail -30 /tmp/$name.log | tee -a "$INFO"; return; fi
  sleep 2
  if [ $dump = yes ]; then
    timeout 30 "$PYSPY" dump --native --json --pid $job >"$OUT/$name.dump.json" 2>>"$INFO" || say "dump failed rc=$?"
  fi
  timeout -s INT 10 "$PYSPY" record --native --idle --threads --rate 50 --format raw -o "$OUT/$name.txt" --pid $job >"$OUT/$name.log" 2>&1
  say "record rc=$? ($(wc -l <"$OUT/$name.txt" 2>/dev/null) stacks)"
  cat "$OUT/$name.log" >>"$INFO"
  kill $job 2>/dev/null; wait $job 2>/dev/null
  tail -5 /tmp/$name.log | tee -a "$INFO"
}
capture gpu_nccl_step step 60 yes
if [ $PAIRED = yes ]; then D=no; else D=yes; fi
capture gpu_slow_device slowdev 60 $D
ls -la "$OUT" | tee -a "$INFO"
