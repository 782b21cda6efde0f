"""What LLVM's vectorisers made of a kernel's lane loop: its SIMD lanes and vector types.

A kernel's IR (kernel_ir.py, gemm_ir.py) is optimised as engine/jit.py compiles it; the
loop the vectoriser produced is the block LLVM names `vector.body` (the largest one when
there are several), else the scalar body (`compute` or `loop`). Its instructions are
counted by result type: `<16 x double>` is an operation on 16 outputs at once. For the
machine code the largest basic block of the function stands for the loop (the heaviest
straight-line code) and its instructions are counted by the widest register they name
(zmm: 512 bits, ymm: 256, xmm: 128, none: scalar). Used by bench/bench_engine.py for the
table in results/engine.md and by tests that a kernel stays vectorised.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from . import jit

_VECTOR = re.compile(r"^\s*%\S+ = .*?<(\d+) x (i\d+|double|float|half|ptr)>")
_BLOCK = re.compile(r"^([\w.$-]+):")


@dataclass(frozen=True)
class LoopVectors:
    """The lane loop of one kernel. `lanes`: elements of the loop's most frequent vector
    type (1: scalar loop); `types`: instructions per vector type ("16 x double"); `ops`:
    instructions in the loop body; `asm`: machine instructions of the largest basic
    block by widest register named ("zmm", "ymm", "xmm", "scalar")."""

    lanes: int
    types: dict[str, int]
    ops: int
    asm: dict[str, int]

    def summary(self, top: int = 4) -> str:
        """The most frequent vector types, e.g. '16 x i32 (310), 16 x double (118)'."""
        if not self.types:
            return "scalar"
        common = sorted(self.types.items(), key=lambda kv: -kv[1])[:top]
        return ", ".join(f"{t} ({n})" for t, n in common)


def _blocks(text: str) -> dict[str, list[str]]:
    """Basic blocks of the (one-function) IR text: label -> instruction lines."""
    out: dict[str, list[str]] = {}
    cur = None
    for line in text.splitlines():
        m = _BLOCK.match(line)
        if m:
            cur = m.group(1)
            out[cur] = []
        elif cur is not None and line.startswith("  ") and not line.strip().startswith(";"):
            out[cur].append(line)
    return out


def _asm_widths(asm: str) -> dict[str, int]:
    blocks: list[list[str]] = [[]]
    for line in asm.splitlines():
        if re.match(r"^\.?L?BB\d+_\d+:|^[\w.]+:", line):
            blocks.append([])
        elif line.startswith("\t") and not line.strip().startswith((".", "#")):
            blocks[-1].append(line)
    body = max(blocks, key=len)
    widths: Counter = Counter()
    for line in body:
        for reg in ("zmm", "ymm", "xmm"):
            if f"%{reg}" in line:
                widths[reg] += 1
                break
        else:
            widths["scalar"] += 1
    return dict(widths)


def loop_vectors(ir: str, vectorize: bool = True) -> LoopVectors:
    """Optimise `ir` as the engine compiles it and describe its lane loop."""
    mod = jit.optimise(ir, vectorize=vectorize)
    blocks = _blocks(str(mod))
    vec = [k for k in blocks if k.startswith("vector.body")]
    if vec:
        name = max(vec, key=lambda k: len(blocks[k]))
    else:
        name = next((k for k in ("compute", "loop") if k in blocks), max(blocks, key=len))
    body = blocks[name]
    types: Counter = Counter()
    for line in body:
        m = _VECTOR.match(line)
        if m:
            types[f"{m.group(1)} x {m.group(2)}"] += 1
    lanes = 1
    if types:
        lanes = int(max(types.items(), key=lambda kv: kv[1])[0].split(" x ")[0])
    with jit._LOCK:
        asm = jit._host_machine().emit_assembly(mod)
    return LoopVectors(lanes, dict(types), len(body), _asm_widths(asm))
