"""Replaying a transformer block's matrix products bit for bit: time, and the whole model.

Run with `python bench/bench_replay.py` (part of `make bench`; `--write results` also
writes results/replay.md). A small torch model is built from the shapes of one decoder
block of a 4B-parameter model like Qwen3-4B (hidden 2560, intermediate 9728, 32 query
heads and 8 key/value heads of 128, bf16) and run on `--tokens` tokens (250) under
`tc.emulate(HYPOTHESIS)`: its seven projections and the attention products (q k^T and
p v per head) are emulated, everything else (SiLU, softmax) runs natively. Beside it:
the same products as numpy fp32 and torch fp32 matmuls on this machine, and MMA-Sim's
rate on the bf16 instruction (its chained call on a sample of outputs of the largest
projection). The whole model's figure is the block's time times `LAYERS`. The load
average is recorded with every run: other processes slow every figure alike.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import tensorcore_smt as tc

sys.path.insert(0, str(Path(__file__).parent))
from bench_engine import best  # noqa: E402

HYPOTHESIS = "hopper"
"""An H100's bf16 products (wgmma.m64n8k16.f32.bf16.bf16, schedule serial)."""

HIDDEN, INTERMEDIATE, HEADS, KV_HEADS, HEAD_DIM = 2560, 9728, 32, 8, 128
"""Qwen3-4B's decoder block (its published config.json)."""
LAYERS = 36
GOAL_MODEL_S = 240.0
"""Issue 45: the whole model at 250 tokens in under 4 minutes on this machine."""
MMASIM_OUTPUTS = 512


@dataclass(frozen=True)
class Product:
    """One matrix product of the block: `count` products of M x K by K x N."""

    name: str
    M: int
    K: int
    N: int
    count: int = 1

    @property
    def macs(self) -> int:
        return self.M * self.K * self.N * self.count


def products(tokens: int) -> list[Product]:
    """The block's matrix products at `tokens` tokens (query heads share their key/value
    head; each head's q k^T and p v is one product)."""
    q, kv = HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM
    return [
        Product("q_proj", tokens, HIDDEN, q),
        Product("k_proj", tokens, HIDDEN, kv),
        Product("v_proj", tokens, HIDDEN, kv),
        Product("q k^T (per head)", tokens, HEAD_DIM, tokens, HEADS),
        Product("p v (per head)", tokens, tokens, HEAD_DIM, HEADS),
        Product("o_proj", tokens, q, HIDDEN),
        Product("gate_proj", tokens, HIDDEN, INTERMEDIATE),
        Product("up_proj", tokens, HIDDEN, INTERMEDIATE),
        Product("down_proj", tokens, INTERMEDIATE, HIDDEN),
    ]


def block(torch):
    """A decoder block of the shapes above (no norms, no rotary embedding: they are not
    matrix products), bf16, random weights."""
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            q, kv = HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM
            self.q_proj = nn.Linear(HIDDEN, q, bias=False)
            self.k_proj = nn.Linear(HIDDEN, kv, bias=False)
            self.v_proj = nn.Linear(HIDDEN, kv, bias=False)
            self.o_proj = nn.Linear(q, HIDDEN, bias=False)
            self.gate_proj = nn.Linear(HIDDEN, INTERMEDIATE, bias=False)
            self.up_proj = nn.Linear(HIDDEN, INTERMEDIATE, bias=False)
            self.down_proj = nn.Linear(INTERMEDIATE, HIDDEN, bias=False)

        def forward(self, x):
            T = x.shape[0]
            q = self.q_proj(x).view(T, HEADS, HEAD_DIM).transpose(0, 1)
            k = self.k_proj(x).view(T, KV_HEADS, HEAD_DIM).transpose(0, 1)
            v = self.v_proj(x).view(T, KV_HEADS, HEAD_DIM).transpose(0, 1)
            rep = HEADS // KV_HEADS
            k = k.repeat_interleave(rep, 0)
            v = v.repeat_interleave(rep, 0)
            s = torch.matmul(q, k.transpose(1, 2)) * HEAD_DIM**-0.5
            p = torch.softmax(s.float(), dim=-1).to(x.dtype)
            a = torch.matmul(p, v).transpose(0, 1).reshape(T, HEADS * HEAD_DIM)
            h = x + self.o_proj(a)
            g = torch.nn.functional.silu(self.gate_proj(h)) * self.up_proj(h)
            return h + self.down_proj(g)

    return Block().to(torch.bfloat16)


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"


