"""The figure of `tcsmt gemm --plot`: error against the exact product, as cumulative
distributions (one GEMM) or median and max against K (--k-sweep). The title names the
shape and the formats; a curve drawn over an identical one says so in the legend."""

from __future__ import annotations

import numpy as np

from ..gemm.measure import Measured

SweepPoint = tuple[int, Measured | None, str]
"""One K of a sweep: K, its run (None when skipped) and why it was skipped."""


def _same_as(curves: list[tuple[str, np.ndarray]]) -> list[str | None]:
    """For each curve, the name of an earlier curve with the same values (it hides the
    earlier one when drawn), else None."""
    out: list[str | None] = []
    for i, (_, y) in enumerate(curves):
        match = None
        for name, z in curves[:i]:
            if y.shape == z.shape and np.array_equal(y, z, equal_nan=True):
                match = name
                break
        out.append(match)
    return out


def _label(name: str, twin: str | None) -> str:
    return name if twin is None else f"{name} (same as {twin}: drawn over it)"


def draw(path: str, fmt: str, title: str, runs: list[list[SweepPoint]], sweep: bool) -> None:
    """Write the figure of `runs` (one list of sweep points per hypothesis; a single
    point each without --k-sweep) to `path` in image format `fmt`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    if sweep:
        curves = []
        for series in runs:
            name = series[-1][1].run.hypothesis.describe()
            ks = np.array([k for k, _, _ in series], dtype=float)
            med = np.array([m.exact.median_ulps if m and m.exact else np.nan for _, m, _ in series])
            top = np.array([m.exact.max_ulps if m and m.exact else np.nan for _, m, _ in series])
            curves.append((name, ks, med, top))
        twins = _same_as([(n, np.concatenate([med, top])) for n, _, med, top in curves])
        for (name, ks, med, top), twin in zip(curves, twins):
            label = _label(name, twin)
            (line,) = ax.plot(ks, med, marker="o", label=f"{label} median")
            ax.plot(ks, top, marker="^", ls="--", color=line.get_color(), label=f"{name} max")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("K")
        ax.set_yscale("symlog", linthresh=0.5)
        ax.set_ylim(bottom=0)
        ax.set_ylabel("error vs exact product (ulps of the output)")
    else:
        curves = []
        for series in runs:
            m = series[-1][1]
            if m is None or m.exact is None:
                continue
            u = np.sort(m.exact.ulps[np.isfinite(m.exact.ulps)].reshape(-1))
            curves.append((m.run.hypothesis.describe(), u))
        for (name, u), twin in zip(curves, _same_as(curves)):
            frac = np.arange(1, len(u) + 1) / max(len(u), 1)
            ax.step(u, frac, where="post", label=_label(name, twin))
        ax.set_xscale("symlog", linthresh=1)
        ax.set_xlim(left=0)
        ax.set_xlabel("error vs exact product (ulps of the output)")
        ax.set_ylabel("fraction of outputs with at most this error")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=120, format=fmt)
    finally:
        plt.close(fig)
