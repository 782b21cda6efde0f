#!/usr/bin/env bash
# One GPU session's recording (docs/hardware.md, "Library recordings"): what the GPU
# records, nothing it decides. Run from the repository root on a machine with an NVIDIA
# GPU, torch (CUDA) and nvcc; OUT names a folder for the results (default
# results/hardware/gpu-run). Each step leaves its files as soon as it ends:
#   environment.txt    nvidia-smi, nvcc, torch and the GPU
#   extras.tar.gz      (EXTRAS=1) TF32 operand-rounding probe (raw bits), published probes
#   library-seedS.tar.gz  `tcsmt profile record --plan extended --seed S`, the first of SEEDS
#   reveal.tar.gz      (REVEAL="dtype:K ...") `tcsmt reveal --oracle torch:cuda --json`, timed
#   cublaslt-seedS-PP.jsonl.gz  cuBLASLt's heuristic answer over many shapes (hardware/
#                      cublaslt_sweep.py, random shapes from SWEEP_SEED=S, SWEEP_SCALE times
#                      the first sweep's per class, SWEEP_WORKERS processes), in parts of
#                      500,000 answers (pack them: hardware/sweep_store.py)
#   library-seedS.tar.gz  the other SEEDS, each only while DEADLINE seconds are not spent
# The analysis runs afterwards on any CPU (tcsmt profile ...).
set -u
OUT=${OUT:-results/hardware/gpu-run}
BUDGET=${BUDGET:-300}
SWEEP=${SWEEP:-180}  # budget; one process answers 2,700 or more a second (the first sweep: 135,184 in under 50 s)
SWEEP_SEED=${SWEEP_SEED:-0}
SWEEP_SCALE=${SWEEP_SCALE:-3}  # about 1.17 million answers (18 classes), about 22 MB gzipped
SWEEP_WORKERS=${SWEEP_WORKERS:-$(( $(nproc) > 2 ? $(nproc) - 2 : 1 ))}
SEEDS=${SEEDS:-0}
EXTRAS=${EXTRAS:-1}
REVEAL=${REVEAL:-}
DEADLINE=${DEADLINE:-100000}
PY=${PY:-python3}
PLAN=${PLAN:-extended}
DEV=${DEV:-cuda}  # DEV=cpu PLAN=tiny: a dry run on a CPU
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
mkdir -p "$OUT"
W=$(mktemp -d)
mkdir -p "$W/extras" "$W/library" "$W/reveal"
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
left() { echo $(( DEADLINE - ($(date +%s) - t0) )); }

stamp "environment"
{ nvidia-smi; nvcc --version; $PY -c "import torch, numpy; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'numpy', numpy.__version__); print(torch.cuda.get_device_name(), torch.cuda.get_device_capability())"; } > "$W/extras/environment.txt" 2>&1
cp "$W/extras/environment.txt" "$OUT/environment.txt"
tail -3 "$W/extras/environment.txt"

if [ "$EXTRAS" = 1 ]; then
  # published probe programs for this GPU's architecture, built in the background
  ( cd "$W/extras" && for cu in "$OLDPWD"/results/published/*__hopper__*.cu; do
      b=$(basename "$cu" .cu)
      nvcc -arch=sm_90 -o "$b" "$cu" > "$b.build.txt" 2>&1 && ./"$b" > "$b.out.txt" 2> "$b.err.txt"
    done ) &
  probes=$!
  stamp "TF32 operand-rounding probe (raw bits)"
  $PY - "$W/extras" "$DEV" <<'PYEOF'
import sys, numpy as np, torch
from tensorcore_smt.gemm.tf32_probe import run_torch
for n in (64, 256):
    a, b = run_torch(sys.argv[2], n=n)
    np.save(f"{sys.argv[1]}/tf32_probe_n{n}_a.npy", a)
    np.save(f"{sys.argv[1]}/tf32_probe_n{n}_b.npy", b)
print("tf32 probe saved", sys.argv[2])
PYEOF
  wait $probes
  tar -czf "$OUT/extras.tar.gz" -C "$W" extras
  stamp "extras written"
fi

record() {  # one seed's library recording
  stamp "library recording, seed $1, budget $BUDGET s"
  timeout $(( BUDGET + 120 )) $PY -m tensorcore_smt profile record --oracle torch:$DEV \
    --plan "$PLAN" --seed "$1" --budget "$BUDGET" --out "$W/library/seed$1"
  tar -czf "$OUT/library-seed$1.tar.gz" -C "$W/library" "seed$1"
  stamp "library seed $1 written"
}
set -- $SEEDS
[ $# -gt 0 ] && { record "$1"; shift; }

if [ -n "$REVEAL" ]; then
  for dk in $REVEAL; do
    d=${dk%%:*}; k=${dk##*:}
    stamp "reveal --oracle torch:$DEV --dtype $d --k $k"
    s0=$(date +%s%N)
    timeout "${REVEAL_TIMEOUT:-60}" $PY -m tensorcore_smt reveal --oracle torch:$DEV --dtype "$d" --k "$k" --json \
      > "$W/reveal/${d}_k$k.json" 2> "$W/reveal/${d}_k$k.err.txt"
    echo "rc=$? wall_ms=$(( ($(date +%s%N) - s0) / 1000000 ))" > "$W/reveal/${d}_k$k.time.txt"
    cat "$W/reveal/${d}_k$k.time.txt"
  done
  tar -czf "$OUT/reveal.tar.gz" -C "$W" reveal
  stamp "reveal written"
fi

if [ "$SWEEP" -gt 0 ]; then
  DRY=; [ "$DEV" = cuda ] || DRY=--dry-run
  stamp "cuBLASLt heuristic sweep, seed $SWEEP_SEED x$SWEEP_SCALE, $SWEEP_WORKERS workers, budget $SWEEP s $DRY"
  timeout $(( SWEEP + 90 )) $PY -m tensorcore_smt.hardware.cublaslt_sweep "$W/cublaslt.jsonl" \
    --budget "$SWEEP" --seed "$SWEEP_SEED" --scale "$SWEEP_SCALE" --workers "$SWEEP_WORKERS" $DRY
  # parts of 500,000 answers (about 9 MB gzipped each: a file brought back is at most 16 MiB)
  if [ -f "$W/cublaslt.jsonl" ]; then
    ( cd "$W" && split -l 500000 -d cublaslt.jsonl sweep-part. && for p in sweep-part.*; do
        gzip -9 -c "$p" > "$OUT/cublaslt-seed$SWEEP_SEED-${p##*.}.jsonl.gz" & done; wait )
  fi
  stamp "sweep written"
fi

for s in "$@"; do
  if [ "$(left)" -lt $(( BUDGET + 30 )) ]; then stamp "seed $s skipped: $(left) s left of DEADLINE"; continue; fi
  record "$s"
done
stamp "done"; ls -la "$OUT"
