"""Packaging: the data folders properties/, spaces/, schedules/ and archs/ sit beside the
package in the source tree and are installed inside it (tensorcore_smt/properties,
tensorcore_smt/spaces, tensorcore_smt/schedules, tensorcore_smt/archs), so a non-editable
`pip install .` carries them too. Everything else is in pyproject.toml."""

from setuptools import find_packages, setup

DATA = {
    "tensorcore_smt.properties": "properties",
    "tensorcore_smt.spaces": "spaces",
    "tensorcore_smt.schedules": "schedules",
    "tensorcore_smt.archs": "archs",
}

setup(
    packages=find_packages(include=["tensorcore_smt*"]) + list(DATA),
    package_dir=DATA,
    package_data={name: ["*.toml"] for name in DATA},
)
