"""The stop line of `identify` counts the survivors by proof: members proved equal to
their class's first, undecided (a solver said unknown), never asked; "one class left"
and exit 0 only when every member is proved equal, exit 3 otherwise. Unknown pairs are
asked once more with a longer time limit before the loop stops."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tensorcore_smt.cli import main
from tensorcore_smt.errors import ExitCode
from tensorcore_smt.identify import loop
from tensorcore_smt.identify.loop import RETRY_FACTOR, Identifier, member_status, standing
from tensorcore_smt.identify.oracle import make_oracle
from tensorcore_smt.identify.report import to_json, to_text
from tensorcore_smt.identify.space import resolve_space
from tensorcore_smt.smt.solve import Limits, Outcome, Verdict

HIDDEN = "volta[carry_bits=2]"


@pytest.fixture
def unknown_solver(monkeypatch):
    """Every solver question answered unknown; the time limits asked are recorded."""
    asked: list[tuple[str, float]] = []

    def fake(q, limits):
        asked.append((str(q.names if hasattr(q, "names") else q), limits.timeout))
        return Outcome(q, Verdict.UNKNOWN, None, seconds=0.0, note="fake unknown")

    monkeypatch.setattr(loop, "answer_query", fake)
    return asked


def _run(timeout: float = 0.5):
    space = resolve_space("volta", None, None)
    oracle = make_oracle(f"variant:{HIDDEN}", space.base, space.arch, space.instr)
    return Identifier(space, oracle, 200, Limits(timeout=timeout), max_questions=16).run()


def test_unknown_answers_leave_the_class_undecided_and_are_asked_again(unknown_solver):
    res = _run(0.5)
    assert len(res.classes) == 1 and len(res.classes[0]) > 1
    st = res.standing
    assert st == standing(res)
    assert st["classes"] == 1 and st["members"] == len(res.classes[0])
    assert st["undecided"] >= 1 and not st["established"]
    assert st["proved_equal"] + st["undecided"] + st["never_asked"] == st["members"] - 1
    # every unknown pair was asked twice: first 0.5 s, then RETRY_FACTOR times that
    limits = sorted({t for _, t in unknown_solver})
    assert limits == [0.5, 0.5 * RETRY_FACTOR]
    firsts = sum(1 for _, t in unknown_solver if t == 0.5)
    assert sum(1 for _, t in unknown_solver if t > 0.5) == firsts == st["undecided"]
    assert all("asked again with 2 s" in p.note for p in res.proofs if not p.by_construction)
    # the stop line never says "one class left" while a member is undecided
    assert res.stopped.startswith("not established, confirmed on 13 fresh rows; ")
    assert "one class left" not in to_text(res)
    head = to_text(res).splitlines()[1]
    assert (
        f"1 class of {st['members']} members: {st['proved_equal']} proved equal to its "
        f"first, {st['undecided']} undecided (a solver said unknown), "
        f"{st['never_asked']} never asked"
    ) in head
    doc = to_json(res)
    assert doc["standing"] == st
    kinds = [s["standing"] for s in doc["survivors"]]
    assert kinds[0] == "first of its class"
    assert kinds.count("undecided") == st["undecided"]
    assert kinds.count("proved equal") == st["proved_equal"]


def test_undecided_members_exit_3_with_the_counts_in_json(unknown_solver):
    r = CliRunner().invoke(
        main,
        ["identify", "--arch", "volta", "--oracle", f"variant:{HIDDEN}", "--timeout", "0.5",
         "--json"],
    )  # fmt: skip
    assert r.exit_code == ExitCode.INCOMPLETE, r.output
    doc = json.loads(r.stdout)
    st = doc["standing"]
    assert st["undecided"] >= 1 and st["established"] is False
    assert doc["stopped"].startswith("not established")


def test_a_member_proved_through_another_counts_as_proved(monkeypatch):
    """Unsat between the first and B and between B and C proves C equal to the first
    (the proofs chain); an unknown between the first and D leaves D undecided."""
    space = resolve_space("volta", None, None)
    oracle = make_oracle(f"variant:{HIDDEN}", space.base, space.arch, space.instr)
    res = loop.Result(space, oracle.spec)
    a, b, c, d = (space.make("fda", {"carry_bits": 2, "F": f}) for f in (20, 21, 22, 23))
    res.classes = [[a, b, c, d]]
    res.proofs = [
        loop.Proof(a, b, Verdict.UNSAT, ["z3", "cvc5"], 1.0),
        loop.Proof(b, c, Verdict.UNSAT, ["z3", "cvc5"], 1.0),
        loop.Proof(a, d, Verdict.UNKNOWN, [], 1.0),
    ]
    assert member_status(res) == {b: loop.PROVED, c: loop.PROVED, d: loop.UNDECIDED}
    st = standing(res)
    assert (st["proved_equal"], st["undecided"], st["never_asked"]) == (2, 1, 0)
    assert not st["established"]
    res.proofs[2] = loop.Proof(a, d, Verdict.UNSAT, ["z3"], 1.0)
    assert standing(res)["established"]
    res.proofs.pop()
    st = standing(res)
    assert (st["never_asked"], st["established"]) == (1, False)
