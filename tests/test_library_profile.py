"""Library profiles (format 2: gemm/library_profile.py, hardware/library_profile_build.py,
library_profile_check.py, library_invariance.py): a call's decision per source (recorded
shape, table rule, default); the class torch's own calls map to; a held-out GPU
recording reproduced through tc.emulate / tc.matmul with the decided recipe, the same
bits RecordedCall.model computes for it; batch invariance on a small slice; bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import tensorcore_smt as tc
from tensorcore_smt.cli import main
from tensorcore_smt.gemm.library_profile import class_key, class_name
from tensorcore_smt.gemm.library_rules import Rule, Table
from tensorcore_smt.gemm.profile_call import call_key, decide
from tensorcore_smt.gemm.profiles import (
    Epilogue,
    Flag,
    Function,
    Major,
    Source,
    load_file,
    load_profile,
)
from tensorcore_smt.hardware.library_calls import Op, Precision, classes
from tensorcore_smt.hardware.library_fit import fit_calls, mismatches, recording
from tensorcore_smt.hardware.library_profile_build import build_library_profile, write_profile

torch = pytest.importorskip("torch")

SHAPE = (2, 5, 741)  # recorded in the unaligned part of every seed


def _calls(gpu: str, name: str, seed: int | None = None):
    """The recorded calls of class `name` at SHAPE: fit calls, or those of one seed."""
    pool = fit_calls(gpu) if seed is None else recording(gpu, seed).calls
    return [
        c for c in pool if c.part == "unaligned" and c.cls.name == name and (c.m, c.n, c.k) == SHAPE
    ]


def _tables() -> list[Table]:
    return [
        Table(
            "t",
            ("linear-bias.bf16.*", "matmul.fp16.*"),
            "",
            (
                Rule("hopper/serial[split_k={cdiv(k, 512)}]", {"k_min": 700}),
                Rule("hopper/serial", {"m_min": 4}, ("h100",)),
            ),
            "a test table",
        )
    ]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    """A profile of the H200 built from the fit calls of two classes at SHAPE."""
    calls = _calls("h200", "linear-bias.fp16.rr1") + _calls("h200", "linear-bias.bf16.rr0")
    doc = build_library_profile("h200", among=_tables(), calls=calls)
    path = tmp_path_factory.mktemp("prof") / "h200-cublas-13.1.json"
    write_profile(doc, path)
    return path


def test_every_recorded_class_maps_to_its_key_and_back():
    names = [c.name for c in classes(tuple(Op), tuple(Precision))]
    keys = [class_key(n) for n in names]
    assert len(set(keys)) == len(names)
    assert [class_name(k) for k in keys] == names
    # addmm with unit scalars, or a bias, is still addmm's class; a layout no op has is none
    k = class_key("addmm.fp32")
    assert class_name(call_key(k.function, "fp32", "fp32", "fp32", {}, k.layout, Epilogue.C))
    odd = call_key(Function.MM, "fp16", "fp16", "fp16", {}, (Major.COL, Major.COL), Epilogue.NONE)
    assert class_name(odd) is None


def test_decision_per_source(tiny):
    p = load_file(tiny)
    assert p.is_library and p.tf32_round == "rne" and [t.name for t in p.tables] == ["t"]
    assert len(p.tables[0].rules) == 1  # the h100-only rule is not copied into an H200 profile
    shape = p.by_name("linear-bias.fp16.rr1").shapes[0]
    assert shape.exact and shape.origin == "default" and shape.mnk == SHAPE
    rec = decide(p, class_key("linear-bias.fp16.rr1"), *SHAPE)
    assert rec.source == Source.RECORDED and rec.recipe == "hopper"
    # not recorded at this K: the table's rule, its expression of K evaluated
    rule = decide(p, class_key("linear-bias.bf16.rr1"), 2, 5, 1500)
    assert rule.source == Source.RULE and rule.recipe == "hopper/serial[split_k=3]"
    assert rule.reason.startswith("t rule 0")
    # a recorded shape its recipe did not reproduce decides by the rules again, and says so
    bf = p.by_name("linear-bias.bf16.rr0").shapes[0]
    again = decide(p, class_key("linear-bias.bf16.rr0"), *SHAPE)
    if bf.exact:
        assert again.source == Source.RECORDED
    else:
        assert again.source == Source.RULE and "recorded, not reproduced" in again.reason
    # no rule: the default, written out (fp32: the FFMA chain; TF32: the probe's rounding)
    fp32 = decide(p, class_key("matmul.fp32"), 3, 3, 3)
    assert fp32.source == Source.DEFAULT and fp32.instr == "fma.rn.f32"
    tf32 = decide(p, class_key("matmul.tf32"), 3, 3, 3)
    assert tf32.source == Source.DEFAULT and tf32.recipe == "hopper/serial[operand_round=rne]"
    fast = decide(p, class_key("scaled-mm.e4m3"), 16, 16, 512)
    assert fast.source == Source.DEFAULT and "promote=128" in fast.recipe


def test_held_out_call_through_the_torch_calls_the_gpu_ran(tiny):
    """Seed 2 was never built from: the GPU's torch calls (library_calls.run), run under
    tc.emulate(profile), give the recorded bits, with the decision naming its source."""
    held = _calls("h200", "linear-bias.fp16.rr1", seed=2)
    assert len(held) == 3  # normal, wide, cancel inputs
    for c in held:
        with tc.emulate(str(tiny)) as mode:
            bits, _ = c.rerun("cpu")
        (dec,) = mode.decisions
        assert dec.source == Source.RECORDED and dec.call_class == "linear-bias.fp16.rr1"
        assert (dec.m, dec.n, dec.k) == SHAPE and dec.key.flags == ((Flag.FP16_REDUCED, True),)
        assert np.array_equal(bits, c.d)
    # the inputs discriminate: another order or precision of the sum misses some element
    assert sum(mismatches(c, "hopper/serial[split_k=3,reduce_fmt=out]", None) for c in held)


def test_shipped_profile_held_out_calls_one_code_path():
    """tc.matmul('h200', ...) on whole operands and RecordedCall.model on the kept ones
    compute the same bits for the recipe the shipped profile decides; a held-out call
    the profile check counts as reproduced is the recording's bits."""
    from tensorcore_smt.hardware.library_profile_check import replay

    p = load_profile("h200")
    assert p.name == "h200-cublas-13.1" and p.is_library
    small = sorted(recording("h200", 2).part("holdout"), key=lambda c: c.m * c.n * c.k)
    picked = [c for c in small if c.batch == 1 and c.cls.op == Op.MATMUL][:4]
    assert picked
    for c in picked:
        r = replay(p, c)
        a, b, _ = c.operands()
        info: list = []
        flags = {"tf32": c.cls.name.endswith("tf32")}
        if c.cls.reduced is not None:
            flags[f"{c.cls.precision.value}_reduced"] = c.cls.reduced
        A = _whole(c, "A")
        B = _whole(c, "B")
        got = tc.matmul("h200", A, B, flags=flags, run_info=info)
        dec = info[0].decision
        assert (dec.recipe, dec.instr, dec.call_class) == (
            r.decision.recipe,
            r.decision.instr,
            c.cls.name,
        )
        kept = np.asarray(got)[np.ix_(c.rows, c.cols)].view(c.d.dtype)
        model = c.model(dec.recipe, dec.instr)[0]
        assert np.array_equal(kept, model)
        assert np.array_equal(kept, c.d[0]) == r.exact


