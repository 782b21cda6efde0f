"""The edges of the GEMM commands: one library instruction per input format everywhere,
output files written to exactly the path given (after the report), bad .npy inputs,
schedule texts, --k-sweep, Ctrl-C between hypotheses, plots, probes of GEMM vectors."""

from __future__ import annotations

import json
import warnings

import click
import numpy as np
import pytest
from click.testing import CliRunner

import tensorcore_smt as tc
from tensorcore_smt.cli import main
from tensorcore_smt.cli.base import memory_advice
from tensorcore_smt.errors import ExitCode, UserError

GEMM = ["gemm", "--arch", "ampere", "--engine", "numpy"]
RANDOM = ["--random", "4,4,64"]


def _run(args, **kw):
    return CliRunner().invoke(main, args, **kw)


def _one_error_line(r) -> str:
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("tcsmt: error: "), r.stderr
    return lines[0]


def test_diff_of_two_architectures_runs_each_on_its_library_instruction():
    from tensorcore_smt.smt.gemm_query import make_gemm_query

    q = make_gemm_query("hopper/serial", "volta/serial", 16)
    assert [m.instruction for m in q.models] == [
        "wgmma.m64n8k16.f32.f16.f16",
        "m8n8k4.f32.f16.f16.f32",
    ]
    r = _run(["diff", "hopper/serial", "volta/serial", "--k", "16", "--solver", "z3"])
    assert r.exit_code == 0, r.output


def test_gemm_diff_and_identify_use_the_instruction_of_gemm():
    from tensorcore_smt.formats import Format
    from tensorcore_smt.gemm.hypothesis import parse_gemm
    from tensorcore_smt.identify.gemm import load_gemm_space
    from tensorcore_smt.smt.gemm_query import make_gemm_query

    for fmt in (None, Format.E4M3):
        want = parse_gemm("hopper").instruction(fmt).name
        q = make_gemm_query("hopper/serial", "hopper/cublas-fp8", 256, fmt=fmt)
        assert q.instruction == want
        assert load_gemm_space("hopper", 256, None, fmt=fmt).instr == want
    assert want == "wgmma.m64n8k32.f32.e4m3.e4m3"


def test_identify_gemm_refuses_a_base_schedule_invalid_at_its_k():
    r = _run(["identify", "--gemm", "--arch", "ampere/serial[split_k=4]", "--k", "32",
              "--oracle", "variant:ampere/serial"])  # fmt: skip
    assert r.exit_code == ExitCode.USAGE
    assert "does not fit K=32" in _one_error_line(r)


def test_out_is_written_at_exactly_its_path_after_the_report(tmp_path):
    out = tmp_path / "d"
    r = _run(GEMM + RANDOM + ["--out", str(out)])
    assert r.exit_code == 0, r.output
    assert out.is_file() and not (tmp_path / "d.npy").exists()
    assert np.load(out).shape == (4, 4)
    assert f"wrote        {out} (D of ampere/serial)" in r.stdout


def test_a_failed_write_keeps_the_report_and_exits_2():
    r = _run(GEMM + RANDOM + ["--out", "/dev/full"])
    assert r.exit_code == ExitCode.USAGE
    assert "vs exact" in r.stdout  # the report came first
    assert "could not write D" in _one_error_line(r)


@pytest.mark.parametrize("value", ["--out", "--instr", "--plot"])
def test_empty_values_are_refused(value):
    r = _run(GEMM + RANDOM + [value, ""])
    assert r.exit_code == ExitCode.USAGE
    _one_error_line(r)


def test_plot_format_checked_before_any_work(tmp_path, monkeypatch):
    import tensorcore_smt.cli.gemm as cli_gemm

    def boom(*a, **k):
        raise AssertionError("ran before the plot path was checked")

    monkeypatch.setattr(cli_gemm, "run_measured", boom)
    r = _run(GEMM + RANDOM + ["--plot", str(tmp_path / "p.nosuchformat")])
    assert r.exit_code == ExitCode.USAGE
    assert "not an image format" in _one_error_line(r)


