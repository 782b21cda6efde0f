"""results/ARCH/sparse/ (`make results`, bench/make_results.py --sparse): the property
library on each preset's sparse form. Every committed witness is replayed here on a
second interpreter (the numpy vector engine, not the concrete one that re-checked it):
the unit's entries of A and the metadata in the vector file give the predictions stored
beside them, and the two variants of every sat query differ on it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tensorcore_smt import api
from tensorcore_smt.model.sparse import positions
from tensorcore_smt.validation.vectors import load

RESULTS = Path(__file__).resolve().parent.parent / "results"
SPARSE_ARCHS = ("ampere", "ada", "hopper")
FORM = "mma.sp.m16n8k32.f32.f16.f16.f32"
VECTOR_FILES = sorted(RESULTS.glob("*/sparse/*.vectors.json"))


def test_every_preset_with_the_form_has_answers():
    summary = json.loads((RESULTS / "sparse.json").read_text())
    assert set(summary) == set(SPARSE_ARCHS)
    for arch, props in summary.items():
        answered = [n for n, r in props.items() if "queries" in r]
        assert {"carry-bits", "monotonicity", "alignment-bits"} <= set(answered), arch
        for name in answered:
            report = json.loads((RESULTS / arch / "sparse" / f"{name}.json").read_text())
            assert report["instruction"] == FORM
            for q in report["queries"]:
                assert "--meta 0,1" in q["constraints"]
                assert q["verdict"] in ("witness", "unsat", "unknown")


@pytest.mark.parametrize("path", VECTOR_FILES, ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_witnesses_replay_on_the_numpy_engine(path):
    vf = load(path)
    assert vf.instruction == FORM and vf.vectors
    for v in vf.variants:
        p = vf.variant_params(v)
        a = np.array([x.a for x in vf.vectors], dtype=np.uint64)
        b = np.array([x.b for x in vf.vectors], dtype=np.uint64)
        c = np.array([x.c for x in vf.vectors], dtype=np.uint64)
        meta = np.array([x.metadata for x in vf.vectors], dtype=np.int64)
        assert a.shape[1] == p.n_a == 16 and b.shape[1] == p.K == 32
        d = api.simulate_params(p, a, b, c, engine="numpy", meta=meta)
        assert d.tolist() == [x.predicted[v] for x in vf.vectors], v
    for x in vf.vectors:  # the default metadata: positions 0 and 1 of every group
        assert positions(x.metadata, vf.variant_params(vf.variants[0])) == [
            k for k in range(32) if k % 4 < 2
        ]


def test_sat_witnesses_tell_their_variants_apart():
    seen = 0
    for path in sorted(RESULTS.glob("*/sparse/*.json")):
        if path.name.endswith(".vectors.json"):
            continue
        for q in json.loads(path.read_text())["queries"]:
            w = q.get("witness")
            if not w or q["goal"] != "differ":
                continue
            outs = [o["hex"] for o in w["outputs"].values()]
            assert outs[0] != outs[1] and w["reproduces"], (path, q["id"])
            seen += 1
    assert seen >= 3
