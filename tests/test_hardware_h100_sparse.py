"""What the H100 returned for the structured-sparse (mma.sp) forms and the integer
validation (results/hardware/h100/sparse, integer/), replayed against the current model.

The sparse rows are redrawn from (rows, seed) of sparse.json (hardware/sparse.py); the
GPU's answers to the first rows are kept. The preset (`sparse=compressed`) must give
every kept answer bit for bit and the expanded hypothesis must stay refuted on the
floating-point forms. The fast suite replays one form of each operand type and shape;
the slow one all of them.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tensorcore_smt.api import simulate_params
from tensorcore_smt.hardware.gpu import safe_name
from tensorcore_smt.hardware.sparse import sparse_rows
from tensorcore_smt.spec.presets import PRESETS, parse_variant

RUN = Path(__file__).resolve().parents[1] / "results" / "hardware" / "h100"
SPARSE = json.loads((RUN / "sparse" / "sparse.json").read_text())
FAST = {
    "mma.sp::ordered_metadata.m16n8k32.f32.f16.f16.f32",
    "mma.sp.m16n8k16.f16.f16.f16.f16",
    "mma.sp.m16n8k32.f32.bf16.bf16.f32",
    "mma.sp::ordered_metadata.m16n8k16.f32.tf32.tf32.f32",
    "mma.sp.m16n8k8.f32.tf32.tf32.f32",
    "mma.sp.m16n8k64.satfinite.s32.s8.u8.s32",
}


def _params(e: dict) -> list:
    marks = [] if e["instruction"] in FAST else [pytest.mark.slow]
    return pytest.param(e, id=e["instruction"], marks=marks)


def test_the_run_covers_every_sparse_operand_type():
    names = [e["instruction"] for e in SPARSE]
    assert len(names) == 45 and not [e for e in SPARSE if "error" in e]
    for t in (".f16.f16.f16.f16", ".f32.f16.", ".bf16.", ".tf32.", ".s8.u8.", "satfinite"):
        assert any(t in n for n in names), t
    assert FAST <= set(names)


@pytest.mark.parametrize("entry", [_params(e) for e in SPARSE])
def test_kept_sparse_answers_are_the_presets(entry):
    name = entry["instruction"]
    p = PRESETS["hopper"].instructions[name].params
    d_gpu = np.load(RUN / "sparse" / f"{safe_name(name)}.d.npy").astype(np.uint64)
    a, b, c, meta, _, _ = sparse_rows(p, entry["rows"], entry["seed"])
    n = len(d_gpu)
    a, b, c, meta = a[:n], b[:n], c[:n], meta[:n]
    assert np.array_equal(simulate_params(p, a, b, c, meta=meta), d_gpu)
    q = parse_variant("hopper[sparse=expanded]").params(name)
    wrong = int((simulate_params(q, a, b, c, meta=meta) != d_gpu).sum())
    if p.d_fmt.spec.is_integer:
        assert wrong == 0  # exact sums: the two hypotheses agree on integers
    else:
        assert wrong > 0  # refuted on the kept rows alone
    counts = {h: v["mismatches"] for h, v in entry["hypotheses"].items()}
    assert counts["hopper"] == 0
    assert (counts["hopper[sparse=expanded]"] > 0) == (not p.d_fmt.spec.is_integer)


INTEGER = json.loads((RUN / "integer" / "validation.json").read_text())
INT_FAST = {
    "m8n8k16.satfinite.s32.u8.s8.s32",
    "m16n8k32.s32.s8.s8.s32",
    "m16n8k32.satfinite.s32.s4.u4.s32",
    "wgmma.m64n8k32.satfinite.s32.s8.s8",
}


def test_integer_run_covers_every_integer_form_at_zero_mismatches():
    names = {v["instruction"] for v in INTEGER}
    assert len(names) == 60 and sum(v["mismatches"] for v in INTEGER) == 0
    assert INT_FAST <= names
    for t in (".s4.", ".u4.", ".b1.", "wgmma.", "satfinite", "m8n8k16"):
        assert any(t in n for n in names), t


@pytest.mark.parametrize(
    "entry",
    [
        pytest.param(
            v, id=v["instruction"], marks=[] if v["instruction"] in INT_FAST else [pytest.mark.slow]
        )
        for v in INTEGER
        if v["alternatives"]
    ],
)
def test_integer_alternatives_counts_regenerate(entry):
    """The GPU agreed with the preset on every row, so an alternative mispredicts exactly
    the redrawn rows where it differs from the preset: the recorded counts come back."""
    from tensorcore_smt.hardware.validation import _run_rows

    name = entry["instruction"]
    p = PRESETS["hopper"].instructions[name].params
    others = {v: parse_variant(v).params(name) for v in entry["alternatives"]}
    differ = dict.fromkeys(others, 0)
    for _, a, b, c in _run_rows(entry, p):
        d = simulate_params(p, a, b, c)
        for v, q in others.items():
            differ[v] += int((simulate_params(q, a, b, c) != d).sum())
    assert differ == entry["alternatives"]
    sat = ".satfinite." in name
    assert differ["hopper[int_clamp=wrap]" if sat else "hopper[int_clamp=satfinite]"] > 0
