"""Library profiles (profiles/*.json, gemm/profiles.py): the H100 profile built from the
GEMM recordings of results/hardware/h100/gemm, checked against those recordings (the
GPU's own output bits): every held-out shape the profile says its rule reproduces is
reproduced bit for bit through tc.matmul("h100-cublas-13.0", ...) and through
tc.emulate("h100-cublas-13.0") around plain torch calls, with the decision naming its source; malformed profiles are
one line; the CLI's exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from click.testing import CliRunner

import tensorcore_smt as tc
from tensorcore_smt.cli import main
from tensorcore_smt.gemm.profile_call import Decision
from tensorcore_smt.gemm.profiles import (
    Flag,
    Function,
    Major,
    Source,
    find_profile,
    load_profile,
    parse_profile,
    profile_names,
)
from tensorcore_smt.hardware.profile_check import check_profile
from tensorcore_smt.hardware.profile_replay import (
    call_named,
    class_key,
    open_recording,
    operands,
    recorded_flags,
    replay,
)
from tensorcore_smt.spec.presets import ALIASES, PRESETS

ROOT = Path(__file__).resolve().parents[1]
H100 = ROOT / "results" / "hardware" / "h100"
GEMM = H100 / "gemm"
PROFILE = load_profile("h100-cublas-13.0")
MOST = 6
"""Rows and columns of each recorded D the quick tests replay (spread over the kept ones)."""

OUT_NP = {"fp16": np.float16, "bf16": ml_dtypes.bfloat16, "fp32": np.float32}


def _held(every_class: int = 2):
    """(class, held-out shape) pairs: the first `every_class` held-out shapes of every
    class, plus every one of the largest K (where the split-K choice shows)."""
    out = []
    for c in PROFILE.classes:
        top = max(h.k for h in c.held_out)
        chosen = list(c.held_out[:every_class]) + [h for h in c.held_out if h.k == top][:2]
        out += [(c, h) for h in dict.fromkeys(chosen)]
    return out


HELD = _held()


def _tag(rec, h) -> str:
    return next(t for t in rec.tags if t.split("_")[1:] == [str(h.m), str(h.n), str(h.k)])


def test_h100_names_the_newest_h100_profile_and_no_gpu_is_an_architecture():
    assert PROFILE.name == "h100-cublas-13.0"
    newest = max(
        (n for n in profile_names() if n.startswith("h100-")),
        key=lambda n: [int(x) for x in n.split("-")[-1].split(".")],
    )
    assert load_profile("h100").name == newest != "h100-cublas-13.0"
    assert find_profile("h100-cublas-13.0") is PROFILE
    assert find_profile("hopper") is None
    for name in profile_names():
        gpu = load_profile(name).gpu
        assert gpu not in PRESETS and gpu not in ALIASES, gpu


def test_every_recorded_call_is_a_class_with_held_out_shapes():
    meta = json.loads((GEMM / "recordings.json").read_text())
    names = [c["call"] for c in meta["calls"]]
    assert [c.name for c in PROFILE.classes] == names
    for c in PROFILE.classes:
        call = call_named(c.recording)
        assert c.key == class_key(call)
        rec = open_recording(GEMM, call)
        shapes = list(rec.by_shape())
        held = [s for i, s in enumerate(shapes) if i % 3 == 2]
        assert [(h.m, h.n, h.k) for h in c.held_out] == held
        assert {s.mnk for s in c.shapes} == set(shapes) - set(held)
    assert PROFILE.classes[0].key.function == Function.MM
    scaled = PROFILE.by_name("e4m3-f32out").key
    assert scaled.function == Function.SCALED_MM and scaled.layout == (Major.ROW, Major.COL)


@pytest.mark.parametrize("cls,held", HELD, ids=[f"{c.name}-{h.m}x{h.n}x{h.k}" for c, h in HELD])
def test_held_out_shape_replays_through_the_profile(cls, held):
    """The recorded call's kept elements (a spread slice), the profile deciding from the
    operands and the recorded call's shape."""
    rec = open_recording(GEMM, call_named(cls.recording))
    r = replay(rec, _tag(rec, held), PROFILE, MOST)
    assert r.decision.source == Source.RULE and r.decision.call_class == cls.name
    assert r.decision.recipe == held.recipe and r.decision.came_from == held.came_from
    if held.exact:  # the profile says its rule reproduces this shape: every element
        assert r.exact


def _small(c, kmax: int):
    """The held-out shape of class `c` of the largest K up to `kmax` whose D is kept
    whole (M, N <= 64), the first of them."""
    whole = [h for h in c.held_out if h.m <= 64 and h.n <= 64 and h.k <= kmax]
    return max(whole, key=lambda h: h.k)


