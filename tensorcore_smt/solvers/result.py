"""What a solver run returns: the answer, the model, who answered and how long it took."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class Answer(Enum):
    """A solver's answer to `(check-sat)`."""

    SAT = "sat"
    UNSAT = "unsat"
    UNKNOWN = "unknown"

    @property
    def definite(self) -> bool:
        return self is not Answer.UNKNOWN


@dataclass
class SolveResult:
    """One solver's answer. `model` maps declared names to values (sat only);
    `reason` says why the answer is unknown (timeout, out of memory, crash, ...).

    `seconds` is the wall time of the whole run as the caller saw it (the child process's
    start-up, the solver's import and parsing included); `solver_s` is the solver's own
    query time, from handing it the SMT-LIB text to its `check-sat` answer (parse +
    check), measured inside the child: None when the run ended without reporting it
    (killed at the limit, crashed)."""

    solver: str
    answer: Answer
    seconds: float
    version: str = ""
    model: dict[str, int] = field(default_factory=dict)
    reason: str = ""
    solver_s: float | None = None

    def to_json(self) -> dict:
        out = {
            "solver": self.solver,
            "version": self.version,
            "answer": self.answer.value,
            "seconds": round(self.seconds, 3),
        }
        if self.solver_s is not None:
            out["solver_s"] = round(self.solver_s, 6)
        if self.reason:
            out["reason"] = self.reason
        return out
