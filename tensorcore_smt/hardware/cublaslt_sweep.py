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

`python -m tensorcore_smt.hardware.cublaslt_sweep OUT.jsonl [--budget SECONDS] [--seed S]`
(S picks the random shapes: a second sweep with another seed asks new ones).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from itertools import zip_longest

import numpy as np

from .library_calls import CallClass, Op, Precision, classes
from .library_plan import LLM_K, LLM_N, batch_ms

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


def sweep_shapes(cls: CallClass, seed: int = 0) -> list[tuple[int, int, int]]:
    """The shapes asked for `cls`, in the order asked."""
    shapes = [(m, n, k) for n in LLM_N for k in LLM_K for m in batch_ms(8192)]
    rng = np.random.Generator(np.random.PCG64([seed, 4601]))
    e = rng.uniform(0, math.log(16384), (RANDOM_SHAPES, 3))
    deep = np.random.Generator(np.random.PCG64([seed, 4602])).uniform(
        (0, 0, math.log(DEEP_K)), math.log(16384), (DEEP_SHAPES, 3)
    )
    for pair in zip_longest(e, deep):
        shapes += [
            tuple(int(x) for x in np.maximum(1, np.round(np.exp(r)))) for r in pair if r is not None
        ]
    return [s for s in shapes if cls.applies(*s)]


def main(argv: list[str]) -> int:
    from .cublaslt import heuristic

    ap = argparse.ArgumentParser(prog="cublaslt_sweep")
    ap.add_argument("out")
    ap.add_argument("--budget", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=0, help="seed of the random shapes")
    args = ap.parse_args(argv)
    import torch

    torch.zeros(1, device="cuda") @ torch.zeros(1, device="cuda")  # load cuBLAS(Lt)
    queue = [[(c, s) for s in sweep_shapes(c, args.seed)] for c in sweep_classes()]
    t0 = time.monotonic()
    done = 0
    with open(args.out, "w") as f:
        for row in zip_longest(*queue):
            if time.monotonic() - t0 > args.budget:
                break
            for item in row:
                if item is None:
                    continue
                cls, (m, n, k) = item
                fields, why = heuristic(cls, m, n, k)
                rec: dict = {"class": cls.name, "m": m, "n": n, "k": k}
                if fields is None:
                    rec["error"] = why
                else:
                    rec["f"] = [fields[name] for name in FIELD_ORDER]
                f.write(json.dumps(rec, separators=(",", ":")) + "\n")
                done += 1
    print(f"cublaslt_sweep: {done} answers in {time.monotonic() - t0:.1f} s into {args.out}")
    return 0


if __name__ == "__main__":  # pragma: no cover - needs a GPU
    sys.exit(main(sys.argv[1:]))
