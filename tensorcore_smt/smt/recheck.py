"""A solver's witness re-run on the concrete interpreter: the query's own formula decides
whether the witness is in the class and meets the goal."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..bv.concrete import CONCRETE
from ..bv.core import BV
from ..formats import format_hex

if TYPE_CHECKING:
    from .definition import Query


@dataclass
class Recheck:
    """A witness re-run on the concrete interpreter."""

    inputs: dict[str, int]
    outputs: tuple[int, int]
    constraint_ok: bool
    goal_ok: bool
    solver_outputs: tuple[int | None, int | None]
    emulated: tuple[int, int] | None = None  # the outputs by the query's second path

    @property
    def reproduces(self) -> bool:
        agree = all(s is None or s == o for s, o in zip(self.solver_outputs, self.outputs))
        same = self.emulated is None or tuple(self.emulated) == tuple(self.outputs)
        return self.constraint_ok and self.goal_ok and agree and same


def recheck(q: Query, model: dict[str, int]) -> Recheck:
    """Re-run the solver's inputs on the concrete interpreter and check the goal holds."""
    inputs = {o.name: BV.const(CONCRETE, model.get(o.name, 0), o.width) for o in q.operands}
    built = q.build(inputs)
    outs = (int(built.outputs[0].v), int(built.outputs[1].v))
    solver_outs = tuple(model.get(n) for n in q.output_names)
    values = {k: int(v.v) for k, v in inputs.items()}
    return Recheck(
        values,
        outs,
        bool(built.constraint.v),
        bool(built.goal.v),
        solver_outs,
        q.emulated(values),
    )


def hex_inputs(q: Query, values: dict[str, int]) -> dict[str, str]:
    return {o.name: format_hex(values[o.name], o.fmt) for o in q.operands}
