"""Vector files: JSON and CSV round trips, validation (one line naming the file and the
field, exit 2), merge, predictions from the model, `tcsmt vectors ...` and
`tcsmt simulate --vectors FILE.json`."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
from click.testing import CliRunner

from tensorcore_smt import __version__
from tensorcore_smt.api import simulate
from tensorcore_smt.cli import main
from tensorcore_smt.errors import UserError
from tensorcore_smt.validation.vectors import (
    SCHEMA,
    Vector,
    VectorFile,
    load,
    merge,
    predict,
    save,
    stale_predictions,
    to_csv,
)

VOLTA = "m8n8k4.f32.f16.f16.f32"
VARIANTS = ["volta", "volta[carry_bits=2]", "fasi-volta"]


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def fasi_file() -> VectorFile:
    """Two of Fasi et al.'s Volta experiments (§III-D1 no guard digit, §III-D4 carry bits)
    and a random-looking one, with every variant's prediction."""
    vecs = [
        Vector([0x3C00, 0, 0, 0], [0x3C00, 0, 0, 0], 0xBF7FFFFF, {}, "Fasi §III-D1"),
        # c = 1 + 2^-22 + 2^-23, b = (1, 1, 1, 2^-23): the hardware returns 4 + 2^-21
        Vector([0x3C00] * 4, [0x3C00, 0x3C00, 0x3C00, 0x0002], 0x3F800003, {}, "Fasi §III-D4"),
        Vector([0x1234, 0xABCD, 0x7BFF, 0x8001], [0x4000, 0x3555, 0x0400, 0xFC00], 0x12345678, {}),
    ]
    return predict(VectorFile("volta", VOLTA, list(VARIANTS), vecs, "carry-bits", {"k": 1}))


def write_json(path, obj) -> str:
    path.write_text(json.dumps(obj))
    return str(path)


# --- the API -----------------------------------------------------------------------------


def test_predictions_are_the_papers_answers_and_agree_with_the_vector_interpreter():
    vf = fasi_file()
    d0, d1 = vf.vectors[0].predicted, vf.vectors[1].predicted
    assert d0["volta"] == 0x34000000  # 2^-23: no guard digit (Fasi §III-D1)
    assert d0["fasi-volta"] == 0x33800000  # the exact RZ sum would be 2^-24
    assert d1["volta"] == 0x40800001  # 4 + 2^-21 (Fasi §III-D4)
    for var in VARIANTS:
        a = np.array([v.a for v in vf.vectors], dtype=np.uint64)
        b = np.array([v.b for v in vf.vectors], dtype=np.uint64)
        c = np.array([v.c for v in vf.vectors], dtype=np.uint64)
        want = [int(x) for x in simulate(var, VOLTA, a, b, c)]
        assert [v.predicted[var] for v in vf.vectors] == want


def test_json_round_trip(tmp_path):
    vf = fasi_file()
    path = tmp_path / "v.json"
    save(vf, path)
    obj = json.loads(path.read_text())
    assert obj["schema"] == SCHEMA and obj["schema_version"] == 1
    assert obj["tool_version"] == __version__
    assert obj["formats"] == {"a": "fp16", "b": "fp16", "c": "fp32", "d": "fp32"}
    assert obj["vectors"][0]["a"] == ["0x3c00", "0x0000", "0x0000", "0x0000"]
    assert obj["vectors"][0]["predicted"]["volta"] == "0x34000000"
    back = load(path)
    assert back == vf
    assert back.to_json() == obj


def test_csv_round_trip_keeps_everything(tmp_path):
    vf = fasi_file()
    vf.vectors[2].note = 'commas, "quotes" and ünïcode'
    vf.vectors[2].source = "hand-made"
    del vf.vectors[1].predicted["fasi-volta"]  # an empty cell: no prediction
    path = tmp_path / "v.csv"
    save(vf, path)
    text = path.read_text()
    assert text.startswith("# tcsmt-vectors {")
    assert "d[volta[carry_bits=2]]" in text.splitlines()[1]
    back = load(path)
    assert back.to_json() == vf.to_json()
    assert back.vectors[2].note == 'commas, "quotes" and ünïcode'
    assert "fasi-volta" not in back.vectors[1].predicted
    assert to_csv(back) == text