def _whole(c, which: str) -> np.ndarray:
    from tensorcore_smt.hardware.library_inputs import Operand, block

    fmt = c.cls.operand_format
    if which == "A":
        return block(c.kind, fmt, c.seed, Operand.A, np.arange(c.m), np.arange(c.k))
    return block(c.kind, fmt, c.seed, Operand.B, np.arange(c.k), np.arange(c.n))


def test_invariance_finds_the_m_a_rule_changes_at(tmp_path):
    doc = {
        "format": 2,
        "name": "h100-cublas-13.1",
        "gpu": "h100",
        "device": "test",
        "library": {},
        "arch": "hopper",
        "default": "hopper",
        "tables": [
            {
                "name": "m",
                "classes": ["matmul.bf16.*"],
                "rules": [
                    {"when": {"m_min": 4}, "recipe": "hopper/serial[split_k=2]"},
                    {"recipe": "hopper/serial"},
                ],
            }
        ],
        "classes": [],
    }
    path = tmp_path / "h100-cublas-13.1.json"
    path.write_text(json.dumps(doc))
    args = ["invariance", "--profile", str(path), "--dtype", "bf16", "--n", "16", "--k", "300"]
    r = CliRunner().invoke(main, [*args, "--m", "1..6", "--json"])
    assert r.exit_code == 1, r.output  # varies
    rep = json.loads(r.output)
    (change,) = rep["changes"]
    assert (change["m_before"], change["m"]) == (3, 4) and change["step"] == "differs"
    w = change["witness"]
    assert w is not None
    # the same profile against itself: the same bits at every M
    r = CliRunner().invoke(main, [*args, "--m", "1..6", "--against", str(path)])
    assert r.exit_code == 0, r.output


def test_batch_slice_against_the_recordings():
    """Row 0 at the first M of one recorded batch series: the profile's bits are counted
    right exactly where the recipe it decides reproduces the recording."""
    from tensorcore_smt.hardware.library_invariance import series
    from tensorcore_smt.hardware.library_profile_check import decision_of

    p = load_profile("h200")
    calls = [
        c
        for c in recording("h200", 2).part("batch")
        if c.cls.name == "matmul.bf16.rr1" and (c.n, c.k) == (4096, 4096) and c.m <= 2
    ]
    (s,) = series(p, calls)
    assert s.ms == [1, 2]
    right = 0
    for c in calls:
        d = decision_of(p, c)
        right += mismatches(c, d.recipe, d.instr) == 0
    assert s.bits_right == right


