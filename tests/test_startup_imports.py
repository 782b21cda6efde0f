"""What importing the command line loads: the heavy libraries (torch, the solvers, dask,
rich) and the instruction catalogue wait for the commands that need them. Checked in a
fresh interpreter through sys.modules (behaviour, not timing); a command that reads one
preset builds that preset alone."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("torch", "z3", "cvc5", "bitwuzla", "dask", "distributed", "rich", "pysmt")


def _loaded(code: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport json, sys\n"
         "from tensorcore_smt.spec import catalogue\n"
         f"print(json.dumps({{'mods': [m for m in {HEAVY!r} if m in sys.modules], "
         "'built': catalogue.build_presets.cache_info().currsize,"
         "'one': catalogue.build_one.cache_info().currsize}))"],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_importing_the_cli_loads_no_heavy_library_and_builds_no_catalogue():
    got = _loaded("import tensorcore_smt.cli")
    assert got == {"mods": [], "built": 0, "one": 0}


def test_the_package_names_load_on_first_use():
    got = _loaded(
        "import tensorcore_smt as tc\n"
        "assert tc.PRESETS['volta'].name == 'volta'\n"
        "assert tc.api.FORMAT_DTYPES and callable(tc.matmul) and tc.Format.FP16\n"
        "from tensorcore_smt import simulate, UserError\n"
        "try:\n    tc.no_such_name\nexcept AttributeError:\n    pass\nelse:\n    raise SystemExit(1)"
    )
    # reading one preset builds that one alone, not the whole catalogue
    assert got["built"] == 0 and got["one"] == 1 and "torch" not in got["mods"]