def test_instruction_names_are_canonicalised():
    vf = VectorFile("hopper", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", ["hopper"], [])
    vf.validate()
    assert vf.instruction == "m16n8k16.f32.f16.f16.f32"


def test_arch_given_as_a_variant_stands_for_its_preset():
    vf = VectorFile("fasi-volta", VOLTA, ["fasi-volta", "volta"], [])
    vf.validate()
    assert vf.arch == "volta"
    vf = VectorFile("hopper[F=24]", "m16n8k16.f32.f16.f16.f32", [], [])
    assert vf.to_json()["arch"] == "hopper"


def test_merge_unions_variants_and_deduplicates():
    one = fasi_file()
    two = copy.deepcopy(one)
    two.variants = ["volta", "turing"]  # Turing runs HMMA.884 as Volta (Valpey et al. 2025 §5)
    two.vectors = [copy.deepcopy(one.vectors[0]), Vector([0] * 4, [0] * 4, 0x3F800000, {})]
    for v in two.vectors:
        v.predicted = {}
    two = predict(two)
    two.vectors[0].note = "seen twice"
    m = merge([one, two])
    assert m.variants == VARIANTS + ["turing"]
    assert len(m.vectors) == 4  # 3 + 2 - 1 duplicate
    first = m.vectors[0]
    assert set(first.predicted) == set(VARIANTS) | {"turing"}
    assert first.predicted["turing"] == first.predicted["volta"]
    assert first.note == "Fasi §III-D1; seen twice"
    assert m.property == "carry-bits"


def test_merge_refuses_other_instructions_and_conflicts():
    one = fasi_file()
    other = VectorFile("volta", "m8n8k4.f16.f16.f16.f16", ["volta"], [])
    with pytest.raises(UserError, match=r"files\[1\]: cannot merge"):
        merge([one, other])
    bad = copy.deepcopy(one)
    bad.vectors[0].predicted["volta"] ^= 1
    with pytest.raises(UserError, match="predicts 0x34000001 for volta"):
        merge([one, bad])


def test_stale_predictions_are_found():
    vf = fasi_file()
    vf.vectors[2].predicted["volta"] ^= 0x10
    (stale,) = stale_predictions(vf)
    assert stale[:2] == (2, "volta")


def test_variant_with_other_operand_formats_is_rejected():
    vf = VectorFile("volta", VOLTA, ["volta[a_fmt=bf16]"], [])
    with pytest.raises(UserError, match=r"variants\[0\]: a differs"):
        vf.validate()


# --- malformed files: exit 2, one line naming the file and the field --------------------


def _mutations():
    def setv(*path_value):
        *path, value = path_value

        def f(o):
            cur = o
            for k in path[:-1]:
                cur = cur[k]
            cur[path[-1]] = value

        return f

    def delete(*path):
        def f(o):
            cur = o
            for k in path[:-1]:
                cur = cur[k]
            del cur[path[-1]]

        return f

    return [
        (setv("schema", "other"), "schema: expected 'tcsmt-vectors'"),
        (delete("schema"), "schema: missing"),
        (setv("schema_version", 2), "schema_version: 2 is newer"),
        (setv("schema_version", "1"), "schema_version: expected an integer"),
        (setv("arch", "pascal"), "arch: unknown architecture 'pascal'"),
        (setv("instruction", "m16n8k16.f32.f16.f16.f32"), "instruction: unknown instruction"),
        (setv("variants", "volta"), "variants: expected a list"),
        (setv("variants", 2, "volta[nope=1]"), "variants[2]: variant 'volta[nope=1]'"),
        (setv("variants", 1, "volta"), "variants[1]: 'volta' is listed twice"),
        (setv("variants", 1, "ampere"), "variants[1]: unknown instruction"),
        (setv("formats", "a", "bf16"), "formats.a: m8n8k4.f32.f16.f16.f32 takes fp16"),
        (setv("K", 8), "K: m8n8k4.f32.f16.f16.f32 has K=4"),
        (setv("extra", 1), "extra: unknown field"),
        (setv("vectors", {}), "vectors: expected a list"),
        (setv("vectors", 1, "x"), "vectors[1]: expected an object"),
        (delete("vectors", 1, "c"), "vectors[1].c: missing"),
        (setv("vectors", 2, "a", 2, "zz"), "vectors[2].a[2]: 'zz' is not a hex bit pattern"),
        (setv("vectors", 2, "b", 0, 15360), "vectors[2].b[0]: expected a hex string"),
        (setv("vectors", 0, "a", ["0x0"] * 3), "vectors[0].a: expected 4 entries, got 3"),
        (setv("vectors", 0, "b", ["0x0"] * 5), "vectors[0].b: expected 4 entries, got 5"),
        (setv("vectors", 1, "a", 0, "0x10000"), "vectors[1].a[0]: '0x10000' does not fit"),
        (setv("vectors", 1, "c", "0x1ffffffff"), "vectors[1].c: '0x1ffffffff' does not fit"),
        (
            setv("vectors", 0, "predicted", "ampere", "0x0"),
            "vectors[0].predicted: 'ampere' is not one of the file's variants",
        ),
        (
            setv("vectors", 0, "predicted", "volta", "0xzz"),
            "vectors[0].predicted['volta']: '0xzz' is not a hex bit pattern",
        ),
        (setv("vectors", 0, "prediction", {}), "vectors[0].prediction: unknown field"),
        (setv("vectors", 0, "note", 3), "vectors[0].note: expected a string"),
    ]


@pytest.mark.parametrize(
    "mutate,needle", _mutations(), ids=lambda x: x if isinstance(x, str) else ""
)
def test_malformed_file_exits_2_naming_the_field(tmp_path, mutate, needle):
    obj = fasi_file().to_json()
    mutate(obj)
    path = write_json(tmp_path / "v.json", obj)
    for args in (("vectors", "show", path), ("probe", path), ("probe", "--check", path, path)):
        r = run(*args)
        assert r.exit_code == 2, (args, r.output)
        lines = [x for x in r.output.splitlines() if x.strip()]
        assert len(lines) == 1, r.output
        assert lines[0].startswith(f"tcsmt: error: {path}: "), lines[0]
        assert needle in lines[0], lines[0]
        assert "Traceback" not in r.output


def test_invalid_json_and_missing_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "tcsmt-vectors",\n  "arch": }')
    r = run("vectors", "show", str(bad))
    assert r.exit_code == 2 and f"{bad}: invalid JSON at line 2" in r.output
    r = run("vectors", "show", str(tmp_path / "none.json"))
    assert r.exit_code == 2 and "none.json: no such file" in r.output


