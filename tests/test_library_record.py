"""The library recorder (hardware/library_*.py, `tcsmt profile record`) end to end on
torch's CPU kernels: a small plan recorded into a folder, read back, its inputs
regenerated bit for bit from the seeds and its outputs matched by a fresh run; the
manifest; a Ctrl-C or a time budget leaves every finished call readable."""

from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import pytest
from click.testing import CliRunner

torch = pytest.importorskip("torch")

from tensorcore_smt.cli import main  # noqa: E402
from tensorcore_smt.formats import Format  # noqa: E402
from tensorcore_smt.hardware import library_inputs as li  # noqa: E402
from tensorcore_smt.hardware.cublaslt import heuristic  # noqa: E402
from tensorcore_smt.hardware.library_calls import CallClass, Op, Precision, classes  # noqa: E402
from tensorcore_smt.hardware.library_plan import (  # noqa: E402
    UNALIGNED,
    Keep,
    Part,
    Plan,
    Probe,
    batch_ms,
    default_plan,
    estimate_seconds,
)
from tensorcore_smt.hardware.library_read import load  # noqa: E402
from tensorcore_smt.hardware.library_record import Oracle, Status, record  # noqa: E402
from tensorcore_smt.intake import from_torch  # noqa: E402

EVERY = classes(tuple(Op), tuple(Precision))


def small_plan() -> Plan:
    """Every class once at 3 x 16 x 32 (three kinds spread over them), a batch series."""
    kinds = tuple(li.Kind)
    probes = [Probe(c, 3, 16, 32, kinds[i % 3], 10 + i % 3) for i, c in enumerate(EVERY)]
    bf = CallClass(Op.MATMUL, Precision.BF16, True)
    batch = [Probe(bf, m, 16, 48, li.Kind.NORMAL, 7, False, Keep(2, 4)) for m in (1, 2, 5)]
    hold = [Probe(EVERY[0], 4, 4, 9, li.Kind.WIDE, 99, True)]
    parts = [Part("main", "every class", probes), Part("batch", "row 0", batch)]
    return Plan(parts + [Part("holdout", "held out", hold)], 0)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    out = tmp_path_factory.mktemp("rec") / "r"
    manifest = record(small_plan(), "small", out, Oracle.CPU, log=lambda s: None)
    return out, manifest


def test_mix_is_the_same_on_numpy_and_torch():
    i = np.arange(0, 20000, 7, dtype=np.int64)[:, None]
    j = np.arange(0, 16385, 513, dtype=np.int64)[None, :]
    want = li.mix(i, j, 67)
    got = li.mix(torch.from_numpy(i), torch.from_numpy(j), 67).numpy()
    assert np.array_equal(want, got)
    assert want.min() >= 0 and want.max() < li.POOL
    # uniform over the pool: the share of indices never drawn is Poisson's exp(-mean)
    counts = np.bincount(want.ravel(), minlength=li.POOL)
    assert abs((counts == 0).mean() - np.exp(-want.size / li.POOL)) < 0.01


def test_kinds_draw_what_they_say():
    wide = li.pool(li.Kind.WIDE, Format.BF16, 3, li.Operand.A).view(ml_dtypes.bfloat16)
    e = np.frexp(wide.astype(np.float64))[1]
    assert e.max() - e.min() >= 55  # exponents over 2^-40 .. 2^21
    cancel = li.pool(li.Kind.CANCEL, Format.FP16, 3, li.Operand.A).view(np.float16)
    big = np.abs(cancel.astype(np.float64)) == 8.0
    assert 0.1 < big.mean() < 0.15 and (cancel[big] < 0).any() and (cancel[big] > 0).any()
    normal = li.pool(li.Kind.NORMAL, Format.FP32, 3, li.Operand.A).view(np.float32)
    assert abs(normal.std() - 1) < 0.02
    # seeds and operands give other pools
    assert not np.array_equal(
        li.pool(li.Kind.NORMAL, Format.FP32, 3, li.Operand.B),
        li.pool(li.Kind.NORMAL, Format.FP32, 4, li.Operand.B),
    )


