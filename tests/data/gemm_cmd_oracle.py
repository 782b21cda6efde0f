"""A cmd: oracle for `tcsmt identify --gemm` (the documented format): reads rows as JSONL
on stdin, {"a": [K hex], "b": [K hex], "c": hex}, and prints one d per line, computed by
tensorcore_smt.matmul under the GEMM hypothesis and instruction given as arguments."""

import json
import sys

import numpy as np

from tensorcore_smt.gemm.emulate import matmul
from tensorcore_smt.gemm.model import resolve_model
from tensorcore_smt.intake import from_bits
from tensorcore_smt.intake import operand_bits as bits_of


def main() -> None:
    hyp, instr = sys.argv[1], sys.argv[2]
    rows = [json.loads(line) for line in sys.stdin if line.strip()]
    K = len(rows[0]["a"])
    m = resolve_model(hyp, K, instr)
    for r in rows:
        A = from_bits(np.array([[int(x, 16) for x in r["a"]]], dtype=np.uint64), m.p.a_fmt)
        B = from_bits(np.array([[int(x, 16)] for x in r["b"]], dtype=np.uint64), m.p.b_fmt)
        C = from_bits(np.array([[int(r["c"], 16)]], dtype=np.uint64), m.c_fmt)
        D = matmul(m.variant, A, B, C, schedule=m.schedule, instr=instr)
        print(hex(int(bits_of(np.asarray(D), m.d_fmt, "D").reshape(-1)[0])))


if __name__ == "__main__":
    main()
