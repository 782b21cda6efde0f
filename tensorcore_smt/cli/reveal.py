"""`tcsmt reveal`: the order a library sums in, learnt from its outputs on pair probes.

Exit codes: 0 a tree was learnt; 1 the library's outputs are not those of one summation
tree; 2 bad input (an unknown or unavailable oracle, K, dtype or shape it cannot take);
130 Ctrl-C.
"""

from __future__ import annotations

import json
import sys

import click

from ..errors import ExitCode, UserError
from .base import fail, main
from .options import Ranged, given


def _shape(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    parts = text.split(",")
    try:
        m, n = (int(p) for p in parts)
    except ValueError:
        raise UserError(f"--shape {text!r}: expected M,N (two integers)") from None
    return m, n


@main.command("reveal")
@click.option(
    "--oracle",
    required=True,
    metavar="NAME",
    help="numpy:dot, numpy:gemv, numpy:matmul, torch:cpu, torch:cuda, h100:CALL (a "
    "recorded call: fp16-f32out, bf16-f32out, tf32, fp32) or model:HYP (tc.matmul of a "
    "GEMM hypothesis).",
)
@click.option(
    "--k",
    "k",
    type=int,
    metavar="K",
    required=True,
    help="Products per output element: 2 to 65536 for a GEMM or model:HYP (above 4096 one class of outputs, default shape 256,256), 2 to 4096 for numpy:dot and numpy:gemv.",
)
@click.option(
    "--dtype",
    metavar="FMT",
    default="fp32",
    show_default=True,
    help="Input format: fp32, fp16 or bf16 (h100:CALL: the call's own).",
)
@click.option(
    "--shape",
    default=None,
    metavar="M,N",
    help="Output shape of the GEMM (GEMV: M rows) asked; default K,K.",
)
@click.option(
    "--seed",
    type=Ranged("seed", int),
    metavar="INT",
    default=0,
    show_default=True,
    help="Seed of the random check.",
)
@click.option("--no-check", is_flag=True, help="Skip the check on random inputs.")
@click.option(
    "--check-outputs",
    type=click.IntRange(1, 1 << 26),
    default=10_000,
    show_default=True,
    metavar="N",
    help="Outputs on discriminating inputs (wide exponent ranges, cancellation, "
    "subnormals) of each class compared bit for bit; `reproduced` is "
    "claimed from 10000 on.",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable report.")
def reveal_cmd(
    oracle: str,
    k: int,
    dtype: str,
    shape: str | None,
    seed: int,
    no_check: bool,
    check_outputs: int,
    as_json: bool,
) -> None:
    """Learn the accumulation trees of a library's dot, GEMV or GEMM from its outputs on
    cancellation probes (Xie et al., USENIX ATC 2025), one per class of output positions
    that sum alike, name the GEMM hypothesis that sums in each where a schedule expresses
    it, and check them on random inputs, bit for bit.

    Exit 0: trees were learnt; 1: the outputs are not those of one summation tree per
    class.
    """
    from ..order import reveal
    from ..order.tree import NotATree, deep

    if no_check and given("check_outputs"):
        raise UserError(
            "--check-outputs sizes the check that --no-check skips; give one or the other"
        )

    try:
        r = reveal(
            oracle,
            k,
            dtype,
            _shape(shape),
            seed=seed,
            check=not no_check,
            check_outputs=check_outputs,
        )
    except NotATree as e:
        fail(str(e), ExitCode.REFUTED)
    except ValueError as e:
        if isinstance(e, UserError):
            raise
        fail(str(e), ExitCode.REFUTED)
    data = r.to_json()
    if as_json:
        with deep(r.k):
            click.echo(json.dumps(data))
        sys.exit(int(ExitCode.OK))
    shape_text = f"{r.shape[0]} x {r.shape[1]}" if r.shape else "default"
    click.echo(f"oracle      {r.oracle} ({r.dtype} inputs, K={r.k}, shape {shape_text})")
    many = len(r.classes) > 1
    for i, (c, cj) in enumerate(zip(r.classes, data["classes"])):
        if many:
            click.echo(f"class {i}     {c.outputs} output(s) in {len(c.blocks)} block(s)")
        click.echo(f"tree        {cj['tree_text']}")
        if c.hypothesis:
            click.echo(f"hypothesis  {c.hypothesis} (instr {c.instr})")
        else:
            click.echo("hypothesis  none")
        if cj["arithmetic_text"]:
            click.echo(f"arithmetic  {cj['arithmetic_text']}")
        if c.checked_outputs:
            if c.hypothesis_reproduced is not None:
                ok = "yes" if c.hypothesis_reproduced else "no"
                click.echo(
                    f"hypothesis  reproduces {ok}: {c.hypothesis_checked} output(s), "
                    "tc.matmul, bit for bit"
                )
            word = {True: "yes", False: "no", None: "not claimed"}[c.reproduced]
            click.echo(f"reproduced  {word}: {c.reason}")
        elif c.reason:
            click.echo(f"reproduced  no: {c.reason}")
    click.echo(f"calls       {r.oracle_calls} oracle call(s), {r.seconds:.3f} s")
    if r.checked_outputs:
        c = r.check_shape
        calls = (
            f"{r.check_calls} library call(s) on discriminating inputs"
            if r.check_calls
            else "the recorded random call"
        )
        click.echo(
            f"checked     {r.checked_outputs} output(s) of {calls} of {c[0]} x {c[1]} x {c[2]}"
        )
    if r.checked_outputs or r.reproduced is False:
        word = {True: "yes", False: "no", None: "not claimed"}[r.reproduced]
        click.echo(f"all         reproduced {word}" + (f": {r.reason}" if many else ""))
    if r.note:
        click.echo(f"note        {r.note}")
    sys.exit(int(ExitCode.OK))
