"""Packaging: the data folders properties/, spaces/, schedules/, archs/ and profiles/ sit
beside the package in the source tree and are installed inside it (tensorcore_smt/properties,
tensorcore_smt/spaces, tensorcore_smt/schedules, tensorcore_smt/archs,
tensorcore_smt/profiles), so a non-editable `pip install .` carries them too. Everything else
is in pyproject.toml."""

from setuptools import find_packages, setup

DATA = {
    "tensorcore_smt.properties": "properties",
    "tensorcore_smt.spaces": "spaces",
    "tensorcore_smt.schedules": "schedules",
    "tensorcore_smt.archs": "archs",
    "tensorcore_smt.profiles": "profiles",
}
PATTERNS = {"tensorcore_smt.profiles": ["*.json"]}

setup(
    packages=find_packages(include=["tensorcore_smt*"]) + list(DATA),
    package_dir=DATA,
    package_data={name: PATTERNS.get(name, ["*.toml"]) for name in DATA},
)
