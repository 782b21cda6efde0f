"""CUDA probe programs for vector files, and reading their output back.

- `layouts`: PTX fragment layouts as data (which thread, register and bits hold each
  element of A, B, C/D) for every mma and wgmma form the presets use;
- `cuda`: generation of a self-contained program (inline PTX) for a vector file;
- `check`: parsing the program's output and matching it against each variant.
"""

from .check import CheckReport, VectorResult, check_output, parse_output, report_text
from .cuda import Target, choose_target, generate, nvcc_command, parse_sm, requirement
from .layouts import Fragment, Layout, SharedLayout, all_layouts, layout_for

__all__ = [
    "CheckReport",
    "Fragment",
    "Layout",
    "SharedLayout",
    "Target",
    "VectorResult",
    "all_layouts",
    "check_output",
    "choose_target",
    "generate",
    "layout_for",
    "nvcc_command",
    "parse_output",
    "parse_sm",
    "report_text",
    "requirement",
]