SMALL = [(c, _small(c, 1024)) for c in PROFILE.classes]
SMALL_IDS = [f"{c.name}-{h.m}x{h.n}x{h.k}" for c, h in SMALL]
DEEP = [(c, _small(c, 4096)) for c in PROFILE.classes]
DEEP_IDS = [f"{c.name}-{h.m}x{h.n}x{h.k}" for c, h in DEEP]


def _whole(cls, held):
    """A and B of a held-out shape whole, laid out as recorded, and the recorded D."""
    rec = open_recording(GEMM, call_named(cls.recording))
    A, B, d = operands(rec, _tag(rec, held))
    assert A.shape == (held.m, held.k) and B.shape == (held.k, held.n)
    return rec, A, B, d


@pytest.mark.parametrize("cls,held", DEEP, ids=DEEP_IDS)
def test_held_out_shape_through_matmul(cls, held):
    rec, A, B, d = _whole(cls, held)
    info: list = []
    flags = {f.value: v for f, v in recorded_flags(rec.call).items()}
    got = tc.matmul(
        "h100-cublas-13.0",
        A,
        B,
        out_dtype=OUT_NP[cls.key.out],
        flags=flags,
        run_info=info,
        engine="compiled",
    )
    dec: Decision = info[0].decision
    assert dec.source == Source.RULE and dec.call_class == cls.name
    assert dec.recipe == held.recipe and dec.came_from == held.came_from
    same = np.ascontiguousarray(got).view(d.dtype) == d
    assert int(same.sum()) == held.reproduced


