"""The feature matrix: deduced from the library's witnesses, beside FTTN Table IV,
Valpey et al. 2025 and MMA-Sim Table III, with every disagreement explained."""

from __future__ import annotations

import json
from pathlib import Path

from tensorcore_smt.api import simulate_one
from tensorcore_smt.smt import features
from tensorcore_smt.spec.presets import parse_variant

RESULTS = Path(__file__).resolve().parent.parent / "results"


def test_volta_row_matches_fasi_valpey_and_fttn():
    cells = features.deduce("volta", RESULTS)
    got = {k: cells[k].value for k in ("extra_bits", "rounding", "width", "carry_bits", "fp16_out")}
    assert got == {
        "extra_bits": "0",  # FTTN Table IV: V100 no extra bit; MMA-Sim F=23
        "rounding": "truncate",  # Valpey et al. 2025 §4.2
        "width": "4",
        "carry_bits": "3",  # Valpey et al. 2025 §4.3
        "fp16_out": "RNE",
    }
    assert cells["extra_bits"].vectors > 0


def test_nvidia_generations_differ_in_extra_bits_and_width():
    rows = {a: features.deduce(a, RESULTS) for a in ("volta", "ampere", "hopper")}
    assert [rows[a]["extra_bits"].value for a in rows] == ["0", "1", "2"]
    assert [rows[a]["width"].value for a in rows] == ["4", "8", "16"]


def _as_silicon(variant: str):
    """An observer that answers as the hypothesis `variant` would."""

    def observe(arch, instr, vec):
        return simulate_one(parse_variant(variant).params(instr), vec.a, vec.b, vec.c)

    return observe


def test_deduction_follows_the_observations_not_the_preset():
    """Outputs of a different unit (MMA-Sim's Turing reading, F=24) turn the deduced
    extra bits to 1; RZ fp16 outputs turn the rounding column to RZ."""
    cells = features.deduce("turing", RESULTS, _as_silicon("turing[F=24]"))
    assert cells["extra_bits"].value == "1"
    cells = features.deduce("volta", RESULTS, _as_silicon("volta[rounding=rz]"))
    assert cells["fp16_out"].value == "RZ"


def test_outputs_no_candidate_explains_are_reported():
    cells = features.deduce("volta", RESULTS, _as_silicon("volta[F=30]"))
    assert cells["extra_bits"].value.startswith("none of ")


def test_missing_observations_are_skipped():
    cells = features.deduce("volta", RESULTS, lambda arch, instr, vec: None)
    assert cells["extra_bits"].vectors == 0
    assert set(cells["extra_bits"].survivors) == set(cells["extra_bits"].candidates)


def test_every_disagreement_with_the_papers_is_explained():
    comps = features.compare(features.build(RESULTS))
    assert comps
    unexplained = [c for c in comps if not c.agrees and not c.explanation]
    assert not unexplained, unexplained


def test_committed_matrix_is_current():
    """results/features.json is what the committed vectors give today."""
    fresh = features.to_json(features.build(RESULTS), features.build_sparse(RESULTS))
    stored = json.loads((RESULTS / "features.json").read_text())
    assert stored == json.loads(json.dumps(fresh))


def test_least_feature_shows_only_what_the_vectors_decide():
    """A `least` column (carry bits) shows the first survivor above the largest refuted
    candidate, with any smaller survivor the vectors could not refute beside it, and
    every survivor when none was refuted (never a value no vector decided)."""
    order = ["2", "3", "4", "5", "6"]
    assert features._least(order, ["4", "5", "6"]) == ["4"]
    assert features._least(order, ["2", "4", "5", "6"]) == ["2", "4"]
    assert features._least(order, order) == order
    assert features._least(order, ["4", "5"]) == ["4", "5"]
