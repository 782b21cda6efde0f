"""Throughput of the vector interpreter against MMA-Sim on identical random bits.

Run with `python bench/bench_simulate.py` (or `make bench`). For each case it prints our
dot products per second (best of --repeat runs of `tensorcore_smt.simulate` on N rows),
and, when mmasim and torch are importable, MMA-Sim's throughput on the same bits
(`mmasim.nv_ptx.MMA(arch, instr).dpa` on (N, K), (N, K), (N,) torch tensors), the ratio
ours / MMA-Sim against the goal, and whether the two produce identical bits.

Operands are random bit patterns: half of the rows uniform over all patterns (Inf/NaN
patterns kept in 1 case of 64, so most rows stay finite), half with exponents drawn near
the bias so that products and c overlap and the alignment / carry logic is exercised.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from dataclasses import dataclass

import numpy as np

import tensorcore_smt

GOAL = 10.0  # ours / MMA-Sim (the goal of issue 15, measured side by side)


@dataclass(frozen=True)
class Case:
    arch: str  # tensorcore_smt variant
    mmasim_arch: str  # mmasim.nv_ptx arch name
    instr: str


CASES = [
    Case("hopper", "Hopper", "m16n8k16.f32.f16.f16.f32"),
    Case("volta", "Volta", "m8n8k4.f32.f16.f16.f32"),
]

_UINT = {16: np.uint16, 32: np.uint32, 64: np.uint64}
_SIGNED = {16: np.int16, 32: np.int32, 64: np.int64}


def random_bits(rng: np.random.Generator, shape, storage: int, ebits: int, mbits: int):
    """Random patterns of an IEEE-like format (see the module docstring)."""
    hi = np.uint64((1 << storage) - 1)
    bits = rng.integers(0, hi, size=shape, dtype=np.uint64, endpoint=True)
    e_mask = np.uint64(((1 << ebits) - 1) << mbits)
    e_field = (bits & e_mask) >> np.uint64(mbits)
    special = (e_field == np.uint64((1 << ebits) - 1)) & (rng.integers(0, 64, size=shape) != 0)
    bits = np.where(special, bits ^ np.uint64(1 << (storage - 2)), bits)  # clear exp MSB
    bias = (1 << (ebits - 1)) - 1
    near = rng.integers(bias - 8, bias + 9, size=shape, dtype=np.int64).astype(np.uint64)
    narrow = (np.arange(shape[0]) % 2 == 1).reshape((-1,) + (1,) * (len(shape) - 1))
    narrow = np.broadcast_to(narrow, shape)
    bits = np.where(narrow, (bits & ~e_mask) | (near << np.uint64(mbits)), bits)
    return bits.astype(_UINT[storage])


def make_inputs(case: Case, n: int, seed: int):
    p = tensorcore_smt.resolve(case.arch, case.instr)
    rng = np.random.default_rng(seed)
    out = []
    for fmt, shape in ((p.a_fmt, (n, p.K)), (p.b_fmt, (n, p.K)), (p.c_fmt, (n,))):
        s = fmt.spec
        out.append(random_bits(rng, shape, s.storage, s.ebits, s.mbits))
    return p, out


def best_times(fns, repeat: int):
    """Best wall time and last result of each callable, runs interleaved so that a
    change in machine load affects every contender alike."""
    best = [float("inf")] * len(fns)
    results = [None] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            results[i] = fn()
            best[i] = min(best[i], time.perf_counter() - t0)
    return best, results


def mmasim_runner(case: Case, a, b, c):
    """A closure running MMA-Sim on the bits, returning uint64 output bits; None if absent."""
    try:
        import torch
        from mmasim.nv_ptx import MMA
        from mmasim.nv_ptx.isa_common import nv_torch_dtype
    except ImportError:
        return None
    fields = case.instr.split(".")
    d_t, a_t, b_t, c_t = fields[1:5]
    op = MMA(case.mmasim_arch, case.instr)

    def tensor(x, t):
        w = x.dtype.itemsize * 8
        return torch.from_numpy(x.view(_SIGNED[w])).view(nv_torch_dtype[t])

    ta, tb, tc = tensor(a, a_t), tensor(b, b_t), tensor(c, c_t)
    d_w = torch.finfo(nv_torch_dtype[d_t]).bits

    def run():
        d = op.dpa(ta, tb, tc)
        return d.view({16: torch.int16, 32: torch.int32, 64: torch.int64}[d_w]).numpy()

    def to_bits(d):
        return d.view(_UINT[d_w]).astype(np.uint64)

    return run, to_bits


def device_runner(p, a, b, c, device: str):
    """A closure running the vector interpreter on torch tensors already on `device` (the
    inputs are copied there once, as a GPU-resident workload would hold them); None when
    torch or the device is absent. Returns d as a host uint64 array."""
    try:
        import torch

        from tensorcore_smt.bv.core import BV
        from tensorcore_smt.bv.devices import array_backend
        from tensorcore_smt.model import dot_add
    except ImportError:
        return None
    try:
        be = array_backend(device)
    except ValueError:
        return None
    wa, wb, wc = p.a_fmt.spec.storage, p.b_fmt.spec.storage, p.c_fmt.spec.storage
    ta = [be.lanes(col, wa) for col in a.T.astype(np.int64)]
    tb = [be.lanes(col, wb) for col in b.T.astype(np.int64)]
    tc = be.lanes(c.astype(np.int64), wc)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)

    def run():
        with torch.no_grad():
            d = dot_add([BV(be, x, wa) for x in ta], [BV(be, x, wb) for x in tb], BV(be, tc, wc), p)
            sync()
        return be.to_host(d.v, len(c))

    return run


def with_threads(torch, n: int, fn):
    def run():
        saved = torch.get_num_threads()
        torch.set_num_threads(n)
        try:
            return fn()
        finally:
            torch.set_num_threads(saved)

    return run


GPU_GOAL = 1e9  # dot products/s on torch CUDA, hopper m16n8k16


def cuda_line(case: Case, args) -> None:
    """Throughput on torch CUDA (printed only where a CUDA device is present)."""
    try:
        import torch
    except ImportError:
        return
    if not torch.cuda.is_available():
        return
    p, (a, b, c) = make_inputs(case, args.cuda_rows, args.seed)
    run = device_runner(p, a, b, c, "cuda")
    run()  # warm-up: kernels compiled and cached
    (t,), (d,) = best_times([run], args.repeat)
    n_check = min(len(c), 200_000)
    same = np.array_equal(
        d[:n_check], tensorcore_smt.simulate_params(p, a[:n_check], b[:n_check], c[:n_check])
    )
    rate = args.cuda_rows / t
    goal = f"goal >= {GPU_GOAL:.0e}: {'met' if rate >= GPU_GOAL else 'NOT met'}"
    print(
        f"  ours, cuda     {rate:14,.0f} dot products/s  ({t:.3f} s, {args.cuda_rows:,} rows, "
        f"{torch.cuda.get_device_name()}; {goal}; bits {'identical' if same else 'DIFFER'})"
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", "--rows", type=int, default=200_000, help="dot products per run")
    ap.add_argument("-r", "--repeat", type=int, default=3, help="runs per case (best kept)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--torch-threads",
        type=int,
        default=None,
        help="torch.set_num_threads for MMA-Sim (default: torch's own default)",
    )
    ap.add_argument("--no-mmasim", action="store_true", help="skip MMA-Sim even if present")
    ap.add_argument(
        "--cuda-rows", type=int, default=1 << 23, help="dot products per run on a CUDA device"
    )
    args = ap.parse_args(argv)

    torch = mmasim = None
    threads = 1
    absent = "skipped (--no-mmasim)"
    if not args.no_mmasim:
        try:
            import mmasim
            import torch
        except ImportError as e:
            torch = mmasim = None
            absent = f"absent ({e.name or 'mmasim/torch'} not importable)"
    if torch is not None and args.torch_threads is not None:
        torch.set_num_threads(args.torch_threads)

    print(
        f"tensorcore_smt {tensorcore_smt.__version__}, numpy {np.__version__}, "
        f"python {platform.python_version()}, {os.cpu_count()} CPUs"
    )
    print(f"N = {args.rows:,} rows per run, best of {args.repeat} (interleaved runs)")
    print("ours:    tensorcore_smt.simulate (vector interpreter), 1 thread (numpy)")
    if torch is not None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            ver = version("mmasim")
        except PackageNotFoundError:
            ver = getattr(mmasim, "__version__", "?")
        threads = torch.get_num_threads()
        how = "set by --torch-threads" if args.torch_threads is not None else "torch default"
        print(f"MMA-Sim: mmasim {ver} on torch {torch.__version__}, {threads} threads ({how})")
        if threads > 1:
            print(f"         (also timed with 1 thread; {threads}-thread runs slow down sharply")
            print("          when other processes hold CPUs)")
    else:
        print(f"MMA-Sim: {absent}; our figures only")
    if hasattr(os, "getloadavg"):
        print("load average: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    print()

    ok = True
    for case in CASES:
        p, (a, b, c) = make_inputs(case, args.rows, args.seed)
        print(f"{case.arch} {case.instr} (K={p.K})")

        def ours_fn(p=p, a=a, b=b, c=c):
            return tensorcore_smt.simulate_params(p, a, b, c)

        runner = mmasim_runner(case, a, b, c) if torch is not None else None
        fns = [ours_fn]
        if runner is not None:
            fns.append(with_threads(torch, threads, runner[0]))
            if threads > 1:  # ours is single-threaded: the like-for-like reference
                fns.append(with_threads(torch, 1, runner[0]))
        times, results = best_times(fns, args.repeat)
        ours = args.rows / times[0]
        print(f"  ours           {ours:14,.0f} dot products/s  ({times[0]:.3f} s)")
        torch_cpu = device_runner(p, a, b, c, "cpu")
        if torch_cpu is not None:
            (t_cpu,), (d_cpu,) = best_times([torch_cpu], args.repeat)
            same = "identical" if np.array_equal(d_cpu, results[0]) else "DIFFER"
            print(
                f"  ours, torch cpu{args.rows / t_cpu:14,.0f} dot products/s  ({t_cpu:.3f} s; "
                f"bits {same})"
            )
        cuda_line(case, args)
        if runner is None:
            continue
        ref = args.rows / times[1]
        ratio = ours / ref
        n_diff = int(np.count_nonzero(results[0] != runner[1](results[1])))
        print(f"  MMA-Sim {threads:2d} thr  {ref:14,.0f} dot products/s  ({times[1]:.3f} s)")
        if len(times) > 2:
            ref1 = args.rows / times[2]
            print(f"  MMA-Sim  1 thr  {ref1:14,.0f} dot products/s  ({times[2]:.3f} s)")
            n_diff += int(np.count_nonzero(results[0] != runner[1](results[2])))
        verdict = "met" if ratio >= GOAL else "NOT met"
        print(f"  ratio          {ratio:14.2f}x  ours / MMA-Sim (goal >= {GOAL:g}x: {verdict})")
        if len(times) > 2:
            print(f"  ratio (1 thr)  {ours / ref1:14.2f}x")
        print(f"  bits           {'identical' if n_diff == 0 else f'DIFFER in {n_diff} rows'}")
        ok = ok and n_diff == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
