"""README.md stays a front page: at most 250 lines, and its first code block holds the two
commands from a fresh clone to a first result and the one that runs the tests (the
detail lives in docs/)."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_is_at_most_250_lines():
    assert len(README.read_text().splitlines()) <= 250


def test_first_code_block_sets_up_runs_and_tests():
    first = re.search(r"```sh\n(.*?)```", README.read_text(), re.S)
    assert first is not None
    commands = [line.split("#")[0].strip() for line in first.group(1).splitlines()]
    assert commands == ["make install && make demo", "make test"]


def test_make_targets_of_the_first_block_exist():
    makefile = (README.parent / "Makefile").read_text()
    for target in ("install", "demo", "test"):
        assert re.search(rf"^{target}:", makefile, re.M), target
