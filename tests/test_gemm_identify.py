"""`tcsmt identify --gemm`: hidden GEMM schedules recovered from variant: oracles with the
loop of identify (pool rows, climbs, solver questions between survivors), bad oracles as
one line and exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tensorcore_smt.cli import main
from tensorcore_smt.errors import ExitCode
from tensorcore_smt.identify.gemm import load_gemm_space, make_gemm_oracle, recovered_gemm
from tensorcore_smt.identify.loop import Identifier
from tensorcore_smt.smt.solve import Limits

FP8 = "wgmma.m64n8k32.f32.e4m3.e4m3"
SMALL = Path(__file__).parent / "data" / "gemm-schedules-only.toml"


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def identify(hidden: str, arch: str = "hopper", K: int = 128, space: Path | None = SMALL):
    sp = load_gemm_space(arch, K, FP8, space)
    res = Identifier(
        sp, make_gemm_oracle(f"variant:{hidden}", sp), 200,
        Limits(solver="bitwuzla", timeout=5.0), max_questions=4,
    ).run()  # fmt: skip
    return sp, res


def test_identify_gemm_recovers_a_hidden_promotion_interval():
    r = run(
        "identify", "--gemm", "--arch", "hopper", "--instr", FP8, "--k", "128",
        "--space", str(SMALL), "--oracle", "variant:hopper/serial[promote=64]",
        "--solver", "bitwuzla", "--timeout", "5", "--json",
    )  # fmt: skip
    assert r.exit_code == ExitCode.OK, r.output
    doc = json.loads(r.output)
    classes = {s["class"] for s in doc["survivors"]}
    assert classes == {0}
    first = doc["survivors"][0]
    assert first["variant"] == "hopper/serial[promote=64]"
    assert first["params"]["schedule.promote"] == "64"


@pytest.mark.slow
def test_identify_gemm_recovers_a_hidden_split_k():
    hidden = "hopper/serial[split_k=2,split_tile=32]"
    sp, res = identify(hidden)
    assert recovered_gemm(sp, res, hidden), [[h.expr(sp.arch) for h in c] for c in res.classes]


SLOW_HIDDEN = [
    ("split", "hopper/serial[split_k=3,split_tile=32,split=interleaved]", "hopper", 128),
    # three contiguous splits need at least 3 k-tiles that leave none empty: K = 96
    ("reduce", "hopper/serial[split_k=3,split_tile=32,reduce=pairwise]", "hopper", 96),
    ("c_join", "hopper/serial[c_join=epilogue]", "hopper", 128),
    ("epilogue", "hopper/serial[alpha=0.3,epilogue=mul-add]", "hopper/serial[alpha=0.3]", 128),
]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("field", "hidden", "arch", "K"), SLOW_HIDDEN, ids=[h[0] for h in SLOW_HIDDEN]
)
def test_identify_gemm_recovers_hidden_schedule_fields(field, hidden, arch, K):
    sp, res = identify(hidden, arch=arch, K=K)
    assert recovered_gemm(sp, res, hidden), [[h.expr(sp.arch) for h in c] for c in res.classes]


@pytest.mark.slow
def test_identify_gemm_default_space_learns_the_schedule_among_instruction_variants():
    # the instruction's parameters are searched too (spaces/fda.toml around the preset)
    hidden = "hopper/serial[promote=128]"
    sp, res = identify(hidden, K=256, space=None)
    assert recovered_gemm(sp, res, hidden), [[h.expr(sp.arch) for h in c] for c in res.classes]


SPLIT2 = "hopper/serial[split_k=2,split=contiguous,promote=128]"


def _established(doc: dict) -> None:
    st = doc["standing"]
    assert st["established"] and st["classes"] == 1, doc["stopped"]
    assert st["undecided"] == st["never_asked"] == 0
    # proved by solvers or by construction, or equal by a stated argument (its rows
    # checked on the model), each member said which
    assert st["proved_equal"] + st["argued_equal"] == st["members"] - 1
    assert doc["stopped"].startswith("one class left")
    kinds = [s["standing"] for s in doc["survivors"][1:]]
    assert set(kinds) <= {"proved equal", "equal by a stated argument"}
    assert kinds.count("equal by a stated argument") == st["argued_equal"]


@pytest.mark.slow  # about 16 s
def test_identify_gemm_split_k_2_promote_128_ends_proved():
    """K = 256: two splits of one promoted 128-long chain each compute what one split
    promoted every 128 computes (gemm.plan.equivalent_plan), so the space holds them as
    one point; every survivor is proved equal to it and the exit is 0."""
    r = run(
        "identify", "--gemm", "--arch", "hopper", "--instr", FP8, "--k", "256",
        "--space", str(SMALL), "--oracle", f"variant:{SPLIT2}",
        "--solver", "bitwuzla", "--timeout", "5", "--json",
    )  # fmt: skip
    assert r.exit_code == ExitCode.OK, r.output
    doc = json.loads(r.output)
    _established(doc)
    assert doc["survivors"][0]["params"]["schedule.promote"] == "128"
    sp = load_gemm_space("hopper", 256, FP8, SMALL)
    from tensorcore_smt.gemm.model import resolve_model, run_rows
    from tensorcore_smt.identify.pool import make_pool

    pool = make_pool(sp.base, 4096, 3)
    want = run_rows(resolve_model(SPLIT2, 256, FP8), pool.a, pool.b, pool.c)
    for s in doc["survivors"]:
        got = run_rows(resolve_model(s["variant"], 256, FP8), pool.a, pool.b, pool.c)
        assert (got == want).all(), s["variant"]


def test_gemm_space_holds_schedules_with_one_plan_once():
    sp = load_gemm_space("hopper", 512, FP8, None)
    fam = sp.families[0].name
    # K = 512 in four 128-wide tiles: split_tile 64 cuts the same two halves
    a = sp.make(fam, {"schedule.split_k": 2, "schedule.promote": 128})
    b = sp.make(fam, {"schedule.split_k": 2, "schedule.promote": 128, "schedule.split_tile": 64})
    assert a == b
    # split_k = 3 leaves a contiguous split empty at this K: no model
    c = sp.make(fam, {"schedule.split_k": 3})
    with pytest.raises(Exception, match="without a k-tile"):
        sp.model(c)
    assert sp.same_model(a, b) and not sp.same_model(a, sp.make(fam, {"schedule.promote": 128}))


@pytest.mark.slow
def test_identify_gemm_default_space_split_k_2_promote_128_is_honest():
    """The default space (instruction parameters too), K = 256, about 7 minutes: the
    schedule is settled (every survivor promotes every 128, split-K merged with it), while
    instruction parameters such as carry_bits and e_zero stay undecided at 5 s (20 s
    asked again) a question; the stop line says so and the exit is 3, not 0."""
    r = run(
        "identify", "--gemm", "--arch", "hopper", "--instr", FP8, "--k", "256",
        "--oracle", f"variant:{SPLIT2}", "--solver", "bitwuzla", "--timeout", "5", "--json",
    )  # fmt: skip
    doc = json.loads(r.output)
    st = doc["standing"]
    assert all(s["params"]["schedule.promote"] == "128" for s in doc["survivors"])
    assert all(s["params"]["schedule.split_k"] == "1" for s in doc["survivors"])
    if st["established"]:
        assert r.exit_code == ExitCode.OK, r.output
        _established(doc)
    else:
        assert r.exit_code == ExitCode.INCOMPLETE, r.output
        assert not doc["stopped"].startswith("one class left")
        assert st["undecided"] + st["never_asked"] > 0


@pytest.mark.parametrize(
    ("oracle", "needle"),
    [
        ("variant:hopper/nosuch", "unknown schedule"),
        ("banana", "unknown GEMM oracle"),
        ("variant:hopper/serial[out=bf16]", "other operands"),
        ("torch:slow", "torch or torch:fast"),
    ],
)
def test_identify_gemm_bad_input_is_one_line_and_exit_2(oracle, needle):
    r = run("identify", "--gemm", "--arch", "hopper", "--instr", FP8, "--k", "64",
            "--oracle", oracle)  # fmt: skip
    assert r.exit_code == ExitCode.USAGE, r.output
    assert needle in r.output and "Traceback" not in r.output


def test_identify_gemm_torch_oracle_without_a_gpu_is_one_line_and_exit_2():
    r = run("identify", "--gemm", "--arch", "hopper", "--instr", FP8, "--k", "64",
            "--oracle", "torch")  # fmt: skip
    assert r.exit_code == ExitCode.USAGE, r.output
    assert "torch" in r.output and len(r.output.strip().splitlines()) == 1


def test_k_without_gemm_is_exit_2():
    r = run("identify", "--arch", "hopper", "--k", "64", "--oracle", "variant:hopper")
    assert r.exit_code == ExitCode.USAGE and "--gemm" in r.output


@pytest.mark.slow
def test_identify_gemm_with_a_cmd_oracle_in_the_documented_format():
    import shlex
    import sys

    prog = Path(__file__).parent / "data" / "gemm_cmd_oracle.py"
    hidden = "hopper/serial[promote=64]"
    cmd = shlex.join([sys.executable, str(prog), hidden, FP8])
    r = run(
        "identify", "--gemm", "--arch", "hopper", "--instr", FP8, "--k", "128",
        "--space", str(SMALL), "--oracle", f"cmd:{cmd}", "--solver", "bitwuzla",
        "--timeout", "5", "--json",
    )  # fmt: skip
    assert r.exit_code == ExitCode.OK, r.output
    assert json.loads(r.output)["survivors"][0]["variant"] == hidden


# A witness bitwuzla gave for hopper/serial[promote=128] vs hopper[unpack=fp16]/serial[...]
# at K = 256 (nonzero inputs; the rest +0). Its two outputs differ on the element code; the
# emulator (tc.matmul) must run the same two hypotheses, else the re-check calls a true
# witness bad.
UNPACK_WITNESS = {
    "a95": 0x5, "a125": 0x83, "a126": 0x95, "a127": 0x82, "a223": 0xC9, "a252": 0x83,
    "a255": 0x2, "b122": 0x3, "b123": 0x5, "b124": 0x1, "b126": 0x37, "b127": 0x79,
    "b255": 0x9, "c": 0x80BA6AB1,
}  # fmt: skip


def test_gemm_space_query_runs_each_hypothesis_on_both_paths():
    """The solver question between two members of a GEMM space names, for the emulator,
    each member's own instruction model (not the space's base): the witness re-runs alike
    on the element code and through tc.matmul, and both outputs differ."""
    from tensorcore_smt.formats import Format
    from tensorcore_smt.smt.query import recheck

    sp = load_gemm_space("hopper", 256, FP8)
    fam = sp.families[0].name
    a = sp.make(fam, {"schedule.promote": 128})
    b = sp.make(fam, {"schedule.promote": 128, "unpack": Format.FP16})
    q = sp.query(a, b)
    assert [m.variant for m in q.models] == ["hopper", "hopper[unpack=fp16]"]
    w = recheck(q, UNPACK_WITNESS)
    assert w.outputs[0] != w.outputs[1]
    assert tuple(w.emulated) == w.outputs and w.reproduces


def test_gemm_space_over_a_variant_keeps_its_overrides():
    """A space built on `ARCH[...]` writes its members over that variant: a member's
    expression, the model the solvers get and the emulator's variant all keep the base's
    overrides unless the member sets the same parameter."""
    sp = load_gemm_space("hopper[carry_bits=6]/serial[promote=128]", 256, FP8)
    fam = sp.families[0].name
    h = sp.make(fam, {"e_zero": None})
    m = sp.model(h)
    assert sp.expr(h) == "hopper[carry_bits=6,e_zero=none]/serial[promote=128]"
    assert m.variant == "hopper[carry_bits=6,e_zero=none]"
    assert m.p.carry_bits == 6 and m.p.e_zero is None
    h5 = sp.make(fam, {"carry_bits": 5})
    assert sp.model(h5).variant == "hopper[carry_bits=5]" and sp.model(h5).p.carry_bits == 5


def test_library_oracle_answers_rows_as_the_library_at_output_0_0():
    """numpy:matmul answers each row with numpy's own bits at output (0, 0) of one call;
    it takes fp32 operands and a base that reads no C (beta=0), else one line."""
    import numpy as np

    from tensorcore_smt.errors import UserError
    from tensorcore_smt.formats import Format

    sp = load_gemm_space("x86-fma/serial[beta=0]", 32, None, None, Format.FP32)
    orc = make_gemm_oracle("numpy:matmul", sp)
    rng = np.random.default_rng(2)
    a = rng.standard_normal((5, 32)).astype(np.float32)
    b = rng.standard_normal((5, 32)).astype(np.float32)
    d = orc.ask(a.view(np.uint32).astype(np.uint64), b.view(np.uint32).astype(np.uint64),
                np.zeros(5, np.uint64))  # fmt: skip
    A = np.zeros((32, 32), np.float32)
    B = np.zeros((32, 32), np.float32)
    for i in range(5):
        A[0], B[:, 0] = a[i], b[i]
        assert int(d[i]) == int(np.matmul(A, B)[0, 0].view(np.uint32))
    with pytest.raises(UserError, match="beta=0"):
        make_gemm_oracle("numpy:matmul", load_gemm_space("x86-fma", 32, None, None, Format.FP32))
    with pytest.raises(UserError, match="fp32"):
        make_gemm_oracle("numpy:matmul", load_gemm_space("hopper/serial[beta=0]", 32, FP8, None))


@pytest.mark.slow
def test_identify_gemm_on_torch_cpu_ends_honestly():
    """identify --gemm against torch's CPU matmul (K = 32) ends with one class whose
    members are all proved equal, or exit 3 naming what is undecided: never a class
    claimed that the proofs do not back (the library may change, so no fixed answer)."""
    pytest.importorskip("torch")
    r = run(
        "identify", "--gemm", "--arch", "x86-fma/serial[beta=0]", "--k", "32", "--dtype",
        "fp32", "--oracle", "torch:cpu", "--solver", "bitwuzla", "--json",
    )  # fmt: skip
    data = json.loads(r.output)
    if r.exit_code == ExitCode.OK:
        assert data["classes"] == 1 and data["standing"]["established"] is True
        assert data["standing"]["undecided"] == 0 and data["standing"]["never_asked"] == 0
    else:
        assert r.exit_code == ExitCode.INCOMPLETE, r.output
        assert data["standing"]["undecided"] + data["standing"]["never_asked"] > 0