@pytest.mark.parametrize(
    "edit,needle",
    [
        (lambda t: t.replace("# tcsmt-vectors ", "# other "), "line 1: expected the header line"),
        (lambda t: t.replace(",c,", ",cc,"), "line 2: no column 'c'"),
        (lambda t: t.replace("0x3c00", "0xq3c0", 1), "vectors[0].a[0]: '0xq3c0'"),
        (lambda t: t + "9,0x1\n", "line 6: expected 15 columns, got 2"),
        (lambda t: t.replace(",note,", ",remark,"), "line 2: unexpected column 'remark'"),
    ],
)
def test_malformed_csv_exits_2(tmp_path, edit, needle):
    path = tmp_path / "v.csv"
    path.write_text(edit(to_csv(fasi_file())))
    r = run("vectors", "show", str(path))
    assert r.exit_code == 2, r.output
    assert f"{path}: {needle}" in r.output, r.output


# --- commands -----------------------------------------------------------------------------


def test_vectors_show_prints_hex_and_decimal(tmp_path):
    path = tmp_path / "v.json"
    save(fasi_file(), path)
    r = run("vectors", "show", str(path))
    assert r.exit_code == 0, r.output
    assert "volta m8n8k4.f32.f16.f16.f32" in r.output and "3 vectors, 3 variants" in r.output
    assert "c                      = 0xbf7fffff (-0.9999999403953552)" in r.output
    assert "d[volta]               = 0x34000000 (1.1920928955078125e-07)" in r.output
    assert "d[fasi-volta]          = 0x33800000 (5.960464477539063e-08)" in r.output
    assert "differ from this tcsmt" not in r.output