def test_plot_has_a_title_and_names_hidden_curves(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    import tensorcore_smt.cli.gemm_plot as gp

    seen = {}
    real = gp.draw

    def spy(path, fmt, title, runs, sweep):
        seen["title"] = title
        seen["twins"] = gp._same_as([(r[-1][1].run.hypothesis.describe(),
                                      r[-1][1].exact.ulps.ravel()) for r in runs])  # fmt: skip
        real(path, fmt, title, runs, sweep)

    monkeypatch.setattr("tensorcore_smt.cli.gemm.draw", spy)
    png = tmp_path / "errors"  # no extension: png, at exactly this path
    r = _run(GEMM + RANDOM + ["--compare", "ampere/serial", "--plot", str(png)])
    assert r.exit_code == 0, r.output
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert seen["title"].startswith("M=4 N=4 K=64, fp16 x fp16 inputs")
    assert seen["twins"] == [None, "ampere/serial"]


def _npy(tmp_path, name, x):
    p = tmp_path / name
    np.save(p, x)
    return str(p)


def test_bad_npy_inputs_are_one_line(tmp_path):
    b = _npy(tmp_path, "b.npy", np.ones((16, 4), np.float16))
    empty = tmp_path / "empty.npy"
    empty.write_bytes(b"")
    npz = tmp_path / "a.npz"
    np.savez(npz, a=np.ones(3))
    m0 = _npy(tmp_path, "m0.npy", np.ones((0, 16), np.float16))
    f32 = _npy(tmp_path, "f32.npy", np.ones((4, 16), np.float32))
    for a, extra, words in [
        (str(empty), [], "not a .npy array"),
        (str(npz), [], ".npz archive"),
        (m0, [], "M, N, K >= 1"),
        (f32, ["--dtype", "e4m3"], "--dtype reads unsigned bit patterns"),
    ]:
        r = _run(GEMM + ["--a", a, "--b", b] + extra)
        assert r.exit_code == ExitCode.USAGE, (a, r.output)
        assert words in _one_error_line(r)


def test_big_endian_arrays_are_read_by_value(tmp_path):
    a = _npy(tmp_path, "a.npy", np.full((4, 16), 2.0, ">f2"))
    b = _npy(tmp_path, "b.npy", np.ones((16, 4), ">f2"))
    out = tmp_path / "d.npy"
    r = _run(GEMM + ["--a", a, "--b", b, "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert (np.load(out) == 32.0).all()


def test_export_refuses_a_missing_folder_as_out_does(tmp_path):
    for opt in ("--export", "--out"):
        r = _run(["diff", "ampere/serial", "ampere/serial[promote=32]", "--k", "32", opt,
                  str(tmp_path / "nodir" / "q.smt2")])  # fmt: skip
        assert r.exit_code == ExitCode.USAGE
        assert "does not exist" in _one_error_line(r)
    assert not (tmp_path / "nodir").exists()


def test_diff_with_an_unwritable_out_prints_the_witness_and_exits_2():
    r = _run(["diff", "hopper/serial", "volta/serial", "--k", "16", "--solver", "z3",
              "--out", "/dev/full"])  # fmt: skip
    assert r.exit_code == ExitCode.USAGE
    assert '"tcsmt-gemm-vectors"' in r.stdout and "verdict:" in r.stdout
    assert "could not write the witness" in _one_error_line(r)


def test_duplicated_schedule_fields_are_refused():
    with pytest.raises(UserError, match="promote is given twice"):
        tc.matmul("ampere/serial[promote=32,promote=64]", np.ones((2, 64), np.float16),
                  np.ones((64, 2), np.float16))  # fmt: skip


def test_k_sweep_skips_the_k_split_k_cannot_cut():
    r = _run(GEMM + ["--random", "4,4,256", "--k-sweep", "--compare",
                     "ampere/serial[split_k=2]"])  # fmt: skip
    assert r.exit_code == 0, r.output
    assert "skipped: split_k=2: K=16" in r.stdout
    assert r.stdout.count("skipped:") == 4  # K = 16, 32, 64, 128 have one k-tile of 128


def test_ctrl_c_between_hypotheses_reports_the_finished_ones(monkeypatch):
    import tensorcore_smt.cli.gemm as cli_gemm

    real = cli_gemm.run_measured
    calls = []

    def second_interrupts(*a, **k):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(cli_gemm, "run_measured", second_interrupts)
    r = _run(GEMM + RANDOM + ["--compare", "ampere/serial[promote=32]"])
    assert r.exit_code == ExitCode.INTERRUPTED
    assert "hypothesis   ampere/serial" in r.stdout and "promote=32" not in r.stdout
    assert r.stderr.strip().splitlines()[-1].startswith("tcsmt: interrupted: 1 of 2")


def test_numpy_scalars_are_schedule_values():
    A, B = np.ones((2, 16), np.float16), np.ones((16, 2), np.float16)
    for alpha in (np.float32(0.5), np.float64(0.5)):
        assert (tc.matmul("ampere", A, B, alpha=alpha) == 8.0).all()
    assert (tc.matmul("ampere", A, B, alpha=np.int64(2)) == 32.0).all()


def test_inf_inputs_give_no_runtime_warning():
    from tensorcore_smt.gemm.measure import run_measured

    A = np.ones((2, 16), np.float16)
    A[0, 0], A[1, 0] = np.inf, -np.inf
    B = np.ones((16, 2), np.float16)
    B[0, 1] = 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run_measured("ampere", A, B, engine="numpy")


def test_out_of_memory_advice_names_the_commands_own_options():
    for cmd, has, lacks in [("gemm", "--random", "--rows"), ("validate", "--rows", "--random")]:
        ctx = click.Context(main)
        ctx.invoked_subcommand = cmd
        line = memory_advice(main, ctx)
        assert has in line and lacks not in line


def _gemm_vectors(tmp_path, vectors: bool):
    from tensorcore_smt.validation import gemm_vectors as gv

    one = gv.GemmVector(a=[0x3C00] * 16, b=[0x3C00] * 16, c=0, predicted={})
    gf = gv.GemmVectorFile("ampere", "m16n8k16.f32.f16.f16.f32", 16,
                           ["ampere/serial", "ampere/serial[order=descending]"],
                           [one] if vectors else [])  # fmt: skip
    p = tmp_path / "g.json"
    p.write_text(gv.dumps(gv.predict(gf)))
    return str(p)


def test_a_probe_of_no_gemm_vectors_is_refused(tmp_path):
    r = _run(["probe", _gemm_vectors(tmp_path, False)])
    assert r.exit_code == ExitCode.USAGE
    assert "no vectors to probe" in _one_error_line(r)


def test_a_probe_that_cannot_be_written_is_printed(tmp_path):
    r = _run(["probe", _gemm_vectors(tmp_path, True), "--out", "/dev/full"])
    assert r.exit_code == ExitCode.USAGE
    assert "import torch" in r.stdout
    assert "could not write the probe source" in _one_error_line(r)


def test_a_gemm_vector_file_is_named_as_one(tmp_path):
    r = _run(["vectors", "show", _gemm_vectors(tmp_path, True)])
    assert r.exit_code == ExitCode.USAGE
    assert "a GEMM vector file" in _one_error_line(r)
    assert json.loads(open(_gemm_vectors(tmp_path, True)).read())["schema"] == "tcsmt-gemm-vectors"
