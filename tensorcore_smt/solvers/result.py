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
    `reason` says why the answer is unknown (timeout, out of memory, crash, ...)."""

    solver: str
    answer: Answer
    seconds: float
    version: str = ""
    model: dict[str, int] = field(default_factory=dict)
    reason: str = ""

    def to_json(self) -> dict:
        out = {
            "solver": self.solver,
            "version": self.version,
            "answer": self.answer.value,
            "seconds": round(self.seconds, 3),
        }
        if self.reason:
            out["reason"] = self.reason
        return out
