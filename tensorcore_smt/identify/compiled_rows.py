"""GEMM hypotheses run on rows with the compiled engine, and when that pays.

The numpy interpreter costs `identify --gemm` a fixed time per hypothesis run whatever the
number of rows: K / k instruction steps, each an evaluation of the instruction's DAG one
numpy operation at a time (about 0.2 s at K = 512 on FP8 Hopper, on 29 rows as on 2048;
0.02-0.07 s where its chains from +0 run stacked as lanes, identify/stacked.py).
The compiled engine (gemm/compiled.py `run_gemm`, the runner `tc.matmul` calls) runs the
same model code, element.py's step functions compiled, in a few milliseconds once the
instruction's kernel is made; making it costs seconds, and the kernel is kept (in memory
and on disk) for every schedule of the same instruction parameters. `CompiledRows` runs a
hypothesis there when its rows are many enough to repay making the kernel, or when the
kernel of its instruction parameters is already made in this process; otherwise it
declines and the caller runs the numpy interpreter. Either way the bits are element.py's: tests check the two bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..bv.dtypes import UNSIGNED
from ..errors import UserError
from ..gemm.model import GemmModel

MANY_ROWS = 8192
"""Rows from which a hypothesis runs compiled even if its kernel is still to be made.
Measured in `identify --gemm` at K = 256 on FP8 Hopper (load about 6): making a kernel
costs about 1.7 s and the search meets hundreds of instruction parameters (373 in one
run, 137 kernels made when every run on 512 rows or more went compiled: 243 s of 467),
while the numpy interpreter takes about 0.07 s on a few rows and 0.1 s on 1536; numpy
on 2048 rows at K = 512 takes 0.4 s, so only the larger pool's 8192 and 32768 rows repay
a kernel."""


@dataclass
class CompiledRows:
    """Runs GEMM models on rows with the compiled engine where that pays (module
    docstring); counts what ran where, for the profile."""

    enabled: bool = True
    made: set = field(default_factory=set)  # ModelParams whose kernels are made
    compiled_runs: int = 0
    numpy_runs: int = 0
    failed: dict = field(default_factory=dict)  # ModelParams -> why the engine refused

    def wants(self, m: GemmModel, n_rows: int) -> bool:
        """Whether `m` on `n_rows` rows should run compiled (counts a numpy run if not)."""
        ok = self.enabled and eligible(m) and m.p not in self.failed
        if ok and (n_rows >= MANY_ROWS or m.p in self.made):
            return True
        self.numpy_runs += 1
        return False

    def run(self, m: GemmModel, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray | None:
        """d bits (uint64) of `m` on rows a, b (N, K) and c (N,), or None when the compiled
        engine cannot run it here (then never asked again for these parameters)."""
        try:
            from ..gemm.compiled import run_gemm
            from ..gemm.emulate import _table
            from ..gemm.outputs import OutputList
            from ..gemm.plan import k_positions
        except ImportError as e:  # llvmlite missing or unloadable
            self.enabled = False
            self.failed[m.p] = str(e)
            return None
        n = len(c)
        if np.shape(a) != (n, m.K) or np.shape(b) != (n, m.K):
            return None  # the numpy interpreter names the shapes it expects
        pos = k_positions(m.K, m.plan.gap, m.plan.gaps)  # type: ignore[attr-defined]
        a_t = _table(np.asarray(a, dtype=UNSIGNED[64]), m.K_padded, pos)
        b_t = _table(np.asarray(b, dtype=UNSIGNED[64]), m.K_padded, pos)
        c_bits = np.asarray(c, dtype=UNSIGNED[64]).astype(UNSIGNED[m.c_fmt.spec.storage])
        out = np.empty(n, dtype=UNSIGNED[m.d_fmt.spec.storage])
        idx = np.arange(n, dtype=np.int64)
        try:
            run_gemm(m.p, m.plan, m.schedule, a_t, b_t, OutputList(idx, idx), c_bits, m.c_fmt, out)
        except (UserError, ValueError, NotImplementedError) as e:
            self.failed[m.p] = f"{type(e).__name__}: {e}"
            return None
        self.made.add(m.p)
        self.compiled_runs += 1
        return out.astype(np.uint64)


def eligible(m: GemmModel) -> bool:
    """Whether the compiled runner takes `m` as one plan over its rows (what
    gemm/compiled.py run_gemm accepts: not block-scaled, c and d of the instruction in
    one format, no stream-K cut, which gives each tile its own plan)."""
    p = m.p
    return (
        p.scale_fmt is None and p.c_fmt == p.d_fmt and getattr(m.schedule, "stream_k", None) is None
    )
