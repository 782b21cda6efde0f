#!/usr/bin/env bash
# One GPU session's recording (docs/hardware.md, "Library recordings"): what the GPU
# records, nothing it decides. Run from the repository root on a machine with an NVIDIA
# GPU, torch (CUDA) and nvcc; OUT names a folder for the results (default
# results/hardware/gpu-run). Each step leaves its files as soon as it ends:
#   extras.tar.gz   environment, TF32 operand-rounding probe (raw bits), published probes
#   library.tar.gz  `tcsmt profile record --plan extended` (manifest + one JSON-lines file per part)
#   cublaslt.jsonl.gz  cuBLASLt's heuristic answer over many shapes (hardware/cublaslt_sweep.py)
# The analysis runs afterwards on any CPU (tcsmt profile ...).
set -u
OUT=${OUT:-results/hardware/gpu-run}
BUDGET=${BUDGET:-300}
SWEEP=${SWEEP:-180}  # about 455,000 answers (18 classes, hardware/cublaslt_sweep.py) at 2,700 or more a second (the first sweep: 135,184 in under 50 s)
PY=${PY:-python3}
PLAN=${PLAN:-extended}
DEV=${DEV:-cuda}  # DEV=cpu PLAN=tiny: a dry run on a CPU
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
mkdir -p "$OUT"
W=$(mktemp -d)
mkdir -p "$W/extras" "$W/library"
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }

stamp "environment"
{ nvidia-smi; nvcc --version; $PY -c "import torch, numpy; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'numpy', numpy.__version__); print(torch.cuda.get_device_name(), torch.cuda.get_device_capability())"; } > "$W/extras/environment.txt" 2>&1
tail -3 "$W/extras/environment.txt"

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

stamp "library recording, budget $BUDGET s"
timeout $(( BUDGET + 120 )) $PY -m tensorcore_smt profile record --oracle torch:$DEV \
  --plan "$PLAN" --budget "$BUDGET" --out "$W/library/run"
tar -czf "$OUT/library.tar.gz" -C "$W/library" run
stamp "library written"

stamp "cuBLASLt heuristic sweep, budget $SWEEP s"
[ "$DEV" = cuda ] && timeout $(( SWEEP + 60 )) $PY -m tensorcore_smt.hardware.cublaslt_sweep "$W/cublaslt.jsonl" --budget "$SWEEP"
[ -f "$W/cublaslt.jsonl" ] && gzip -c "$W/cublaslt.jsonl" > "$OUT/cublaslt.jsonl.gz"
stamp "done"; ls -la "$OUT"
