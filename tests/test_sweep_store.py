"""The sweep's column files (hardware/sweep_store.py): what they keep is what the GPU's
JSON lines said, folders merge their sweeps in seed order, and the shipped sweeps agree
with each other where they asked the same shape (the heuristic is a function of the
shape on one GPU)."""

from __future__ import annotations

import gzip
import json
import lzma

import numpy as np
import pytest

from tensorcore_smt.hardware import cublaslt_sweep as sw
from tensorcore_smt.hardware import sweep_store as st
from tensorcore_smt.hardware.library_fit import recording_dir


def _lines(rows: list[dict]) -> list[str]:
    return [json.dumps(r) + "\n" for r in rows]


def _row(cls: str, m: int, n: int, k: int, v: int) -> dict:
    return {
        "class": cls,
        "m": m,
        "n": n,
        "k": k,
        "f": [v, 2 * v, 3, 4, 0, 1, 35, 0, 4, v << 20, 0.25 * v],
    }


def test_columns_keep_every_answer_of_the_lines(tmp_path):
    rng = np.random.default_rng(7)
    classes = ["matmul.fp16.rr1", "linear-bias.tf32", "scaled-mm.e4m3"]
    rows = [
        _row(
            classes[rng.integers(3)], *map(int, rng.integers(1, 16385, 3)), int(rng.integers(1, 99))
        )
        for _ in range(500)
    ]
    rows.insert(17, {"class": "matmul.fp32", "m": 1, "n": 2, "k": 3, "error": "no algorithm"})
    src = tmp_path / "cublaslt-seed5-00.jsonl.gz"
    with gzip.open(src, "wt") as f:
        f.writelines(_lines(rows))
    out = tmp_path / "cublaslt-seed5.cols.xz"
    assert st.main([str(out), str(src)]) == 0
    want = {(r["class"], r["m"], r["n"], r["k"]): r["f"] for r in rows if "f" in r}
    got = st.read(out).records()
    assert {(r["class"], r["m"], r["n"], r["k"]): r["f"] for r in got} == want
    assert all(type(r["f"][0]) is int and type(r["f"][-1]) is float for r in got)
    assert len(out.read_bytes()) < len(src.read_bytes())


def test_a_folder_merges_its_sweeps_by_seed_and_part(tmp_path):
    cls = "matmul.bf16.rr0"
    files = {
        "cublaslt.jsonl.gz": [_row(cls, 2, 3, 5, 1), _row(cls, 7, 3, 5, 2)],
        "cublaslt-seed1-01.jsonl.gz": [_row(cls, 2, 3, 5, 4)],
        "cublaslt-seed1-00.jsonl.gz": [_row(cls, 2, 3, 5, 3), _row(cls, 9, 9, 9, 3)],
    }
    for name, rows in files.items():
        with gzip.open(tmp_path / name, "wt") as f:
            f.writelines(_lines(rows))
    st.write(tmp_path / "cublaslt-seed2.cols.xz", st.from_lines(_lines([_row(cls, 7, 3, 5, 5)])))
    names = [p.name for p in st.sweep_paths(tmp_path)]
    assert names == [
        "cublaslt.jsonl.gz",
        "cublaslt-seed1-00.jsonl.gz",
        "cublaslt-seed1-01.jsonl.gz",
        "cublaslt-seed2.cols.xz",
    ]
    got = [(r["m"], r["f"][0]) for r in st.sweep_records(tmp_path)]
    assert got == [(2, 4), (7, 5), (9, 3)]  # order first asked, the last answer
    assert st.sweep_records(tmp_path, ["linear.fp16.rr1"]) == []


def test_bad_column_files_and_arguments_are_one_line(tmp_path, capsys):
    bad = tmp_path / "cublaslt-seed3.cols.xz"
    bad.write_bytes(lzma.compress(b'{"format": 99, "fields": []}\n'))
    with pytest.raises(ValueError, match="format"):
        st.read(bad)
    assert st.main([str(tmp_path / "x.cols.xz"), str(bad)]) == 2
    lines = tmp_path / "odd.jsonl"
    lines.write_text('{"class": "matmul.fp32", "f": [1]}\n')  # no shape
    assert st.main([str(tmp_path / "y.cols.xz"), str(lines)]) == 2
    assert st.main(["x.jsonl"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all(e.startswith("sweep_store:") for e in err[:2])
    assert err[2].startswith("usage") and not (tmp_path / "y.cols.xz").exists()


@pytest.mark.parametrize("gpu", ["h200", "h100"])
def test_the_shipped_sweeps_agree_where_they_asked_the_same_shape(gpu):
    """Every (class, shape) both the first sweep and a later one asked (the LLM series,
    asked by every sweep) got the same kernel configuration from the heuristic."""
    folder = recording_dir(gpu, 0).parent
    paths = st.sweep_paths(folder)
    assert [p.name for p in paths] == [
        "cublaslt.jsonl.gz",
        "cublaslt-seed1.cols.xz",
        "cublaslt-seed2.cols.xz",
    ]
    config = [i for i, n in enumerate(sw.FIELD_ORDER) if n not in ("workspace", "waves")]
    first = {(r["class"], r["m"], r["n"], r["k"]): r["f"] for r in st.read(paths[0]).records()}
    for p in paths[1:]:
        t = st.read(p)
        assert len(t) > 1_000_000 and len(t.classes) == 18
        asked = np.isin(t.m, [1, 2, 3, 4, 127, 128, 129, 255, 256, 4096])
        both = [r for r in t.records(asked) if (r["class"], r["m"], r["n"], r["k"]) in first]
        assert len(both) > 500
        for r in both:
            old = first[(r["class"], r["m"], r["n"], r["k"])]
            assert [r["f"][i] for i in config] == [old[i] for i in config], r
