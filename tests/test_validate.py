"""`tcsmt validate` and the Dask task runner (tensorcore_smt.validation.distributed).

One real LocalCluster of 2 worker processes serves the module (started once: a few
seconds); the CLI tests reach it with --scheduler, and one test starts its own embedded
cluster with --workers 2. The cluster allows one worker death per task, so a task that
always kills its worker comes back as a failure quickly instead of being retried 3 times.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from tensorcore_smt.cli import main
from tensorcore_smt.spec.presets import parse_variant
from tensorcore_smt.validation.distributed import TaskFailure, run_tasks, scheduler_address
from tensorcore_smt.validation.validate import (
    Job,
    Tally,
    check_chunk,
    chunk_inputs,
    random_chunks,
)

INSTR = "m16n8k16.f32.f16.f16.f32"


@pytest.fixture(scope="module")
def cluster():
    """A LocalCluster of 2 single-threaded worker processes; yields its client."""
    import cloudpickle
    import dask
    from distributed import Client, LocalCluster

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    with dask.config.set({"distributed.scheduler.allowed-failures": 1}):
        lc = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
        client = Client(lc)
    yield client
    client.close()
    lc.close()


# --- rows and tallies (no cluster) --------------------------------------------------------


def test_same_seed_same_rows_whatever_the_run_length() -> None:
    p = parse_variant("hopper").params(INSTR)
    short = random_chunks(250, seed=5, chunk_rows=100)
    long = random_chunks(420, seed=5, chunk_rows=100)
    assert [c.seed for c in short] == [c.seed for c in long[:3]]
    a1 = np.concatenate([chunk_inputs(p, c)[0] for c in short])
    a2 = np.concatenate([chunk_inputs(p, c)[0] for c in long])
    assert np.array_equal(a1, a2[:250])
    other = np.concatenate([chunk_inputs(p, c)[0] for c in random_chunks(250, 6, 100)])
    assert not np.array_equal(a1, other)


def test_tally_keeps_first_mismatches_in_row_order_whatever_the_arrival() -> None:
    from tensorcore_smt.identify.oracle import make_oracle

    p = parse_variant("hopper").params(INSTR)
    oracle = make_oracle("variant:hopper[F=24]", p, "hopper", INSTR)
    job = Job(p=p, oracle=oracle, keep=5)
    results = [check_chunk(job, c) for c in random_chunks(3000, 1, 1000)]
    assert all(r.mismatches > 0 for r in results)
    fwd, rev = Tally(keep=5), Tally(keep=5)
    for r in results:
        fwd.add(r)
    for r in reversed(results):
        rev.add(r)
    assert fwd.kept == rev.kept and [k[0] for k in fwd.kept] == sorted(k[0] for k in fwd.kept)
    assert fwd.mismatches == sum(r.mismatches for r in results)


def test_scheduler_address_from_environment(monkeypatch) -> None:
    monkeypatch.setenv("TCSMT_SCHEDULER", "tcp://127.0.0.1:1")
    assert scheduler_address(None) == "tcp://127.0.0.1:1"
    assert scheduler_address("tcp://x:2") == "tcp://x:2"
    monkeypatch.delenv("TCSMT_SCHEDULER")
    assert scheduler_address(None) is None


# --- the task runner on a real cluster ----------------------------------------------------


def _square_or_fail(x: int) -> int:
    if x == 3:
        raise ValueError(f"no square for {x}")
    return x * x


def _die_once(marker: str) -> int:
    """Kills its worker process the first time (no marker yet), answers on the retry."""
    m = Path(marker)
    if not m.exists():
        m.write_text("died")
        os.kill(os.getpid(), signal.SIGKILL)
    return os.getpid()


def _die_always(_: str) -> int:
    os.kill(os.getpid(), signal.SIGKILL)
    return 0


def test_failed_task_is_reported_with_its_input_and_the_rest_go_on(cluster) -> None:
    got = dict(run_tasks(cluster, _square_or_fail, list(range(6)), describe=lambda x: f"x={x}"))
    assert sorted(got) == list(range(6))
    fail = got[3]
    assert isinstance(fail, TaskFailure) and fail.input == "x=3" and "no square" in fail.error
    assert {i: v for i, v in got.items() if i != 3} == {0: 0, 1: 1, 2: 4, 4: 16, 5: 25}


def test_killed_worker_task_is_retried_or_reported_never_lost(cluster, tmp_path) -> None:
    inputs = [str(tmp_path / "once"), "always"]
    fns = {0: _die_once, 1: _die_always}
    got = {}
    for i, x in enumerate(inputs):  # one at a time: the deaths are the task's own
        for _, r in run_tasks(cluster, fns[i], [x], describe=str):
            got[i] = r
    assert (tmp_path / "once").exists()
    assert isinstance(got[0], int)  # retried on a live worker, answered
    assert isinstance(got[1], TaskFailure) and "KilledWorker" in got[1].error
    assert got[1].input == "always"
    # the cluster recovers: both workers serve new tasks
    cluster.wait_for_workers(2, timeout=60)
    assert dict(run_tasks(cluster, _square_or_fail, [2, 4])) == {0: 4, 1: 16}


# --- the command ----------------------------------------------------------------------------


def _run(args: list[str]):
    return CliRunner().invoke(main, args, catch_exceptions=False)


def test_validate_agrees_with_itself_and_reports_a_wrong_hypothesis(cluster, tmp_path) -> None:
    addr = cluster.scheduler.address
    base = ["validate", "--arch", "hopper", "--instr", INSTR, "--rows", "3000"]
    base += ["--chunk", "1000", "--scheduler", addr, "--json"]
    out = tmp_path / "m.json"
    r = _run(base + ["--oracle", "variant:hopper", "--out", str(out)])
    assert r.exit_code == 0, r.output
    rep = json.loads(r.output)
    assert rep["rows"] == 3000 and rep["mismatches"] == 0 and rep["mismatch_file"] is None
    assert set(rep) >= {"rows", "mismatches", "seconds", "rows_per_s", "mismatch_file"}
    assert not out.exists()

    r = _run(base + ["--oracle", "variant:hopper[F=24]", "--out", str(out), "--keep", "20"])
    assert r.exit_code == 1, r.output
    rep = json.loads(r.output)
    assert rep["mismatches"] > 0 and rep["mismatch_file"] == str(out)
    vf = json.loads(out.read_text())
    assert vf["variants"] == ["hopper", "hopper[F=24]"]
    assert len(vf["vectors"]) == min(20, rep["mismatches"])
    for v in vf["vectors"]:
        assert v["predicted"]["hopper"] != v["predicted"]["hopper[F=24]"]
    first = [v["source"] for v in vf["vectors"]]

    # same seed, same rows: the same mismatches, whatever the schedule
    r = _run(base[:-3] + ["--json", "--workers", "2", "--oracle", "variant:hopper[F=24]"])
    assert r.exit_code == 1
    rep2 = json.loads(r.output)
    assert rep2["mismatches"] == rep["mismatches"] and rep2["workers"] == 2
    vf2 = json.loads(Path(rep2["mismatch_file"]).read_text())
    assert [v["source"] for v in vf2["vectors"]][:20] == first
    Path(rep2["mismatch_file"]).unlink()


def test_validate_vectors_file_and_failing_oracle(cluster, tmp_path) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text(
        '{"a": ["0x3c00","0","0","0"], "b": ["0x3c00","0","0","0"], "c": "0xbf7fffff"}\n' * 3
    )
    addr = cluster.scheduler.address
    base = ["validate", "--arch", "volta", "--vectors", str(rows), "--scheduler", addr]
    r = _run(base + ["--oracle", "variant:volta", "--json"])
    assert r.exit_code == 0 and json.loads(r.output)["rows"] == 3
    # a failing oracle: the chunk is reported with its rows, exit 3, nothing hidden
    r = CliRunner().invoke(main, base + ["--oracle", "cmd:false", "--json"])
    assert r.exit_code == 3, r.output
    rep = json.loads(r.stdout)
    assert rep["rows"] == 0 and len(rep["failed"]) == 1
    assert "rows 0..2" in rep["failed"][0]["chunk"] and "status 1" in rep["failed"][0]["error"]


@pytest.mark.parametrize(
    "args,msg",
    [
        (["--oracle", "nope:x"], "unknown oracle"),
        (["--oracle", "variant:volta", "--rows", "0"], "--rows"),
        (["--oracle", "variant:volta", "--rows", "5", "--vectors", "x.jsonl"], "either"),
        (["--oracle", "variant:volta", "--vectors", "missing.jsonl"], "no such file"),
        (["--oracle", "variant:volta", "--device", "nodevice"], "device"),
        (["--oracle", "variant:volta", "--workers", "0"], "--workers"),
    ],
)
def test_validate_bad_input_is_one_line_exit_2(args: list[str], msg: str, tmp_path) -> None:
    r = CliRunner().invoke(main, ["validate", "--arch", "volta"] + args)
    assert r.exit_code == 2, r.output
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tcsmt") and msg in lines[0], r.stderr
    assert "Traceback" not in r.output


# --- find --all as Dask tasks -----------------------------------------------------------


def test_find_all_on_the_cluster_answers_as_the_serial_run(cluster, tmp_path) -> None:
    import shutil

    from tensorcore_smt.smt.find import find
    from tensorcore_smt.smt.library import BUILTIN_DIR, load_all
    from tensorcore_smt.smt.solve import Limits

    for name in ("precision-product", "rounding-final"):
        shutil.copy(BUILTIN_DIR / f"{name}.toml", tmp_path / f"{name}.toml")
    args = ["find", "--all", "--arch", "volta", "--properties-dir", str(tmp_path)]
    args += ["--timeout", "60", "--json", "--scheduler", cluster.scheduler.address]
    r = _run(args)
    assert r.exit_code == 0, r.output
    got = json.loads(r.output)["properties"]
    for name, prop in load_all(tmp_path).items():
        serial = find(prop, "volta", None, Limits(timeout=60))
        assert [(q["id"], q["answer"]) for q in got[name]] == [
            (a.spec.id, a.answer) for a in serial
        ]


def test_find_workers_without_all_is_a_user_error() -> None:
    r = CliRunner().invoke(
        main, ["find", "--property", "carry-bits", "--arch", "volta", "--workers", "2"]
    )
    assert r.exit_code == 2 and "--all" in r.stderr
