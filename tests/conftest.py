"""Test-session settings shared by every test file."""

import os

import pytest

# Calls that leave `engine` out run the numpy interpreter in tests (engine/choice.py), so a
# test of the vector interpreter tests it even where compiled kernels are cached; the
# compiled engine's tests ask for it by name.
os.environ.setdefault("TCSMT_ENGINE", "numpy")


def _torch_matmul_flags():
    """torch's process-wide matmul flags (None without torch)."""
    import sys

    torch = sys.modules.get("torch")
    if torch is None:
        return None
    m = torch.backends.cuda.matmul
    return (
        torch.get_float32_matmul_precision(),
        m.allow_tf32,
        m.allow_fp16_reduced_precision_reduction,
        m.allow_bf16_reduced_precision_reduction,
    )


TORCH_DEFAULTS = ("highest", False, True, True)
"""torch's defaults for the flags above (before torch is first imported)."""


@pytest.fixture(autouse=True)
def _torch_flags_unchanged(request):
    """A test (or the code it runs) that changes torch's matmul flags and does not put
    them back fails, and the flags are restored: later tests in the worker read them
    (the torch mode and library profiles decide by them)."""
    before = _torch_matmul_flags() or TORCH_DEFAULTS
    yield
    after = _torch_matmul_flags()
    if after is None or after == before:
        return
    import torch

    m = torch.backends.cuda.matmul
    torch.set_float32_matmul_precision(before[0])
    m.allow_tf32 = before[1]
    m.allow_fp16_reduced_precision_reduction = before[2]
    m.allow_bf16_reduced_precision_reduction = before[3]
    pytest.fail(f"torch's matmul flags changed by this test: {before} -> {after}")