def test_a_block_is_the_device_operand_restricted():
    for fmt in (Format.FP16, Format.BF16, Format.FP32, Format.E4M3):
        whole = from_torch(li.device_operand(li.Kind.WIDE, fmt, 5, li.Operand.B, (40, 9), 2, "cpu"))
        rows, cols = np.array([0, 3, 39]), np.array([8, 1])
        for b in range(2):
            part = li.block(li.Kind.WIDE, fmt, 5, li.Operand.B, rows, cols, b)
            assert np.array_equal(whole[b][np.ix_(rows, cols)].view(np.uint8), part.view(np.uint8))


def test_record_reload_regenerate_rerun(recorded):
    out, manifest = recorded
    rec = load(out)
    assert len(rec.calls) == small_plan().calls
    assert {c.cls for c in rec.part("main")} == set(EVERY)
    assert all(c.error is None and c.d is not None for c in rec.calls)
    for c in rec.calls:
        # inputs regenerated from the seed are those the call ran on
        a, b, _ = c.operands(c.batch - 1)
        full = c.rerun()
        assert np.array_equal(full[0], c.d), c.cls.name
        assert full[1] == c.checksum, c.cls.name
        assert a.shape == (len(c.rows), c.k) and b.shape == (c.k, len(c.cols))
        assert 0 in c.rows.tolist()
    assert [c.holdout for c in rec.holdout()] == [True]


def test_a_recorded_output_is_the_product_of_the_regenerated_rows(recorded):
    """Independent of torch: bf16 inputs with K = 1 have an exact product; the kept
    output is that product rounded to bf16 (ml_dtypes)."""
    out, _ = recorded
    plan = Plan(
        [
            Part(
                "k1",
                "K = 1",
                [Probe(CallClass(Op.MATMUL, Precision.BF16, True), 5, 7, 1, li.Kind.WIDE, 3)],
            )
        ],
        0,
    )
    rec_dir = out.parent / "k1"
    record(plan, "k1", rec_dir, Oracle.CPU, log=lambda s: None)
    (c,) = load(rec_dir).calls
    a, b, _ = c.operands()
    want = (
        (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32).astype(ml_dtypes.bfloat16)
    )
    assert np.array_equal(c.d[0], want.view(np.uint16))
    assert np.array_equal(c.model("hopper"), c.d)


def test_manifest(recorded):
    out, manifest = recorded
    m = json.loads((out / "manifest.json").read_text())
    assert m == manifest
    env = m["environment"]
    assert env["torch"] == torch.__version__ and env["oracle"] == "torch:cpu"
    assert {"cuda", "cublas", "device", "numpy"} <= set(env)
    assert m["generator"]["pool"] == li.POOL and m["plan"]["calls"] == small_plan().calls
    assert m["status"] == "done"
    assert [(p["name"], p["status"], p["recorded"]) for p in m["parts"]] == [
        ("main", "done", len(EVERY)),
        ("batch", "done", 3),
        ("holdout", "done", 1),
    ]


def test_interrupt_keeps_what_was_written(tmp_path):
    def stop(i):
        if i == 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        record(
            small_plan(), "small", tmp_path / "r", Oracle.CPU, log=lambda s: None, after_call=stop
        )
    m = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert m["status"] == "interrupted"
    assert [p["status"] for p in m["parts"]] == ["interrupted"] * 3
    with open(tmp_path / "r" / "main.jsonl", "a") as f:
        f.write('{"class": "matmul.fp32", "m": 3')  # a line cut short by a crash
    rec = load(tmp_path / "r")
    assert len(rec.calls) == 5
    for c in rec.calls:
        assert np.array_equal(c.rerun()[0], c.d)


def test_budget_stops_and_says_so(tmp_path):
    m = record(small_plan(), "small", tmp_path / "r", Oracle.CPU, budget_s=1e-9, log=lambda s: None)
    assert m["status"] == Status.BUDGET.value
    assert {p["status"] for p in m["parts"]} == {"budget"}
    assert load(tmp_path / "r").calls == []


