"""Test-session settings shared by every test file."""

import os

# Calls that leave `engine` out run the numpy interpreter in tests (engine/choice.py), so a
# test of the vector interpreter tests it even where compiled kernels are cached; the
# compiled engine's tests ask for it by name.
os.environ.setdefault("TCSMT_ENGINE", "numpy")