def _torch_call(torch, cls, A, B):
    """The recorded torch call of class `cls` on A, B (numpy), under the active mode."""
    from tensorcore_smt.intake import to_torch

    a, b = to_torch(A, "cpu"), to_torch(np.ascontiguousarray(B), "cpu")
    out = getattr(torch, {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32"}[cls.key.out])
    if cls.key.function == Function.SCALED_MM:
        one = torch.tensor(1.0)
        fast = dict(cls.key.flags)[Flag.FAST_ACCUM]
        return torch._scaled_mm(
            a,
            b.t().contiguous().t(),
            scale_a=one,
            scale_b=one,
            out_dtype=out,
            use_fast_accum=fast,
        )
    if cls.key.out != cls.key.a:
        return torch.mm(a, b, out_dtype=out)
    return torch.matmul(a, b)


@pytest.mark.parametrize("cls,held", SMALL, ids=SMALL_IDS)
def test_held_out_shape_through_the_torch_mode(cls, held):
    torch = pytest.importorskip("torch")
    from tensorcore_smt.intake import from_torch

    rec, A, B, d = _whole(cls, held)
    m = torch.backends.cuda.matmul
    before = m.allow_tf32
    m.allow_tf32 = rec.call.tf32
    try:
        with tc.emulate("h100-cublas-13.0") as mode:
            D = _torch_call(torch, cls, A, B)
    finally:
        m.allow_tf32 = before
    (dec,) = mode.decisions
    assert dec.source == Source.RULE and dec.call_class == cls.name and dec.recipe == held.recipe
    same = np.ascontiguousarray(from_torch(D)).view(d.dtype) == d
    assert int(same.sum()) == held.reproduced


def test_decisions_name_their_source():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    recorded = PROFILE.by_name("fp16").shapes[0]
    A = torch.from_numpy(rng.standard_normal((recorded.m, recorded.k)).astype(np.float16))
    B = torch.from_numpy(rng.standard_normal((recorded.k, recorded.n)).astype(np.float16))
    with tc.emulate("h100-cublas-13.0") as mode:
        A @ B  # a recorded shape
        A[:, :24] @ B[:24]  # aligned, not recorded: the rule
        A[:7, :13] @ B[:13, :5]  # unaligned: nothing recorded of its class
        torch.nn.functional.linear(A, B.t(), torch.zeros(recorded.n, dtype=torch.float16))
    src = [d.source for d in mode.decisions]
    assert src == [Source.RECORDED, Source.RULE, Source.DEFAULT, Source.DEFAULT]
    assert (
        mode.decisions[3].call_class is None and mode.decisions[3].key.function == Function.LINEAR
    )
    assert mode.decisions[2].call_class == "fp16" and "unaligned" in mode.decisions[2].reason
    assert mode.decisions[0].as_dict()["source"] == "recorded"
    with tc.emulate(
        "h100-cublas-13.0"
    ) as rows:  # M is no leading dimension: an odd M keeps the class
        A[:7] @ B
        A[:8] @ B
    odd, even = rows.decisions
    assert odd.source in (Source.RULE, Source.RECORDED) and "unaligned" not in odd.reason
    assert (odd.recipe, odd.came_from) == (even.recipe, even.came_from)
    with tc.emulate("hopper") as mode:  # an architecture, as before: no decisions
        A @ B
    assert mode.profile is None and mode.decisions == [] and mode.emulated


def test_default_is_what_the_architecture_computes():
    rng = np.random.default_rng(2)
    A = rng.standard_normal((5, 300)).astype(np.float32)
    B = rng.standard_normal((300, 3)).astype(np.float32)
    info: list = []
    got = tc.matmul("h100-cublas-13.0", A, B, run_info=info)
    assert info[0].decision.source == Source.DEFAULT
    want = tc.matmul("hopper", A, B, instr="fma.rn.f32", out_dtype=np.float32)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def _doc() -> dict:
    return json.loads(PROFILE.path.read_text())


@pytest.mark.parametrize(
    "edit,field",
    [
        (lambda d: d.pop("rule"), "rule: missing"),
        (lambda d: d.update(format=9), "format:"),
        (lambda d: d.update(name="H100"), "name:"),
        (lambda d: d["classes"][0].update(function="gemv"), "classes[0].function:"),
        (lambda d: d["classes"][1]["shapes"][0].update(m=0), "classes[1].shapes[0].m:"),
        (
            lambda d: d["classes"][2]["shapes"][3].update(recipe="hopper/serial[split_k=0]"),
            "classes[2].shapes[3].recipe:",
        ),
        (lambda d: d["classes"][0]["flags"].update(tf32=True), "classes[0].flags:"),
        (lambda d: d["classes"][3].update(layout="row"), "classes[3].layout:"),
        (lambda d: d["classes"].append(d["classes"][0]), "same call class"),
    ],
)
def test_malformed_profile_is_one_line(edit, field):
    doc = _doc()
    edit(doc)
    with pytest.raises(tc.UserError) as e:
        parse_profile(doc, "bad.json")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("profile bad.json: ") and field in msg


def test_cli_show_and_bad_profile(tmp_path):
    r = CliRunner().invoke(main, ["profile", "show", "h100-cublas-13.0"])
    assert r.exit_code == 0, r.output
    assert "class e4m3-f32out-fast:" in r.output and "held out" in r.output
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    r = CliRunner().invoke(main, ["profile", "show", str(bad)])
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1
    r = CliRunner().invoke(main, ["profile", "show", "h999"])
    assert r.exit_code == 2 and "no profile 'h999'" in r.output


def _class_with_a_miss():
    """A class and a held-out shape the profile says its rule does not reproduce."""
    for c in PROFILE.classes:
        for h in c.held_out:
            if not h.exact and h.reproduced < h.elements:
                return c, h
    return None, None


def test_cli_check_exit_codes():
    r = CliRunner().invoke(
        main,
        [
            "profile",
            "check",
            "h100-cublas-13.0",
            "--recordings",
            str(H100),
            "--class",
            "e4m3-f32out-fast",
            "--most",
            "2",
        ],
    )
    assert r.exit_code == 0, r.output
    assert "e4m3-f32out-fast" in r.output
    cls, held = _class_with_a_miss()
    assert cls is not None
    # the whole of that shape's recorded D: the miss the profile states must show
    rec = open_recording(GEMM, call_named(cls.recording))
    res = check_profile(PROFILE, H100, (cls.name,), None)
    assert not res[0].all_reproduced
    tags = {m.tag for m in res[0].misses}
    assert _tag(rec, held) in tags


def test_gemm_cli_profile_json():
    r = CliRunner().invoke(
        main,
        [
            "gemm",
            "--profile",
            "h100-cublas-13.0",
            "--call",
            "fp16-f32out",
            "--random",
            "16,16,4096",
            "--json",
            "--no-errors",
        ],
    )
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert (
        doc["decision"]["source"] == "recorded" and doc["decision"]["call_class"] == "fp16-f32out"
    )
    assert doc["runs"][0]["hypothesis"] == doc["decision"]["recipe"]
    r = CliRunner().invoke(
        main, ["gemm", "--profile", "h100-cublas-13.0", "--arch", "hopper", "--random", "4,4,4"]
    )
    assert r.exit_code == 2 and "not both" in r.output


@pytest.mark.slow
def test_every_recorded_call_replays_as_the_profile_states():
    """The whole replay: per class, the counts `profile check` finds equal those the
    profile states for its recorded and held-out shapes."""
    res = {r.name: r for r in check_profile(PROFILE, H100)}
    for c in PROFILE.classes:
        stated = sum(s.reproduced for s in c.shapes) + sum(h.reproduced for h in c.held_out)
        assert res[c.name].reproduced == stated, c.name
