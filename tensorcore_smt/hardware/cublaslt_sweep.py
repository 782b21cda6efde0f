"""cuBLASLt's heuristic answer over many shapes per call class, without running a GEMM:
the table a profile's rule between recorded shapes can be learnt from (which shapes share
a kernel configuration, where split-K starts), recorded in seconds on a GPU machine.

`sweep_shapes` is fixed before the GPU is touched: for each class, every M of the
batch-invariance series at the LLM (N, K) pairs, then log-uniform random shapes, every
other one with K log-uniform from DEEP_K up (where the split count follows the heuristic's
cost model and a sweep of K from 1 leaves it thin); the classes take turns so that a time
budget cuts every class alike. Each answer is one JSON
line ``{"class", "m", "n", "k", "f": [CONFIG_FIELDS values..., workspace, waves]}`` or
``{"class", "m", "n", "k", "error"}``.

`python -m tensorcore_smt.hardware.cublaslt_sweep OUT.jsonl [--budget SECONDS] [--seed S]
[--scale F] [--workers W]` (S picks the random shapes: a second sweep with another seed
asks new ones; F times RANDOM_SHAPES and DEEP_SHAPES per class; W processes share the
queue, worker w asking every W-th item from the w-th, each with its own cuBLASLt handle:
the heuristic runs on the host, so W cores answer about W times as many shapes within the
budget; the lines come out worker by worker). `--dry-run` answers every shape with no
fields, without a GPU (the plan and the workers, tested on any machine).
"""

from __future__ import annotations

import json
import math
import sys
import time
from itertools import zip_longest
from pathlib import Path

import numpy as np

from .library_calls import CallClass, Op, Precision, classes
from .library_plan import LLM_K, LLM_N, batch_ms
from .oneline import OneLineParser

FIELD_ORDER = (
    "algo_id",
    "tile_id",
    "splitk_num",
    "reduction_scheme",
    "cta_swizzling",
    "custom_option",
    "stages_id",
    "inner_shape_id",
    "cluster_shape_id",
    "workspace",
    "waves",
)
"""The order of a line's ``f`` values."""

RANDOM_SHAPES = 12000
DEEP_SHAPES = 12000
DEEP_K = 512
"""Random shapes per class with K in [DEEP_K, 16384] (M, N log-uniform from 1), asked
between the others (the first sweeps, recorded before these existed, have none)."""


def sweep_classes() -> list[CallClass]:
    """The classes swept: matmul at every precision, F.linear (B transposed) in fp16/bf16,
    both FP8 classes, and F.linear with a bias (its own epilogue kernels: cublaslt.py)
    in fp16, bf16, fp32 and TF32."""
    out = classes((Op.MATMUL,), tuple(Precision))
    out += classes((Op.LINEAR,), (Precision.FP16, Precision.BF16))
    out += classes((Op.SCALED, Op.SCALED_FAST), (Precision.E4M3,))
    out += classes(
        (Op.LINEAR_BIAS,), (Precision.FP16, Precision.BF16, Precision.FP32, Precision.TF32)
    )
    return out


def sweep_shapes(cls: CallClass, seed: int = 0, scale: int = 1) -> list[tuple[int, int, int]]:
    """The shapes asked for `cls`, in the order asked (`scale` times RANDOM_SHAPES and
    DEEP_SHAPES; the first of them are the shapes of scale 1)."""
    shapes = [(m, n, k) for n in LLM_N for k in LLM_K for m in batch_ms(8192)]
    rng = np.random.Generator(np.random.PCG64([seed, 4601]))
    e = rng.uniform(0, math.log(16384), (RANDOM_SHAPES * scale, 3))
    deep = np.random.Generator(np.random.PCG64([seed, 4602])).uniform(
        (0, 0, math.log(DEEP_K)), math.log(16384), (DEEP_SHAPES * scale, 3)
    )
    for pair in zip_longest(e, deep):
        shapes += [
            tuple(int(x) for x in np.maximum(1, np.round(np.exp(r)))) for r in pair if r is not None
        ]
    return [s for s in shapes if cls.applies(*s)]


def queue(seed: int = 0, scale: int = 1) -> list[tuple[CallClass, tuple[int, int, int]]]:
    """Every (class, shape) to ask, in the order asked: the classes take turns, so a
    budget that ends the sweep early cuts every class alike."""
    per_class = [[(c, s) for s in sweep_shapes(c, seed, scale)] for c in sweep_classes()]
    return [item for row in zip_longest(*per_class) for item in row if item is not None]


def _dry_run(cls: CallClass, m: int, n: int, k: int) -> tuple[dict | None, str | None]:
    return None, "dry run"


def work(
    out: str, seed: int, scale: int, budget: float, worker: int, workers: int, dry: bool
) -> int:
    """Worker `worker` of `workers`: ask items worker, worker + workers, ... of queue()
    until `budget` seconds have passed, one JSON line each into `out`; the lines written."""
    if dry:
        ask = _dry_run
    else:
        import torch

        from .cublaslt import heuristic as ask

        torch.zeros(1, device="cuda") @ torch.zeros(1, device="cuda")  # load cuBLAS(Lt)
    items = queue(seed, scale)[worker::workers]
    t0 = time.monotonic()
    done = 0
    with open(out, "w") as f:
        for cls, (m, n, k) in items:
            if time.monotonic() - t0 > budget:
                break
            fields, why = ask(cls, m, n, k)
            rec: dict = {"class": cls.name, "m": m, "n": n, "k": k}
            if fields is None:
                rec["error"] = why
            else:
                rec["f"] = [fields[name] for name in FIELD_ORDER]
            f.write(json.dumps(rec, separators=(",", ":")) + "\n")
            done += 1
    return done


def sweep(
    out: str, budget: float, seed: int = 0, scale: int = 1, workers: int = 1, dry: bool = False
) -> int:
    """The sweep into `out` (JSON lines) by `workers` processes (spawned: each its own
    CUDA context), worker by worker; the lines written."""
    if workers <= 1:
        return work(out, seed, scale, budget, 0, 1, dry)
    import multiprocessing as mp

    parts = [f"{out}.part{w}" for w in range(workers)]
    args = [(p, seed, scale, budget, w, workers, dry) for w, p in enumerate(parts)]
    with mp.get_context("spawn").Pool(workers) as pool:
        done = sum(pool.starmap(work, args))
    with open(out, "w") as f:
        for p in parts:
            with open(p) as part:
                f.write(part.read())
            Path(p).unlink()
    return done


def main(argv: list[str]) -> int:
    ap = OneLineParser(prog="cublaslt_sweep")
    ap.add_argument("out")
    ap.add_argument("--budget", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=0, help="seed of the random shapes")
    ap.add_argument("--scale", type=int, default=1, help="times the random shapes per class")
    ap.add_argument("--workers", type=int, default=1, help="processes asking in turn")
    ap.add_argument("--dry-run", action="store_true", help="no GPU: every answer 'dry run'")
    try:
        args = ap.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    if args.scale < 1 or args.workers < 1:
        print("cublaslt_sweep: --scale and --workers are at least 1", file=sys.stderr)
        return 2
    t0 = time.monotonic()
    done = sweep(args.out, args.budget, args.seed, args.scale, args.workers, args.dry_run)
    print(
        f"cublaslt_sweep: {done} answers in {time.monotonic() - t0:.1f} s into {args.out} "
        f"({args.workers} workers)"
    )
    return 0


if __name__ == "__main__":  # pragma: no cover - needs a GPU
    sys.exit(main(sys.argv[1:]))