def native_times(prods: list[Product], repeat: int, torch) -> dict[str, tuple[float, float]]:
    """(numpy fp32 s, torch fp32 s) of each product (best of `repeat`)."""
    rng = np.random.default_rng(0)
    out = {}
    for pr in prods:
        A = rng.standard_normal((pr.count, pr.M, pr.K)).astype(np.float32)
        B = rng.standard_normal((pr.count, pr.K, pr.N)).astype(np.float32)
        tA, tB = torch.from_numpy(A), torch.from_numpy(B)
        out[pr.name] = (
            best(lambda A=A, B=B: A @ B, repeat),
            best(lambda tA=tA, tB=tB: tA @ tB, repeat),
        )
    return out


def mmasim_rate(tokens: int) -> float | None:
    """MAC/s of MMA-Sim's chained call on MMASIM_OUTPUTS outputs of gate_proj (None
    without the mmasim extra or an MMA-Sim model of the instruction)."""
    import importlib.util

    if importlib.util.find_spec("mmasim") is None:
        return None
    import ml_dtypes

    from tensorcore_smt.validation import mmasim as bridge

    rng = np.random.default_rng(1)
    A = rng.standard_normal((tokens, HIDDEN)).astype(ml_dtypes.bfloat16)
    B = rng.standard_normal((HIDDEN, 64)).astype(ml_dtypes.bfloat16)
    info: list = []
    tc.matmul(HYPOTHESIS, A[:1], B[:, :1], run_info=info)
    run = info[0]
    op = bridge.make_op(run.hypothesis.arch, run.instr)
    if op is None:
        return None
    n = min(MMASIM_OUTPUTS, tokens * B.shape[1])
    m_idx, n_idx = np.divmod(np.arange(n), B.shape[1])
    a = A.view(np.uint16)[m_idx].astype(np.uint64)
    b = B.view(np.uint16).T[n_idx].astype(np.uint64)
    c = np.zeros(n, dtype=np.uint64)
    t0 = time.perf_counter()
    bridge.run(op, run.params, a, b, c)
    return n * HIDDEN / (time.perf_counter() - t0)


def emulated_times(tokens: int, torch) -> tuple[dict[str, tuple[float, float]], tuple, list]:
    """(wall s, CPU s of the process, every thread) of each emulated product (the block
    run under tc.emulate with every product timed), the block's whole (wall s, CPU s),
    and the (function, instruction) pairs. CPU time is what the work took whatever
    else ran on the cores."""
    model = block(torch)
    x = torch.randn(tokens, HIDDEN).to(torch.bfloat16)
    import tensorcore_smt.gemm.emulate as em

    times: list[tuple[float, float]] = []
    real = em.matmul

    def timed(*args, **kw):
        t0, c0 = time.perf_counter(), time.process_time()
        out = real(*args, **kw)
        times.append((time.perf_counter() - t0, time.process_time() - c0))
        return out

    with torch.no_grad():
        with tc.emulate(HYPOTHESIS):  # kernels compiled or loaded outside the timing
            model(x[:2])
        em.matmul = timed  # torchmode calls emulate.matmul, looked up at each call
        try:
            with tc.emulate(HYPOTHESIS) as mode:
                t0, c0 = time.perf_counter(), time.process_time()
                model(x)
                total = (time.perf_counter() - t0, time.process_time() - c0)
        finally:
            em.matmul = real
    names = [p.name for p in products(tokens)]
    order = ["q_proj", "k_proj", "v_proj", "q k^T (per head)", "p v (per head)"]
    order += ["o_proj", "gate_proj", "up_proj", "down_proj"]
    per = dict(zip(order, times)) if len(times) == len(names) else {}
    return per, total, list(mode.emulated)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=250)
    ap.add_argument("--repeat", type=int, default=3, help="native timings: best of")
    ap.add_argument("--write", default=None, help="folder to write replay.md into")
    args = ap.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("bench_replay: needs torch (pip install torch)", file=sys.stderr)
        return 2
    prods = products(args.tokens)
    macs = sum(p.macs for p in prods)
    load0 = _load()
    print(f"{HYPOTHESIS} block at {args.tokens} tokens: {macs / 1e9:.2f} G MAC; load {load0}")
    per, (total, total_cpu), emulated = emulated_times(args.tokens, torch)
    native = native_times(prods, args.repeat, torch)
    mms = mmasim_rate(args.tokens)
    load1 = _load()
    rows = []
    for p in prods:
        np_s, t_s = native[p.name]
        e = per.get(p.name)
        rows.append((p, e, np_s, t_s))
        es = "n/a"
        if e is not None:
            es = f"{e[0]:8.2f} s {p.macs / e[0] / 1e9:6.2f} G MAC/s, {e[1]:7.2f} CPU s"
        print(f"  {p.name:18s} {p.macs / 1e9:6.2f} G MAC  emulated {es}  numpy fp32 {np_s:.4f} s")
    np_total = sum(r[2] for r in rows)
    t_total = sum(r[3] for r in rows)
    model_s = total * LAYERS
    verdict = "met" if model_s < GOAL_MODEL_S else "NOT met"
    print(
        f"block: emulated {total:.1f} s ({macs / total / 1e9:.2f} G MAC/s), numpy fp32 "
        f"{np_total:.3f} s, torch fp32 {t_total:.3f} s; {total / np_total:.0f}x numpy"
    )
    print(f"whole model ({LAYERS} blocks): {model_s / 60:.1f} min ({verdict}: goal < 4 min)")
    cores = os.cpu_count() or 1
    print(
        f"CPU time: block {total_cpu:.1f} CPU s ({macs / total_cpu / 1e9:.2f} G MAC per CPU s); "
        f"the model on {cores} free cores: {total_cpu * LAYERS / cores / 60:.1f} min"
    )
    if mms is not None:
        print(
            f"MMA-Sim: {mms / 1e6:.3g} M MAC/s -> the model in {macs * LAYERS / mms / 3600:.0f} h"
        )
    print(f"load average after: {load1}")
    if args.write:
        _write(Path(args.write) / "replay.md", args.tokens, rows, (total, total_cpu), np_total,
               t_total, mms, emulated, (load0, load1))  # fmt: skip
    return 0