def test_bad_input_is_one_line_exit_2(tmp_path):
    run = CliRunner().invoke
    r = run(main, ["profile", "check", "h999"])
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1
    r = run(main, ["profile", "check", "h200", "--recordings", str(tmp_path)])
    assert r.exit_code == 2 and "not a library recording" in r.output
    assert len(r.output.strip().splitlines()) == 1
    r = run(main, ["profile", "build", "--from-library", "h999"])
    assert r.exit_code == 2 and "h999" in r.output
    r = run(main, ["profile", "build"])
    assert r.exit_code == 2 and "--from-library" in r.output
    r = run(main, ["invariance", "--profile", "h999", "--n", "8", "--k", "8", "--m", "1..2"])
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1


def test_check_cli_counts_a_recording_folder(tiny, tmp_path):
    """`profile check --recordings DIR` on a recording folder of six held-out calls:
    three of a recorded shape (source recorded), three a table rule decides (source
    rule), each counted as an independent recount of its recipe finds."""
    fp16 = _calls("h200", "linear-bias.fp16.rr1", seed=2)
    bf16 = _calls("h200", "linear-bias.bf16.rr1", seed=2)
    (tmp_path / "manifest.json").write_text(json.dumps({"parts": [{"name": "unaligned"}]}))
    lines = [json.dumps(c.raw) + "\n" for c in fp16 + bf16]
    (tmp_path / "unaligned.jsonl").write_text("".join(lines))
    r = CliRunner().invoke(
        main, ["profile", "check", str(tiny), "--recordings", str(tmp_path), "--json"]
    )
    doc = json.loads(r.output)
    by = doc["total"]["by_source"]
    assert by["recorded"] == {"calls": 3, "calls_reproduced": 3}
    ok = sum(mismatches(c, "hopper/serial[split_k=2]", None) == 0 for c in bf16)
    assert by["rule"] == {"calls": 3, "calls_reproduced": ok}
    assert r.exit_code == (0 if ok == 3 else 1)
    r = CliRunner().invoke(main, ["profile", "check", str(tiny), "--recordings", str(tmp_path)])
    assert "total: " in r.output and "by source: recorded 3/3, rule " in r.output


def test_gemm_cli_takes_any_recorded_class_of_a_library_profile():
    args = ["gemm", "--profile", "h200", "--random", "4,8,64", "--json", "--no-errors"]
    r = CliRunner().invoke(main, [*args, "--call", "linear.fp16.rr0"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    dec = doc["decision"]
    assert dec["call_class"] == "linear.fp16.rr0" and dec["layout"] == "row,col"
    assert dec["flags"] == {"fp16_reduced": False} and dec["source"] in ("rule", "default")
    assert doc["runs"][0]["hypothesis"] == dec["recipe"]
    r = CliRunner().invoke(main, [*args, "--call", "linear.fp8.rr0"])
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1


def test_a_batch_of_inputs_times_a_weight_is_one_gemm_of_all_rows():
    """torch folds an N-D input times a 2-D weight into one mm (cuBLAS sees M = all
    rows): the profile decides at that M, and a batch of weights stays a bmm."""
    x = torch.ones((2, 3, 16), dtype=torch.float16)
    w = torch.ones((8, 16), dtype=torch.float16)
    with tc.emulate("h200") as mode:
        y = torch.nn.functional.linear(x, w)
        x @ w.t()
        torch.bmm(x, w.t().expand(2, 16, 8).contiguous())
    lin, mm, bmm = mode.decisions
    assert y.shape == (2, 3, 8) and bool((y == 16).all())
    assert (lin.m, lin.batch, lin.call_class) == (6, (), "linear.fp16.rr1")
    assert (mm.m, mm.batch, mm.call_class) == (6, (), "matmul-bt.fp16.rr1")
    assert (bmm.m, bmm.batch, bmm.call_class) == (3, (2,), "bmm.fp16.rr1")


def test_show_lists_tables_rules_and_recorded_shapes(tiny):
    r = CliRunner().invoke(main, ["profile", "show", str(tiny)])
    assert r.exit_code == 0, r.output
    out = r.output
    assert "table t: linear-bias.bf16.*, matmul.fp16.*" in out
    assert "rule 0: k_min=700 -> hopper/serial[split_k={cdiv(k, 512)}]" in out
    assert "rule 1" not in out  # the h100-only rule is not in an H200 profile
    assert "class linear-bias.fp16.rr1: linear fp16xfp16->fp16" in out
    assert "2x5x741" in out and "default  all" in out
