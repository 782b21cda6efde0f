"""Files and formats of `tcsmt gemm` and the GEMM options of the solver commands: the
input format (--dtype), .npy matrices in, D and plots out. Every bad file is one
`UserError` line naming the option; outputs are written to exactly the path given."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..bv.dtypes import UNSIGNED
from ..errors import UserError
from ..formats import Format
from ..intake import DTYPE_FORMAT, DTYPE_INTEGER, FORMAT_DTYPE
from .base import check_out

DTYPE_HELP = "the input format, which picks the instruction libraries run (default fp16)"
"""How --dtype is described wherever it selects a GEMM's instruction."""


def input_format(text: str | None, option: str = "--dtype") -> Format | None:
    """The input format `text` names (None when the option is left out); UserError for an
    empty or unknown name, or a format no GEMM takes."""
    if text is None:
        return None
    try:
        f = Format.parse(text) if text.strip() else None
    except ValueError:
        f = None
    if f is None or not (f in FORMAT_DTYPE or f.spec.is_integer):
        known = ", ".join(sorted(x.spec.name for x in FORMAT_DTYPE))
        raise UserError(f"{option}: {text!r} is not an input format; allowed: {known}")
    return f


def random_fits(shape: str, M: int, N: int, K: int, fa: Format, fb: Format, hyps: int,
                errors: bool) -> None:  # fmt: skip
    """Refuse --random M,N,K (UserError, before anything is allocated) when the least it
    needs exceeds this machine's memory: A and B in their formats, D of each of `hyps`
    hypotheses (at least 2 bytes an output), and with `errors` the fp64 copies of A, B
    and of the product the errors are measured against (gemm/measure.measure_errors)."""
    from ..memory import fits

    def width(f: Format) -> int:
        return max(1, (f.spec.storage + 7) // 8)

    need = M * K * width(fa) + K * N * width(fb) + hyps * M * N * 2
    if errors:
        need += 8 * (M * K + K * N + M * N)
    tip = "try a smaller --random M,N,K" + (" or --no-errors" if errors else "")
    fits(need, f"--random {shape}", tip)


def _read_npy(p: Path, option: str) -> np.ndarray:
    """The array of one .npy file; UserError for anything else (empty, .npz, pickles)."""
    try:
        x = np.load(p, allow_pickle=False)
    except (ValueError, OSError, EOFError) as e:
        why = str(e) or "empty file"
        raise UserError(f"{option}: {p}: not a .npy array ({why})") from None
    if not isinstance(x, np.ndarray):
        if hasattr(x, "close"):
            x.close()
        raise UserError(f"{option}: {p}: an .npz archive; give one .npy array")
    return x


def _raw_patterns(dt: np.dtype) -> str:
    """Why a file of raw (void) or unsigned values needs --dtype, naming the formats of
    that width: numpy saves an ml_dtypes array (bfloat16, float8_e4m3fn, ...) as raw
    bytes (`|V2`), and its header does not say which format they were."""
    w = dt.itemsize * 8
    fits = sorted(f.spec.name for f in FORMAT_DTYPE if f.spec.storage == w)
    raw = "raw" if dt.kind == "V" else "unsigned"
    how = " (as numpy saves ml_dtypes arrays: the file does not say which format)"
    return f"holds {raw} {w}-bit patterns{how if dt.kind == 'V' else ''}; give --dtype" + (
        f" ({', '.join(fits)})" if fits else ""
    )


def load_matrix(path: str | None, what: str, fmt: Format | None) -> np.ndarray | None:
    """The 2-D matrix of an .npy file (None when `path` is None). Unsigned or raw (void)
    arrays are bit patterns read as `fmt` (--dtype); float arrays must already be in
    `fmt` when it is given. Big-endian arrays are read in native byte order."""
    if path is None:
        return None
    option = f"--{what}"
    if not path:
        raise UserError(f"{option}: empty path")
    p = Path(path)
    if not p.exists():
        raise UserError(f"{option}: {path}: no such file")
    if not p.is_file():
        kind = "a directory" if p.is_dir() else "not a regular file"
        raise UserError(f"{option}: {path}: not a .npy file ({kind})")
    x = _read_npy(p, option)
    if x.dtype.byteorder not in "=|":
        x = x.astype(x.dtype.newbyteorder("="))
    if x.dtype.kind in "uV":
        if fmt is None:
            raise UserError(f"{option}: {path} {_raw_patterns(x.dtype)}")
        w = fmt.spec.storage
        if fmt.spec.is_integer:  # integer patterns (u8; s4, u4 and b1 in a byte) as they are
            if x.dtype.kind != "u" or x.dtype.itemsize * 8 < w:
                raise UserError(f"{option}: {x.dtype} patterns are not {w}-bit {fmt.spec.name}")
        elif x.dtype.itemsize * 8 != w:
            raise UserError(f"{option}: {x.dtype} patterns are not {w}-bit {fmt.spec.name}")
        else:
            x = np.ascontiguousarray(x).view(UNSIGNED[w]).view(FORMAT_DTYPE[fmt])
    elif x.dtype in DTYPE_INTEGER:  # int8: s8 values, int32: s32 values
        if fmt is not None and fmt != DTYPE_INTEGER[x.dtype]:
            raise UserError(
                f"{option}: {path} holds {DTYPE_INTEGER[x.dtype].spec.name} values but --dtype "
                f"is {fmt.spec.name}"
            )
    elif x.dtype not in DTYPE_FORMAT:
        raise UserError(f"{option}: dtype {x.dtype} is not a GEMM input")
    elif fmt is not None and FORMAT_DTYPE.get(fmt) != x.dtype:
        raise UserError(
            f"{option}: {path} holds {DTYPE_FORMAT[x.dtype].spec.name} values but --dtype is "
            f"{fmt.spec.name}; --dtype reads unsigned bit patterns, convert float arrays first"
        )
    if x.ndim != 2:
        raise UserError(f"{option}: {path} has shape {x.shape}; expected a 2-D matrix")
    if 0 in x.shape:
        raise UserError(f"{option}: {path} has shape {x.shape}; a GEMM needs M, N, K >= 1")
    return x


def plot_format(path: str | None) -> str | None:
    """The image format of --plot, from its extension (none: png), checked against what
    matplotlib writes before any work; UserError when matplotlib is missing."""
    if path is None:
        return None
    check_out(path, "--plot")
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib.figure import Figure
    except ImportError:
        raise UserError("--plot needs matplotlib: pip install 'tensorcore-smt[plot]'") from None
    known = Figure().canvas.get_supported_filetypes()
    suffix = Path(path).suffix.lower().lstrip(".")
    fmt = suffix or "png"
    if fmt not in known:
        raise UserError(
            f"--plot {path}: .{suffix} is not an image format matplotlib writes; allowed: "
            + ", ".join(sorted(known))
        )
    return fmt


def save_array(path: str, D: np.ndarray) -> None:
    """D as .npy at exactly `path` (no extension added); OSError when the write fails."""
    with open(path, "wb") as f:
        np.save(f, D)
