"""`python -m tensorcore_smt ...`: the `tcsmt` command line where the package is on
PYTHONPATH but not installed (a GPU machine: `make hardware` runs
`python -m tensorcore_smt hardware run`)."""

from .cli import main

main(prog_name="python -m tensorcore_smt")
