"""The commands of `tcsmt`, as data: for each name, the module under tensorcore_smt.cli
that defines it, the module attribute holding the click command, and its summary (the
first sentence of its help, as `tcsmt --help` lists it).

The root group (base.LazyGroup) reads this table to list the commands and imports a
command's module only when that command runs or its help is asked, so `tcsmt --help`
and a light command do not pay for the libraries of the heavy ones (solvers, dask,
torch). tests/test_cli_lazy.py checks that every entry names the command its module
defines, with the summary of that command's own help. Standard library only.
"""

from __future__ import annotations

from typing import NamedTuple


class Entry(NamedTuple):
    """Where one command lives and what `tcsmt --help` says of it."""

    module: str
    """Module under tensorcore_smt.cli (bound, solve, ...)."""
    attribute: str
    """The module's attribute that is the click command."""
    summary: str
    """The first sentence of the command's help (click's short help, untruncated)."""
    extends: tuple[str, ...] = ()
    """Modules that add subcommands to this group (imported with it)."""


COMMANDS: dict[str, Entry] = {
    "bound": Entry(
        "bound",
        "bound_cmd",
        'Bound the worst error of HYPOTHESIS over an input class: an interval [L, U] whose L a witness attains (re-run on the concrete model, measured with exact rationals) and whose U a solver proves (unsat of "measure > U", confirmed by a second solver).',
    ),
    "diff": Entry(
        "solve",
        "diff",
        "Find inputs on which two variants of one instruction, or two GEMM hypotheses ARCH[...]/SCHEDULE[...] (one output element of a depth --k product), give different bits.",
    ),
    "exact": Entry(
        "exact",
        "exact_cmd",
        "The largest running accumulator an instruction adds P-bit integer slices into exactly (proved), the witness just above it, and the K up to which a serial chain of the instruction is exact (by induction, stated in the report), with a chain witness re-run through tc.matmul.",
    ),
    "export": Entry(
        "solve",
        "export",
        "Write a query as SMT-LIB2 that z3, cvc5 and bitwuzla all read.",
    ),
    "find": Entry(
        "find",
        "find_cmd",
        "Find a verified discriminating input (or a proof) for a property on an architecture.",
    ),
    "fit": Entry(
        "identify",
        "fit_cmd",
        "The hypotheses of the space that reproduce recorded rows (a, b, c, d: JSONL, vector JSON or CSV), grouped into classes the rows cannot tell apart, and the next probe.",
    ),
    "gemm": Entry(
        "gemm",
        "gemm",
        "Emulate D = A*B (+ C) as a GPU kernel computes it, and measure its error.",
    ),
    "hardware": Entry(
        "hardware",
        "hardware_group",
        "The hardware campaign: probes, random validation and identify on a real GPU, with what the silicon returned under results/hardware/<gpu>/ (docs/hardware.md).",
    ),
    "identify": Entry(
        "identify",
        "identify_cmd",
        "Learn which model of the space a unit follows, asking it the inputs that split the surviving hypotheses (oracles: variant:EXPR, file:ROWS, cmd:PROGRAM, cuda; with --gemm: variant:ARCH/SCHEDULE, cmd:PROGRAM, torch[:fast], numpy:matmul, torch:cpu).",
    ),
    "invariance": Entry(
        "invariance",
        "invariance_cmd",
        "Batch invariance of a torch call: the M at which row 0 of D = A[:M] @ B changes its recipe, each change with a witness input whose row 0 changes bits (re-run through tc.matmul under both recipes), or with --against whether every M gives the same bits under two profiles.",
    ),
    "list": Entry(
        "listing",
        "list_",
        "List architectures, properties, solvers, model parameters or GEMM schedules.",
    ),
    "probe": Entry(
        "vectors",
        "probe",
        "Write a CUDA (NVIDIA) or HIP (AMD MFMA) program that runs a vector file on the GPU, or check its output.",
    ),
    "profile": Entry(
        "profile",
        "profile_group",
        "Library profiles: which GEMM recipe a GPU's BLAS library runs for each torch call class and shape (profiles/*.json; docs/profiles.md).",
        extends=("profile_record",),
    ),
    "prove": Entry(
        "solve",
        "prove",
        "Prove two variants (or two GEMM hypotheses ARCH[...]/SCHEDULE[...]) give the same bits on every input (subject to the constraints).",
    ),
    "reveal": Entry(
        "reveal",
        "reveal_cmd",
        "Learn the accumulation trees of a library's dot, GEMV or GEMM from its outputs on cancellation probes (Xie et al., USENIX ATC 2025), one per class of output positions that sum alike, name the GEMM hypothesis that sums in each where a schedule expresses it, and check them on random inputs, bit for bit.",
    ),
    "simulate": Entry(
        "simulate",
        "simulate",
        "Bit-exact output of one instruction's dot product, or of every row of a file.",
    ),
    "validate": Entry(
        "validate",
        "validate_cmd",
        "Compare ARCH with an oracle on random rows (or a file's), chunked over Dask workers.",
    ),
    "vectors": Entry(
        "vectors",
        "vectors_group",
        "Hardware test-vector files (JSON or CSV): show, merge, convert, predict.",
    ),
}
"""Every command of the root group, by name."""
