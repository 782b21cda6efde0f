"""What the H100 returned for the property probes, the public cases and the GEMM recordings
(results/hardware/h100/), replayed against the current model.

Every probe output is a real answer of the silicon: the preset must stay among the
variants that explain every vector. The public cases' GPU answers must stay what the
preset predicts. The GEMM recordings keep only D: the inputs are regenerated from their
recipe, and must be the ones the GPU multiplied (their digest is in the recording).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tensorcore_smt.hardware.cases import CASES, predictions
from tensorcore_smt.hardware.probes import source_of
from tensorcore_smt.hardware.recordings import CALLS, Kind, digest, inputs
from tensorcore_smt.probe.check import check_output
from tensorcore_smt.validation.vectors import load

RUN = Path(__file__).resolve().parents[1] / "results" / "hardware" / "h100"
VECTORS = RUN.parent / "vectors"
# the floating-point probes of the second session, the integer ones of the third
OUTPUTS = sorted(
    [*(RUN / "probes").glob("*.out.txt"), *(RUN / "integer" / "probes").glob("*.out.txt")]
)


def test_every_vector_file_was_probed():
    files = sorted(VECTORS.glob("*/*.vectors.json"))
    names = {f"{f.parent.name}__{f.name.removesuffix('.vectors.json')}" for f in files}
    assert names == {o.name.removesuffix(".out.txt") for o in OUTPUTS}
    assert len(names) == 98


@pytest.mark.parametrize("out", OUTPUTS, ids=lambda p: p.name.removesuffix(".out.txt"))
def test_probe_output_is_explained_by_the_preset(out):
    instr, prop = out.name.removesuffix(".out.txt").split("__")
    vf = load(VECTORS / instr / f"{prop}.vectors.json")
    rep = check_output(vf, out.read_text())
    assert rep.ok, rep.unexplained
    assert "hopper" in rep.survivors


def test_probe_sources_of_one_instruction_are_distinct_files():
    # The run before this fix wrote every probe of an instruction to one .cu (with_suffix
    # cut the name at the instruction's last dot), so all its probes ran one program.
    stems = [Path("b") / f"m16n8k16.f32.f16.f16.f32__{p}" for p in ("carry-bits", "ordering")]
    srcs = {source_of(s) for s in stems}
    assert len(srcs) == 2 and all(
        s.name.endswith("__carry-bits.cu") or s.name.endswith("__ordering.cu") for s in srcs
    )


def test_public_cases_gpu_answers_are_the_presets():
    recorded = {r["case"]: r for r in json.loads((RUN / "cases.json").read_text())}
    assert set(recorded) == {c.name for c in CASES}
    for case in CASES:
        r = recorded[case.name]
        assert predictions(case)["hopper"] == r["gpu"], case.name
    # DeepGEMM #37: mma.sync passes c through, the FP8 wgmma cuts it to E8M13.
    assert recorded["deepgemm-37-mma"]["gpu"] == "0x40403017"
    assert recorded["deepgemm-37-wgmma"]["gpu"] == "0x40403000"


@pytest.mark.parametrize("call", CALLS, ids=lambda c: c.name)
def test_recording_inputs_regenerate(call):
    z = np.load(RUN / "gemm" / f"{call.name}.npz")
    meta = json.loads(str(z["meta"]))
    assert not meta["errors"]
    checked = 0
    for entry in meta["shapes"]:
        kind, m, n, k = entry["shape"].split("_")
        m, n, k = int(m), int(n), int(k)
        if m * k > 256 * 1024 and kind == "random":
            continue  # the large ones take seconds each; the recipe is the same
        a, b = inputs(Kind(kind), call.fmt, m, n, k, meta["seed"])
        assert digest(a, b) == entry["digest"], entry["shape"]
        checked += 1
    assert checked >= 20
