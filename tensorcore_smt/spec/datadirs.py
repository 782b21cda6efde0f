"""Where the data folders shipped with the package (properties/, spaces/, schedules/, archs/,
profiles/) are."""

from __future__ import annotations

from pathlib import Path


def data_dir(name: str) -> Path:
    """The data folder `name`: inside the package when installed from a wheel
    (setup.py maps it to tensorcore_smt/NAME), beside the package in a source checkout
    or an editable install (NAME/ at the repository root)."""
    here = Path(__file__).resolve().parent.parent
    inside = here / name
    return inside if inside.is_dir() else here.parent / name