def _write(path: Path, tokens, rows, total, np_total, t_total, mms, emulated, loads) -> None:
    macs = sum(r[0].macs for r in rows)
    total, total_cpu = total
    model_s = total * LAYERS
    cores = os.cpu_count() or 1
    model_cpu = total_cpu * LAYERS / cores
    lines = [
        "# Replaying a 4B model's matrix products (bench/bench_replay.py)",
        "",
        f"One decoder block of Qwen3-4B's shapes (hidden {HIDDEN}, intermediate "
        f"{INTERMEDIATE}, {HEADS} query / {KV_HEADS} key-value heads of {HEAD_DIM}), bf16, "
        f"{tokens} tokens, run under `tc.emulate({HYPOTHESIS!r})` on {os.cpu_count()} CPUs; "
        f"load average {loads[0]} before and {loads[1]} after (other processes slow "
        "every figure alike). Emulated: "
        + ", ".join(sorted({f"{f} ({i})" for f, i in emulated}))
        + ".",
        "",
        "| product | G MAC | emulated s | emulated G MAC/s | emulated CPU s | G MAC per CPU s "
        "| numpy fp32 s | torch fp32 s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for p, e, np_s, t_s in rows:
        es = ("n/a",) * 4
        if e is not None:
            es = (f"{e[0]:.2f}", f"{p.macs / e[0] / 1e9:.2f}", f"{e[1]:.2f}",
                  f"{p.macs / e[1] / 1e9:.2f}")  # fmt: skip
        lines.append(
            f"| {p.name}{f' x {p.count}' if p.count > 1 else ''} | {p.macs / 1e9:.3f} | "
            f"{' | '.join(es)} | {np_s:.4f} | {t_s:.4f} |"
        )
    lines += [
        f"| **block** | {macs / 1e9:.2f} | {total:.1f} | {macs / total / 1e9:.2f} | "
        f"{total_cpu:.1f} | {macs / total_cpu / 1e9:.2f} | {np_total:.3f} | {t_total:.3f} |",
        "",
        f"Whole model ({LAYERS} blocks, matrix products only): **{model_s / 60:.1f} min** "
        f"emulated bit for bit (goal < {GOAL_MODEL_S / 60:.0f} min: "
        f"{'met' if model_s < GOAL_MODEL_S else 'not met'}), "
        f"{np_total * LAYERS:.1f} s as numpy fp32, {t_total * LAYERS:.1f} s as torch fp32; "
        f"the emulation takes {total / np_total:.0f}x numpy's time. By CPU time (every "
        f"thread of the process, whatever else ran): {total_cpu:.1f} CPU s a block, "
        f"{macs / total_cpu / 1e9:.2f} G MAC per CPU s, so the model on {cores} free cores "
        f"in about {model_cpu / 60:.1f} min "
        f"({'met' if model_cpu < GOAL_MODEL_S else 'not met'} on free cores).",
    ]
    if mms is not None:
        lines.append(
            f"MMA-Sim (its chained call on {MMASIM_OUTPUTS} outputs of gate_proj): "
            f"{mms / 1e6:.3g} M MAC/s, the whole model in about "
            f"{macs * LAYERS / mms / 3600:.0f} h."
        )
    path.write_text("\n".join(lines) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    raise SystemExit(main())
