"""GPU check of where torch._scaled_mm (use_fast_accum=True) splits K: for shapes between
the recorded ones (M = 8..31 at N = 4096, K = 11008; M = 1..7 at N = 11008, K = 16384),
cuBLASLt's heuristic split count under several workspace limits and how many kept
elements one chain and split-K 2 and 3 get wrong on a fresh call.

`python bench/fp8_split_probe.py cuda` (cpu: the model side only, on torch's CPU kernel).
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np

from tensorcore_smt.hardware.library_calls import CallClass
from tensorcore_smt.hardware.library_fit import mismatches
from tensorcore_smt.hardware.library_inputs import Kind
from tensorcore_smt.hardware.library_read import RecordedCall

SHAPES = [(m, 4096, 11008) for m in (7, 8, 10, 12, 15, 16, 20, 24, 31)] + [
    (m, 11008, 16384) for m in (1, 2, 3, 4, 5, 6, 7)
]
WORKSPACE_KIB = (32768, 1024, 768, 512, 384, 256)
SPLITS = tuple(int(s) for s in os.environ.get("SPLITS", "1,2,3").split(","))


def main(dev: str, shapes: list[tuple[int, int, int]]) -> None:
    cls = CallClass.parse("scaled-mm-fast.e4m3")
    for m, n, k in shapes:
        heur = {}
        if dev == "cuda":
            from tensorcore_smt.hardware.cublaslt import heuristic

            for kib in WORKSPACE_KIB:
                os.environ["CUBLASLT_WORKSPACE_SIZE"] = str(kib)
                f, why = heuristic(cls, m, n, k)
                heur[kib] = (f or {}).get("splitk_num", why)
            os.environ.pop("CUBLASLT_WORKSPACE_SIZE")
        rows = np.unique(np.linspace(0, m - 1, min(m, 6)).astype(np.int64))
        cols = np.arange(0, n, n // 8, dtype=np.int64)[:8]
        c = RecordedCall("probe", cls, m, n, k, Kind.NORMAL, 4242, False, rows, cols, None)
        c.d, _ = c.rerun(dev)
        wrong = {
            s: mismatches(c, f"hopper/serial[split_k={s}]" if s > 1 else "hopper/serial")
            for s in SPLITS
        }
        print(json.dumps({"m": m, "n": n, "k": k, "heuristic": heur, "wrong": wrong}), flush=True)


if __name__ == "__main__":
    extra = [tuple(map(int, s.split("x"))) for s in sys.argv[2:]]
    main(sys.argv[1], extra or SHAPES)