def test_vectors_show_flags_stale_predictions(tmp_path):
    vf = fasi_file()
    vf.vectors[0].predicted["volta"] = 0x34000001
    path = tmp_path / "v.json"
    save(vf, path)
    r = run("vectors", "show", str(path))
    assert r.exit_code == 0
    assert "0x34000001" in r.output and "[this tcsmt computes 0x34000000]" in r.output
    assert "1 stored predictions differ" in r.output


def test_vectors_merge_command(tmp_path):
    one = fasi_file()
    v1 = one.vectors[1]
    two = predict(VectorFile("volta", VOLTA, ["volta", "turing"], [Vector(v1.a, v1.b, v1.c, {})]))
    save(one, tmp_path / "a.json")
    save(two, tmp_path / "b.csv")
    out = tmp_path / "m.json"
    r = run(
        "vectors", "merge", str(tmp_path / "a.json"), str(tmp_path / "b.csv"), "--out", str(out)
    )
    assert r.exit_code == 0, r.output
    assert "3 vectors (4 read), 4 variants" in r.output
    assert load(out).variants == VARIANTS + ["turing"]
    other = VectorFile("ampere", "m16n8k16.f32.f16.f16.f32", ["ampere"], [])
    save(other, tmp_path / "c.json")
    r = run(
        "vectors", "merge", str(tmp_path / "a.json"), str(tmp_path / "c.json"), "--out", str(out)
    )
    assert r.exit_code == 2 and f"{tmp_path / 'c.json'}: cannot merge ampere" in r.output


def test_vectors_csv_command(tmp_path):
    src = tmp_path / "v.json"
    save(fasi_file(), src)
    r = run("vectors", "csv", str(src))
    assert r.exit_code == 0 and r.output == to_csv(fasi_file())
    r = run("vectors", "csv", str(src), "--out", str(tmp_path / "v.csv"))
    assert r.exit_code == 0 and load(tmp_path / "v.csv") == load(src)


def test_vectors_predict_and_new(tmp_path):
    rows = tmp_path / "rows.jsonl"
    rows.write_text(
        json.dumps(
            {"a": ["0x3c00", "0", "0", "0"], "b": ["0x3c00", "0", "0", "0"], "c": "0xbf7fffff"}
        )
        + "\n"
    )
    out = tmp_path / "v.json"
    r = run("vectors", "new", "--arch", "volta", "--rows", str(rows), "--out", str(out))
    assert r.exit_code == 0, r.output
    vf = load(out)
    assert vf.variants == ["volta"] and vf.vectors[0].predicted == {"volta": 0x34000000}
    r = run("vectors", "predict", str(out), "--variant", "fasi-volta")
    assert r.exit_code == 0 and "1 predictions new or changed" in r.output
    assert load(out).vectors[0].predicted["fasi-volta"] == 0x33800000
    r = run("vectors", "predict", str(out), "--variant", "ampere")
    assert r.exit_code == 2 and "--variant: variants[2]: unknown instruction" in r.output
    rows.write_text('{"a": ["0x3c00"], "b": [], "c": "0"}\n')
    r = run("vectors", "new", "--arch", "volta", "--rows", str(rows), "--out", str(out))
    assert r.exit_code == 2 and "rows.jsonl:1: a and b need 4 entries, got 1 and 0" in r.output


def test_simulate_reads_a_vector_file(tmp_path):
    vf = fasi_file()
    for name in ("v.json", "v.csv"):
        path = tmp_path / name
        save(vf, path)
        out = tmp_path / (name + ".out.jsonl")
        r = run("simulate", "--arch", "volta", "--vectors", str(path), "--out", str(out))
        assert r.exit_code == 0, r.output
        rows = [json.loads(x) for x in out.read_text().splitlines()]
        assert [int(r["d"], 16) for r in rows] == [v.predicted["volta"] for v in vf.vectors]
        assert rows[0]["a"] == ["0x3c00", "0x0000", "0x0000", "0x0000"]
        assert rows[0]["note"] == "Fasi §III-D1"
    # another variant of the same instruction simulates the same inputs
    r = run("simulate", "--arch", "fasi-volta", "--vectors", str(tmp_path / "v.json"))
    assert r.exit_code == 0
    assert json.loads(r.output.splitlines()[0])["d"] == "0x33800000"