def test_an_existing_recording_is_not_overwritten(recorded):
    out, _ = recorded
    r = CliRunner().invoke(main, ["profile", "record", "--oracle", "torch:cpu", "--out", str(out)])
    assert r.exit_code == 2 and "already holds a recording" in r.output


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_oracle_without_cuda_is_one_line():
    r = CliRunner().invoke(main, ["profile", "record", "--oracle", "torch:cuda", "--out", "x"])
    assert r.exit_code == 2
    assert r.output.strip().splitlines() == [
        "tcsmt: error: --oracle torch:cuda: torch sees no CUDA device on this machine"
    ]


def test_cli_records_the_tiny_plan(tmp_path):
    r = CliRunner().invoke(
        main,
        [
            "profile",
            "record",
            "--oracle",
            "torch:cpu",
            "--plan",
            "tiny",
            "--out",
            str(tmp_path / "t"),
        ],
    )
    assert r.exit_code == 0, r.output
    assert "estimated GPU time" in r.output and "status done" in r.output
    rec = load(tmp_path / "t")
    assert rec.manifest["plan"]["name"] == "tiny" and rec.calls


def test_the_default_plan():
    plan = default_plan()
    parts = {p.name: p.probes for p in plan.parts}
    assert set(parts) == {"grid", "llm", "unaligned", "ops", "batch", "holdout"}
    assert estimate_seconds(plan) < 8 * 60
    assert all(p.holdout for p in parts["holdout"]) and len(parts["holdout"]) == 400
    assert not any(p.holdout for name, ps in parts.items() if name != "holdout" for p in ps)
    assert {p.cls for p in parts["ops"]} == set(EVERY)
    assert set(UNALIGNED) <= {(p.m, p.n, p.k) for p in parts["unaligned"]}
    grid = {(p.m, p.n, p.k) for p in parts["grid"]}
    assert {(1, 1024, 1024), (16384, 1024, 1024), (1024, 1024, 16384)} <= grid
    llm = {(p.n, p.k) for p in parts["llm"]}
    assert {(14336, 16384), (4096, 11008), (11008, 4096)} <= llm
    ms = batch_ms()
    assert ms[:64] == list(range(1, 65)) and {127, 128, 129, 255, 256, 4096} <= set(ms)
    assert all(p.cls.applies(p.m, p.n, p.k) for ps in parts.values() for p in ps)


def test_cublaslt_fields_are_omitted_where_the_query_fails():
    fields, why = heuristic(CallClass(Op.MATMUL, Precision.BF16, True), 16, 16, 16)
    if fields is None:
        assert why
    else:  # a machine with libcublasLt and a GPU
        assert {"algo_id", "splitk_num", "reduction_scheme", "stages_id"} <= set(fields)


def test_a_call_leaves_torchs_flags_as_it_found_them():
    """run() sets the class's matmul flags for the call only: the caller's TF32 and
    reduced-precision settings are back afterwards (a later call in the same process
    would otherwise run under the recorder's flags)."""
    torch = pytest.importorskip("torch")
    from tensorcore_smt.hardware.library_calls import CallClass, Op, Precision, run

    m = torch.backends.cuda.matmul
    before = (torch.get_float32_matmul_precision(), m.allow_fp16_reduced_precision_reduction)
    a = torch.ones((1, 2, 3), dtype=torch.float16)
    b = torch.ones((1, 3, 2), dtype=torch.float16)
    assert run(CallClass(Op.MATMUL, Precision.FP16, False), a, b).shape == (1, 2, 2)
    run(CallClass(Op.MATMUL, Precision.TF32), a.float(), b.float())
    after = (torch.get_float32_matmul_precision(), m.allow_fp16_reduced_precision_reduction)
    assert after == before


def test_heuristic_query_describes_the_call():
    """The cuBLASLt query's descriptor settings per class (cublasLt.h values): cuBLAS's
    operand ops, FAST_ACCUM only for FP8 with fast accumulation, the BIAS epilogue only
    for F.linear with a bias (its kernels and split counts are not F.linear's)."""
    from tensorcore_smt.hardware.cublaslt import desc_settings

    def settings(name: str) -> dict[str, int]:
        cls = next(c for c in classes(tuple(Op), tuple(Precision)) if c.name == name)
        return {what: v.value for _, v, what in desc_settings(cls)}

    assert settings("linear-bias.bf16.rr1") == {"TRANSA": 1, "TRANSB": 0, "EPILOGUE": 4}
    assert settings("linear.bf16.rr1") == {"TRANSA": 1, "TRANSB": 0}
    assert settings("matmul.fp32") == {"TRANSA": 0, "TRANSB": 0}
    assert settings("matmul-at.fp16.rr0") == {"TRANSA": 0, "TRANSB": 1}
    assert settings("scaled-mm-fast.e4m3") == {"TRANSA": 1, "TRANSB": 0, "FAST_ACCUM": 1}


