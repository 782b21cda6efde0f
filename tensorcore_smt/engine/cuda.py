"""The GPU kernel: PTX (ptx.py) loaded and launched through the CUDA driver.

The driver is reached through NVIDIA's Python binding `cuda-python` (optional extra
`cuda`: pip install 'tensorcore-smt[cuda]'); CUDA Driver API calls: cuInit, cuDeviceGet,
cuDevicePrimaryCtxRetain, cuModuleLoadData (JIT-compiles the PTX), cuModuleGetFunction,
cuLaunchKernel. Operands that are torch CUDA tensors are passed by their device pointers
(no copies); numpy arrays are copied to the device and d back. A missing binding, driver or
GPU is one line naming the engine (UserError).
"""

from __future__ import annotations

import threading

import numpy as np

from ..bv.dtypes import UNSIGNED
from ..errors import UserError
from ..model.params import ModelParams
from .dag import operands
from .kernel_ir import KERNEL, container
from .ptx import ptx_for

BLOCK = 256
"""Threads per block (one row per thread)."""

_LOCK = threading.Lock()
_FUNCS: dict[tuple, object] = {}


def _driver():
    try:
        from cuda.bindings import driver
    except ImportError:
        raise UserError(
            "engine compiled on cuda needs the CUDA driver binding: pip install 'tensorcore-smt[cuda]'"
        ) from None
    return driver


def _check(driver, result):
    """The values of a driver call, or one line naming the engine on an error."""
    err, *rest = result if isinstance(result, tuple) else (result,)
    if err != driver.CUresult.CUDA_SUCCESS:
        _, msg = driver.cuGetErrorString(err)
        text = msg.decode() if isinstance(msg, bytes) else str(err)
        raise UserError(f"engine compiled on cuda: {text}")
    return rest[0] if len(rest) == 1 else rest


def _ordinal(device: str) -> int:
    try:
        return int(device.split(":", 1)[1]) if ":" in device else 0
    except ValueError:
        raise UserError(f"engine compiled: bad device {device!r}; use cuda or cuda:N") from None


def _device(ordinal: int):
    """The driver binding and GPU `ordinal` after cuInit; one line naming the engine
    when the binding, the driver or the GPU is missing."""
    driver = _driver()
    try:
        _check(driver, driver.cuInit(0))
    except UserError:
        raise
    except Exception as e:  # the binding raises when no driver library is installed
        raise UserError(f"engine compiled on cuda: no CUDA driver ({type(e).__name__})") from None
    return driver, _check(driver, driver.cuDeviceGet(ordinal))


def check_gpu(device: str) -> None:
    """One line naming the engine unless the CUDA binding, driver and GPU `device` are
    there (for commands that check before they start work)."""
    _device(_ordinal(device))


def _function(p: ModelParams, ordinal: int, containers: tuple[int, ...], out_bits: int = 64):
    """The loaded kernel function of `p` on GPU `ordinal` (made current), storing d as
    `out_bits`-bit words."""
    driver, dev = _device(ordinal)
    ctx = _check(driver, driver.cuDevicePrimaryCtxRetain(dev))
    _check(driver, driver.cuCtxSetCurrent(ctx))
    key = (p, ordinal, containers, out_bits)
    with _LOCK:
        fn = _FUNCS.get(key)
        if fn is None:
            major = _check(
                driver,
                driver.cuDeviceGetAttribute(
                    driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev
                ),
            )
            minor = _check(
                driver,
                driver.cuDeviceGetAttribute(
                    driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev
                ),
            )
            ptx = ptx_for(p, f"sm_{major}{minor}", containers, out_bits)
            module = _check(driver, driver.cuModuleLoadData(ptx.encode() + b"\0"))
            fn = _check(driver, driver.cuModuleGetFunction(module, KERNEL.encode()))
            _FUNCS[key] = fn
    return fn


def _is_cuda_tensor(x) -> bool:
    return getattr(getattr(x, "device", None), "type", None) == "cuda"


def run_rows_gpu(
    p: ModelParams, arrays: list, device: str, out: np.ndarray | None = None
) -> np.ndarray:
    """d (N,) computed by the GPU kernel, copied from the GPU straight into `out` (a
    contiguous unsigned array at least as wide as d's format; the kernel stores words of
    its width) or a new uint64 array; operands numpy arrays or torch CUDA tensors (used
    in place)."""
    driver = _driver()
    ordinal = _ordinal(device)
    ops = operands(p)
    host: list = []
    for x, o in zip(arrays, ops):
        if _is_cuda_tensor(x):
            host.append(x.contiguous())
        else:
            host.append(np.ascontiguousarray(x, dtype=UNSIGNED[container(o.width)]))
    containers = tuple(
        x.element_size() * 8 if _is_cuda_tensor(x) else x.dtype.itemsize * 8 for x in host
    )
    n = len(host[2])
    if out is None:
        out = np.empty(n, dtype=np.uint64)
    if out.shape != (n,) or out.dtype.kind != "u" or not out.flags.c_contiguous:
        raise ValueError(f"out: expected a contiguous unsigned array of shape ({n},)")
    fn = _function(p, ordinal, containers, out.dtype.itemsize * 8)
    allocated = []
    try:
        ptrs = []
        for x in host:
            if _is_cuda_tensor(x):
                ptrs.append(x.data_ptr())
                continue
            d = _check(driver, driver.cuMemAlloc(max(1, x.nbytes)))
            allocated.append(d)
            _check(driver, driver.cuMemcpyHtoD(d, x.ctypes.data, x.nbytes))
            ptrs.append(int(d))
        d_out = _check(driver, driver.cuMemAlloc(max(1, out.nbytes)))
        allocated.append(d_out)
        import ctypes

        args = (n, *ptrs, int(d_out))
        types = (ctypes.c_int64, *[ctypes.c_void_p] * (len(ptrs) + 1))
        grid = max(1, -(-n // BLOCK))
        _check(driver, driver.cuLaunchKernel(fn, grid, 1, 1, BLOCK, 1, 1, 0, 0, (args, types), 0))
        _check(driver, driver.cuCtxSynchronize())
        _check(driver, driver.cuMemcpyDtoH(out.ctypes.data, d_out, out.nbytes))
        return out
    finally:
        for d in allocated:
            driver.cuMemFree(d)