def test_simulate_vector_file_errors(tmp_path):
    obj = fasi_file().to_json()
    obj["vectors"][1]["b"][3] = "0xnope"
    path = write_json(tmp_path / "v.json", obj)
    r = run("simulate", "--arch", "volta", "--vectors", path)
    assert r.exit_code == 2
    assert (
        r.output.strip()
        == f"tcsmt: error: {path}: vectors[1].b[3]: '0xnope' is not a hex bit pattern"
    )
    good = tmp_path / "good.json"
    save(fasi_file(), good)
    r = run("simulate", "--arch", "ampere", "--vectors", str(good))
    assert r.exit_code == 2 and "pass --instr m8n8k4.f32.f16.f16.f32" in r.output


def test_simulate_jsonl_still_works(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text(
        json.dumps({"a": ["0x3c00", "0", "0", "0"], "b": ["0x3c00", "0", "0", "0"], "c": "0x0"})
    )
    r = run("simulate", "--arch", "volta", "--vectors", str(src))
    assert r.exit_code == 0 and json.loads(r.output)["d"] == "0x3f800000"


def test_one_row_reader_names_the_files_own_lines(tmp_path):
    """simulate, validate and identify's file oracle read rows with one reader
    (vectors.read_rows): errors name the file's own line (blank lines counted) or the CSV
    line, the same file gives the same rows to all three, and a partial read keeps the
    rows before the first bad line."""
    from tensorcore_smt.identify.oracle import read_rows_labelled
    from tensorcore_smt.spec.presets import PRESETS
    from tensorcore_smt.validation.validate import read_inputs
    from tensorcore_smt.validation.vectors import read_rows

    p = PRESETS["volta"].instructions[VOLTA].params
    row = {"a": ["0x3c00", "0", "0", "0"], "b": ["0x3c00", "0", "0", "0"], "c": "0xbf7fffff"}
    good = json.dumps({**row, "d": "0x34000000"})
    path = tmp_path / "rows.jsonl"
    path.write_text(f"{good}\n\n{good}\n" + '{"a": ["0x3c00"], "b": [], "c": "0"}\n')
    with pytest.raises(UserError, match=r"rows\.jsonl:4: a and b need 4 entries"):
        read_rows(path, p)
    got = read_rows(path, p, partial=True)
    assert [r.where for r in got.rows] == [f"{path}:1", f"{path}:3"]
    assert got.error.startswith(f"{path}:4: ")
    path.write_text(f"{good}\n\n{good}\n")
    a, b, c = read_inputs(path, p)
    assert a.shape == (2, 4) and int(a[0, 0]) == 0x3C00 and int(c[1]) == 0xBF7FFFFF
    rows, labels = read_rows_labelled(path, p)
    assert rows[0] == ([0x3C00, 0, 0, 0], [0x3C00, 0, 0, 0], 0xBF7FFFFF, 0x34000000)
    assert labels == [f"{path}:1", f"{path}:3"]
    path.write_text(json.dumps(row) + "\n")
    with pytest.raises(UserError, match=r"rows\.jsonl:1: missing field 'd'"):
        read_rows_labelled(path, p)
    csv_path = tmp_path / "v.csv"
    save(fasi_file(), csv_path)
    assert [r.where for r in read_rows(csv_path, p).rows][:2] == [f"{csv_path}:3", f"{csv_path}:4"]
    lines = csv_path.read_text().splitlines()
    lines[3] = lines[3].replace(",", ";", 1)
    csv_path.write_text("\n".join(lines) + "\n")
    with pytest.raises(UserError, match=r"v\.csv: line 4: "):
        read_rows(csv_path, p)
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(UserError, match="empty.jsonl: no rows"):
        read_rows(tmp_path / "empty.jsonl", p)