def test_sweep_asks_deep_k_and_the_bias_classes():
    """The heuristic sweep's fixed plan: the LLM batch series first, then random shapes
    alternating with deep-K ones (K >= DEEP_K), the same every run; F.linear with a bias
    swept in four precisions; the random shapes those of the first sweep."""
    from tensorcore_smt.hardware import cublaslt_sweep as sw

    names = [c.name for c in sw.sweep_classes()]
    assert {"linear-bias.fp16.rr1", "linear-bias.bf16.rr0", "linear-bias.tf32"} <= set(names)
    cls = next(c for c in sw.sweep_classes() if c.name == "matmul.bf16.rr1")
    shapes = sw.sweep_shapes(cls)
    assert shapes == sw.sweep_shapes(cls)
    llm = len([s for s in shapes[:2000] if s[1] in sw.LLM_N and s[2] in sw.LLM_K])
    rest = shapes[llm:]
    deep, other = rest[1::2], rest[0::2]
    assert len(deep) == sw.DEEP_SHAPES and all(sw.DEEP_K - 1 <= k <= 16384 for _, _, k in deep)
    assert len(other) == sw.RANDOM_SHAPES and min(k for _, _, k in other) == 1
    assert sum(k > 512 for _, _, k in other) < 0.4 * len(other)


def test_sweep_workers_share_the_queue_and_files_merge(tmp_path):
    """Workers w of W ask items w, w + W, ... of the fixed queue: together every (class,
    shape) once; the spawned pool merges its part files; a folder's sweep files read as
    one answer per (class, shape), a later seed's in place of an earlier one."""
    import gzip
    import json

    from tensorcore_smt.hardware import cublaslt_sweep as sw
    from tensorcore_smt.hardware import sweep_store as st

    want = [(c.name, *s) for c, s in sw.queue(seed=1)]
    got = []
    for w in range(3):
        part = tmp_path / f"p{w}.jsonl"
        assert sw.work(str(part), 1, 1, 1e9, w, 3, True) == len(want[w::3])
        got += [tuple(json.loads(x)[f] for f in ("class", "m", "n", "k")) for x in part.open()]
    assert sorted(got) == sorted(want) and len(want) > 400_000
    assert sw.sweep(str(tmp_path / "none.jsonl"), 0.0, 1, 1, workers=2, dry=True) == 0
    assert (tmp_path / "none.jsonl").read_text() == "" and not list(tmp_path.glob("*.part*"))
    assert sw.main([str(tmp_path / "x.jsonl"), "--workers", "0"]) == 2

    def write(name: str, rows: list[dict]) -> None:
        with gzip.open(tmp_path / name, "wt") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)

    row = {"class": "matmul.bf16.rr1", "m": 2, "n": 3, "k": 5}

    def f(v: int) -> list:
        return [v] * (len(sw.FIELD_ORDER) - 1) + [0.5]

    write("cublaslt.jsonl.gz", [{**row, "f": f(1)}, {**row, "m": 7, "f": f(2)}])
    write("cublaslt-seed10.jsonl.gz", [{**row, "f": f(10)}])
    write("cublaslt-seed2.jsonl.gz", [{**row, "f": f(3)}, {**row, "k": 9, "f": f(4)}])
    names = [p.name for p in st.sweep_paths(tmp_path)]
    assert names == ["cublaslt.jsonl.gz", "cublaslt-seed2.jsonl.gz", "cublaslt-seed10.jsonl.gz"]
    recs = st.sweep_records(tmp_path)
    assert [(r["m"], r["k"], r["f"]) for r in recs] == [(2, 5, f(10)), (7, 5, f(2)), (2, 9, f(4))]
