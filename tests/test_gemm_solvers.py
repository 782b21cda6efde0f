"""Solvers at the GEMM level: `tcsmt diff` / `tcsmt prove` of `ARCH/SCHEDULE` hypotheses,
every schedule field shown to change some output by a solver witness (re-checked on the
concrete model and on the emulator), GEMM vector files, and one-line errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from tensorcore_smt.cli import main
from tensorcore_smt.errors import ExitCode, UserError
from tensorcore_smt.gemm.emulate import matmul
from tensorcore_smt.intake import from_bits
from tensorcore_smt.intake import operand_bits as bits_of
from tensorcore_smt.smt.gemm_query import focus_positions, make_gemm_query
from tensorcore_smt.smt.gemm_solve import answer_gemm
from tensorcore_smt.smt.query import Goal
from tensorcore_smt.smt.solve import Limits, Verdict
from tensorcore_smt.validation import gemm_vectors as gv

FP8 = "wgmma.m64n8k32.f32.e4m3.e4m3"
FP16 = "m16n8k16.f32.f16.f16.f32"
FP16_WGMMA = "wgmma.m64n8k16.f32.f16.f16"  # what libraries run on Hopper for fp16 inputs
LIMITS = Limits(solver="bitwuzla", timeout=120.0)
LANES = "hopper/serial[split_k=4,split=interleaved,split_tile=1]"  # 4 lanes of fp32 FMAs


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def emulate(hyp: str, instr: str, w: dict, q, which: int = 0) -> int:
    """The witness through `matmul` (a 1xK row by a Kx1 column, plus c): the bits of D
    in the output format of hypothesis `which` of the query."""
    m = q.models[which]
    A = from_bits(np.array([[w[f"a{k}"] for k in range(q.K)]], dtype=np.uint64), m.p.a_fmt)
    B = from_bits(np.array([[w[f"b{k}"]] for k in range(q.K)], dtype=np.uint64), m.p.b_fmt)
    C = from_bits(np.array([[w["c"]]], dtype=np.uint64), m.c_fmt)
    D = matmul(hyp, A, B, C, instr=instr)
    return int(bits_of(np.asarray(D), m.d_fmt, "D").reshape(-1)[0])


def witness_for(x: str, y: str, K: int, instr: str):
    """A solver witness on which x and y differ, checked here once more by `matmul`."""
    q = make_gemm_query(x, y, K, instr, Goal.DIFFER)
    o = answer_gemm(q, LIMITS)
    assert o.verdict == Verdict.WITNESS, (x, y, o.verdict, o.note)
    w = o.witness
    assert w.reproduces and w.emulated == w.outputs
    dx, dy = emulate(x, instr, w.inputs, q, 0), emulate(y, instr, w.inputs, q, 1)
    assert (dx, dy) == tuple(w.outputs) and dx != dy
    return o


def test_diff_serial_vs_promoted_fp16_k256_witness_rechecked_on_the_emulator(tmp_path):
    out = tmp_path / "w.json"
    r = run(
        "diff", "hopper/serial", "hopper/serial[promote=128]", "--k", "256",
        "--solver", "bitwuzla", "--json", "--out", str(out),
    )  # fmt: skip
    assert r.exit_code == ExitCode.OK, r.output
    rep = json.loads(r.output)
    assert rep["level"] == "gemm" and rep["verdict"] == "witness"
    assert rep["instruction"] == FP16_WGMMA and rep["K"] == 256
    w = rep["witness"]
    assert w["reproduces"] and w["rechecked_on_emulator"]
    outs = [v["hex"] for v in w["outputs"].values()]
    assert outs[0] != outs[1] and list(w["emulated"].values()) == outs
    gf = gv.load(out)
    assert gf.K == 256 and gf.hypotheses == ["hopper/serial", "hopper/serial[promote=128]"]
    fresh = gv.predict(gf)
    assert fresh.vectors[0].predicted == gf.vectors[0].predicted


def test_focus_keeps_the_first_and_last_block_of_every_chain():
    q = make_gemm_query("hopper/serial", "hopper/serial[promote=128]", 256, FP8)
    # serial: one chain over blocks 0..7; promoted: chains 0..3 and 4..7 (k32 blocks)
    want = set(range(0, 32)) | set(range(96, 160)) | set(range(224, 256))
    assert set(focus_positions(q)) == want


@pytest.mark.parametrize(
    ("x", "y", "K", "instr"),
    [
        ("hopper/serial", "hopper/serial[promote=64]", 128, FP8),
        ("hopper/serial[split_k=2,split_tile=32]", "hopper/serial[c_join=epilogue]", 64, FP8),
        pytest.param(
            LANES,
            LANES[:-1] + ",combine=0+2+(1+3)]",
            4,
            "fma.rn.f32",
            marks=pytest.mark.slow,  # about 21 s
        ),
    ],
)
def test_schedule_fields_change_outputs_fast(x, y, K, instr):
    witness_for(x, y, K, instr)


def test_prove_beta_half_against_serial_finds_a_witness():
    """beta = 0.5 puts C in the epilogue at half weight; serial (alpha = beta = 1) adds C
    into the chain: `prove` must refute their equality with a witness that the concrete
    model and the emulator reproduce."""
    r = run("prove", "hopper/serial[beta=0.5]", "hopper/serial", "--k", "16",
            "--solver", "bitwuzla", "--json")  # fmt: skip
    assert r.exit_code == ExitCode.REFUTED, r.output
    w = json.loads(r.output)["witness"]
    assert w["reproduces"] and w["rechecked_on_emulator"]
    o = witness_for("hopper/serial[beta=0.5]", "hopper/serial", 16, FP16)
    c = o.witness.inputs["c"]
    assert c != 0  # the outputs differ through C, the only place beta acts


FIELD_PAIRS = [
    # (field, x, y, K, instruction)
    ("order", "hopper/serial", "hopper/serial[order=descending]", 64, FP8),
    ("split", "hopper/serial[split_k=2,split_tile=32]",
     "hopper/serial[split_k=2,split_tile=32,split=interleaved]", 128, FP8),
    ("split_tile", "hopper/serial[split_k=2,split_tile=32]",
     "hopper/serial[split_k=2,split_tile=64]", 192, FP8),
    ("reduce", "hopper/serial[split_k=3,split_tile=32]",
     "hopper/serial[split_k=3,split_tile=32,reduce=pairwise]", 96, FP8),
    ("combine", LANES, LANES[:-1] + ",combine=0+2+(1+3)]", 4, "fma.rn.f32"),
    ("kblocks", "hopper/serial[kblocks=2+2]", "hopper/serial[kblocks=1+3]", 4, "fma.rn.f32"),
    ("chains", "hopper/serial[chains=0&1|2&3]", "hopper/serial[chains=0&2|1&3]", 4,
     "fma.rn.f32"),
    ("seeds", "hopper/serial[chains=0|1|2&3,combine=0+1+2]",
     "hopper/serial[chains=0|1|2&3,seeds=2<0+1,combine=2]", 4, "fma.rn.f32"),
    ("wide", "hopper/serial[chains=0&1|2|3]", "hopper/serial[chains=0&1|2|3,wide=2]", 4,
     "fma.rn.f32"),
    ("alpha", "hopper/serial", "hopper/serial[alpha=0.5]", 32, FP8),
    ("beta", "hopper/serial[c_join=epilogue]", "hopper/serial[c_join=epilogue,beta=2.0]", 32, FP8),
    ("epilogue", "hopper/serial[c_join=epilogue,alpha=0.3]",
     "hopper/serial[c_join=epilogue,alpha=0.3,epilogue=mul-add]", 32, FP8),
    ("alpha_on", "hopper/serial[alpha=0.7]", "hopper/serial[alpha=0.7,alpha_on=a]", 2,
     "fma.rn.f32"),
    ("out", "hopper/serial", "hopper/serial[out=bf16]", 32, FP8),
    ("saturate", "hopper/serial[out=e4m3]", "hopper/serial[out=e4m3,saturate=false]", 32, FP8),
    ("c_join", "hopper/serial", "hopper/serial[c_join=epilogue]", 32, FP16),
    ("warp", LANES, LANES[:-1] + ",warp=2]", 4, "fma.rn.f32"),
    ("reduce_fmt", "hopper/serial[split_k=2,split_tile=32,out=bf16]",
     "hopper/serial[split_k=2,split_tile=32,out=bf16,reduce_fmt=out]", 64, FP8),
    ("round_partials", "hopper/serial[split_k=2,split_tile=32,out=bf16]",
     "hopper/serial[split_k=2,split_tile=32,out=bf16,round_partials=all]", 64, FP8),
    ("operand_round", "hopper/serial", "hopper/serial[operand_round=rna]", 8,
     "wgmma.m64n8k8.f32.tf32.tf32"),
    ("residue_tile", "hopper/serial", "hopper/serial[residue_tile=32]", 40, FP16),
    ("split_range", "hopper/serial[split_k=2,split_tile=8]",
     "hopper/serial[split_k=2,split_range=4]", 20, "wgmma.m64n8k8.f32.tf32.tf32"),
]  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize(
    ("field", "x", "y", "K", "instr"), FIELD_PAIRS, ids=[p[0] for p in FIELD_PAIRS]
)
def test_every_schedule_field_changes_some_output(field, x, y, K, instr):
    witness_for(x, y, K, instr)


def test_every_schedule_field_has_a_witness_test():
    from tensorcore_smt.gemm.schedule import STREAM_K_FIELDS, field_names

    # stream-K plans depend on the output tile: the solvers refuse them in one line
    # (tests/test_gemm_stream_k.py), the emulator's witness is tested there
    covered = {p[0] for p in FIELD_PAIRS} | {"promote", "split_k"} | set(STREAM_K_FIELDS)
    assert covered == set(field_names())


def test_prove_exit_codes_equal_refuted_unknown():
    # one k-block: both k-orders are the same plan, so the same term (no solver needed)
    r = run("prove", "hopper/serial", "hopper/serial[order=descending]", "--k", "32",
            "--instr", FP8, "--json")  # fmt: skip
    assert r.exit_code == ExitCode.OK, r.output
    assert json.loads(r.output)["by_construction"]
    r = run(
        "prove", "hopper/serial", "hopper/serial[promote=32]", "--k", "64",
        "--instr", FP8, "--solver", "bitwuzla",
    )  # fmt: skip
    assert r.exit_code == ExitCode.REFUTED, r.output
    assert "re-checked on the concrete model and on the emulator" in r.output
    # fp32 addition is commutative, but no solver proves it through two k-blocks in 1 s
    r = run(
        "prove", "hopper/serial[split_k=2,split_tile=16]",
        "hopper/serial[split_k=2,split_tile=16,reduce=pairwise]", "--k", "32",
        "--solver", "bitwuzla", "--timeout", "1",
    )  # fmt: skip
    assert r.exit_code == ExitCode.INCOMPLETE, r.output


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("diff", "hopper/serial", "hopper"), "compare two GEMM hypotheses"),
        (("diff", "hopper", "hopper[F=24]", "--k", "64"), "--k, --zero-k and --dtype apply"),
        (("diff", "hopper/nosuch", "hopper/serial"), "unknown schedule"),
        (("diff", "hopper/serial[promote=100]", "hopper/serial"), "promote=100"),
        (("diff", "hopper/serial[split_k=9]", "hopper/serial", "--k", "128"), "split_k=9"),
        (("diff", "hopper/serial", "hopper/serial[alpha=2]", "--zero-k", "5:3"), "--zero-k"),
        (("prove", "hopper/serial", "hopper/serial[promote=16]", "--fix", "a999=0x0"), "a999"),
    ],
)
def test_bad_gemm_input_is_one_line_and_exit_2(args, needle):
    r = run(*args)
    assert r.exit_code == ExitCode.USAGE, r.output
    assert needle in r.output and "Traceback" not in r.output


def test_gemm_vector_file_errors_name_the_field(tmp_path):
    o = witness_for("hopper/serial", "hopper/serial[promote=32]", 64, FP8)
    from tensorcore_smt.cli.gemm_solve import save_gemm_witness

    path = tmp_path / "v.json"
    assert save_gemm_witness(o, str(path))
    obj = json.loads(path.read_text())
    assert obj["schema"] == gv.SCHEMA and obj["formats"]["a"] == "e4m3"
    bad = dict(obj, vectors=[dict(obj["vectors"][0], a=obj["vectors"][0]["a"][:3])])
    with pytest.raises(UserError, match=r"vectors\[0\]\.a: expected 64"):
        gv.from_json(bad)
    bad = dict(obj, hypotheses=["hopper/serial", "hopper/nosuch"])
    with pytest.raises(UserError, match=r"hypotheses\[1\]"):
        gv.from_json(bad)
    bad = dict(obj, schema_version=99)
    with pytest.raises(UserError, match="newer"):
        gv.from_json(bad)


def test_export_gemm_query_whole_and_focused(tmp_path):
    whole, foc = tmp_path / "whole.smt2", tmp_path / "focused.smt2"
    args = ["export", "hopper/fast-accum", "hopper/cublas-fp8", "--k", "256", "--instr", FP8]
    assert run(*args, "--out", str(whole)).exit_code == ExitCode.OK
    assert run(*args, "--focused", "--out", str(foc)).exit_code == ExitCode.OK
    w, f = whole.read_text(), foc.read_text()
    assert "hypothesis X (out0): hopper/fast-accum" in w and "(check-sat)" in w
    assert "constraints: none" in w and "--zero-k 2:96" in f
    assert len(f) < len(w)  # the +0 blocks fold away
