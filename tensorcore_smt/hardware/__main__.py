"""`python -m tensorcore_smt.hardware ...`: the `tcsmt hardware ...` commands, for a GPU
machine where the package is on PYTHONPATH but not installed (`make hardware`). An entry
point, not a module of the layer: it is the one place hardware/ reaches up to cli/."""

from ..cli.hardware import hardware_group

hardware_group.main(prog_name="python -m tensorcore_smt.hardware")
