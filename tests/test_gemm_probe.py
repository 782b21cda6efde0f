"""GEMM probes and GEMM properties: the torch program written for a GEMM vector file
compiles, `probe --check` of an output made from the emulator's predictions picks the
hypothesis each call followed, and `tcsmt find` answers the GEMM properties."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tensorcore_smt.cli import main
from tensorcore_smt.errors import ExitCode
from tensorcore_smt.smt.library import get
from tensorcore_smt.validation import gemm_vectors as gv

FAST, PROMOTED = "hopper/fast-accum", "hopper/cublas-fp8"


def run(*args: str, input: str | None = None):
    return CliRunner().invoke(main, list(args), input=input)


@pytest.fixture(scope="module")
def promotion_file(tmp_path_factory):
    """A GEMM vector file from a solver witness between fast accumulation and promotion
    every 128 elements on Hopper's FP8 wgmma."""
    path = tmp_path_factory.mktemp("gemm") / "promotion.json"
    r = run(
        "diff", FAST, PROMOTED, "--k", "256", "--instr", "wgmma.m64n8k32.f32.e4m3.e4m3",
        "--solver", "bitwuzla", "--out", str(path),
    )  # fmt: skip
    assert r.exit_code == ExitCode.OK, r.output
    return path


@pytest.mark.slow
def test_find_promotion_on_hopper_writes_a_gemm_vector_file(tmp_path):
    path = tmp_path / "promotion.json"
    r = run("find", "--property", "promotion", "--arch", "hopper", "--solver", "bitwuzla",
            "--out", str(path))  # fmt: skip
    assert r.exit_code == ExitCode.OK, r.output
    gf = gv.load(path)
    assert gf.property == "promotion" and gf.K == 256
    assert gf.instruction == "wgmma.m64n8k32.f32.e4m3.e4m3"
    assert FAST in gf.hypotheses and PROMOTED in gf.hypotheses
    fresh = gv.predict(gf)  # every stored prediction is what the model computes now
    assert [v.predicted for v in fresh.vectors] == [v.predicted for v in gf.vectors]
    assert any(v.predicted[FAST] != v.predicted[PROMOTED] for v in gf.vectors)


def test_probe_writes_a_torch_program_that_compiles(promotion_file, tmp_path):
    prog = tmp_path / "probe.py"
    r = run("probe", str(promotion_file), "--out", str(prog))
    assert r.exit_code == ExitCode.OK, r.output
    src = prog.read_text()
    compile(src, str(prog), "exec")
    assert "torch._scaled_mm" in src and "use_fast_accum=True" in src
    assert "use_fast_accum=False" in src and "torch.float8_e4m3fn" in src


def output_from_predictions(gf: gv.GemmVectorFile, per_call: dict[str, str]) -> str:
    """What the program would print if each call followed the given hypothesis: made
    from the emulator's predictions (gemm_vectors.predict)."""
    fresh = gv.predict(gf)
    d = fresh.formats()["d"].spec.storage // 4
    lines = ["# device: emulated"]
    for call, hyp in per_call.items():
        for i, v in enumerate(fresh.vectors):
            lines.append(f"vector {i} call={call} d=0x{v.predicted[hyp]:0{d}x}")
    return "\n".join(lines) + "\n"


def test_probe_check_says_which_hypothesis_each_call_followed(promotion_file, tmp_path):
    gf = gv.load(promotion_file)
    out = tmp_path / "gemm_output.txt"
    out.write_text(
        output_from_predictions(
            gf, {"scaled_mm_fast_accum=True": FAST, "scaled_mm_fast_accum=False": PROMOTED}
        )
    )
    r = run("probe", "--check", str(promotion_file), str(out), "--json")
    assert r.exit_code == ExitCode.OK, r.output
    calls = {c["call"]: c["survivors"] for c in json.loads(r.output)["calls"]}
    assert FAST in calls["scaled_mm_fast_accum=True"]
    assert PROMOTED not in calls["scaled_mm_fast_accum=True"]
    assert calls["scaled_mm_fast_accum=False"] == [PROMOTED]
    # an output no hypothesis predicts (one bit flipped, the lowest bit whose flip gives
    # a value no hypothesis predicts for the vector): exit 1; a truncated one: exit 2
    lines = out.read_text().splitlines()
    first = lines[1].rsplit("=0x", 1)
    d = int(first[1], 16)
    predicted = set(gv.predict(gf).vectors[0].predicted.values())
    bad = next(d ^ (1 << i) for i in range(32) if d ^ (1 << i) not in predicted)
    flipped = f"{first[0]}=0x{bad:08x}"
    out.write_text("\n".join([lines[0], flipped] + lines[2:]) + "\n")
    assert run("probe", "--check", str(promotion_file), str(out)).exit_code == ExitCode.REFUTED
    # no vector lines at all, or a vector the file does not have: exit 2, one line
    out.write_text(lines[0] + "\n")
    r = run("probe", "--check", str(promotion_file), str(out))
    assert r.exit_code == ExitCode.USAGE and "did the program run" in r.output
    out.write_text("vector 7 call=x d=0x00000000\n")
    r = run("probe", "--check", str(promotion_file), str(out))
    assert r.exit_code == ExitCode.USAGE and "does not exist" in r.output


@pytest.mark.parametrize("name", ["promotion", "split-k", "k-order", "epilogue"])
def test_gemm_properties_load_and_bind_on_hopper(name):
    prop = get(name)
    assert prop.gemm is not None
    bound = prop.bind("hopper")
    assert bound and all(q.K == prop.gemm.k for _, q in bound)
    for _, q in bound:
        for c in q.constraints:  # every restriction of the question says why
            assert c.reason


def test_gemm_property_not_applicable_is_one_line_exit_2():
    r = run("find", "--property", "promotion", "--arch", "volta")
    assert r.exit_code == ExitCode.USAGE, r.output
    assert "does not apply" in r.output and "Traceback" not in r.output


@pytest.mark.slow
@pytest.mark.parametrize("name", ["split-k", "k-order", "epilogue"])
def test_find_gemm_properties_answer_as_expected(name):
    r = run("find", "--property", name, "--arch", "hopper", "--solver", "bitwuzla")
    assert r.exit_code == ExitCode.OK, r.output
