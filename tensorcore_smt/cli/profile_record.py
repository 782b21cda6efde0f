"""`tcsmt profile record`: run a library recording plan through torch (cuBLAS on a CUDA
GPU, or torch's CPU kernels) and write the outputs to a folder, part by part
(hardware/library_record.py). The `profile` group is created here unless another module
registered it first; `record` joins it either way.

Exit codes: 0 the plan ran (or the time budget stopped it: the manifest says so); 2 bad
input (an unknown or unavailable oracle, a folder that already holds a recording); 130
Ctrl-C (the parts written stay readable; the manifest says interrupted).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..errors import ExitCode, UserError
from .base import interrupted
from .profile import profile_group


@click.command("record")
@click.option(
    "--oracle",
    required=True,
    metavar="NAME",
    help="torch:cuda (cuBLAS on this machine's GPU) or torch:cpu (torch's CPU kernels: the "
    "same code path, for a dry run).",
)
@click.option(
    "--out", "out", metavar="DIR", help="New folder for the recording (required to record)."
)
@click.option(
    "--plan",
    "plan_name",
    type=click.Choice(["default", "tiny", "extended"]),
    default="default",
    show_default=True,
    help="default: the whole plan (docs/profiles.md); extended: the default and 4,000 random "
    "calls; tiny: a few small calls of every class.",
)
@click.option("--seed", type=click.IntRange(0, 2**31 - 1), default=0, show_default=True)
@click.option(
    "--budget",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    metavar="SECONDS",
    help="Stop starting calls after this many seconds (the manifest says where it stopped).",
)
@click.option("--estimate", "estimate_only", is_flag=True, help="Print the plan and exit.")
def record_cmd(
    oracle: str,
    out: str | None,
    plan_name: str,
    seed: int,
    budget: float | None,
    estimate_only: bool,
) -> None:
    """Record what torch returns for a fixed plan of GEMM calls (every call class, a grid
    of shapes, batch-invariance series, held-out random calls) into DIR: a manifest with
    the versions and the GPU, and one JSON-lines file per part, written as each call
    returns. Inputs are regenerated from their seeds on any CPU (tcsmt's reader), so
    only a few output rows and columns of each call are stored."""
    from ..hardware.library_plan import PLANS, estimate_seconds
    from ..hardware.library_record import parse_oracle, record

    if out is None and not estimate_only:
        raise UserError("--out DIR is required to record (or give --estimate)")
    orc = None if estimate_only else parse_oracle(oracle)
    plan = PLANS[plan_name](seed)
    est = estimate_seconds(plan)
    sizes = ", ".join(f"{p.name} {len(p.probes)}" for p in plan.parts)
    click.echo(f"plan {plan_name}: {plan.calls} calls ({sizes})")
    click.echo(f"estimated GPU time on an H100: {est / 60:.1f} min ({est:.0f} s)")
    if estimate_only:
        sys.exit(int(ExitCode.OK))
    assert orc is not None and out is not None
    path = Path(out)
    if path.exists() and not path.is_dir():
        raise UserError(f"--out {path}: not a folder")
    if not path.parent.is_dir():
        raise UserError(f"--out {path}: folder {path.parent} does not exist")
    try:
        m = record(plan, plan_name, path, orc, budget, log=click.echo)
    except KeyboardInterrupt:
        interrupted(f"the parts written are in {path} (manifest status: interrupted)")
    click.echo(f"status {m['status']}: {m['seconds']} s, into {path}")
    sys.exit(int(ExitCode.OK))


profile_group.add_command(record_cmd)
