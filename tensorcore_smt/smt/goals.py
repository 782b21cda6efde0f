"""What a query asks of its variants: the goals, and the reference that is not a variant."""

from __future__ import annotations

from enum import Enum


class Goal(Enum):
    """What a query asks of its two variants X and Y."""

    DIFFER = "differ"  # sat: inputs where X and Y give different bits
    EQUIVALENT = "equivalent"  # unsat: X and Y agree on every input (same formula as DIFFER)
    COMPARE_ERRORS = "compare-errors"  # sat: inputs where |X - exact| < |Y - exact|
    # sat: inputs u <= u_2 (the groups in Query.grows grow, the rest are equal) with
    # X(u_2) < X(u); unsat: X is monotone in that sense (Fasi et al. §III-D5)
    NON_MONOTONE = "non-monotone"
    # sat: inputs where X's error (Query.measure, against the exact result or against Y)
    # exceeds Query.threshold; unsat: the threshold bounds X's error on every input
    ERROR_EXCEEDS = "error-exceeds"

    @property
    def one_variant(self) -> bool:
        """Whether the goal asks about one variant X (on two inputs), not two."""
        return self == Goal.NON_MONOTONE

    @property
    def meaning_of_sat(self) -> str:
        return {
            Goal.DIFFER: "inputs on which the variants' outputs differ",
            Goal.EQUIVALENT: "a counterexample: inputs on which the variants differ",
            Goal.COMPARE_ERRORS: "inputs on which the first variant's error is smaller",
            Goal.NON_MONOTONE: "inputs u <= u_2 on which X(u_2) < X(u)",
            Goal.ERROR_EXCEEDS: "inputs on which X's error exceeds the threshold",
        }[self]

    @property
    def meaning_of_unsat(self) -> str:
        return {
            Goal.COMPARE_ERRORS: "X is never more accurate than Y",
            Goal.NON_MONOTONE: "X never decreases when its inputs grow as the relation says",
            Goal.ERROR_EXCEEDS: "the threshold bounds X's error on every input",
        }.get(self, "X and Y equal on every input")


EXACT = "exact"  # the reference of an error-exceeds query that is not a second variant
