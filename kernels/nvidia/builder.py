"""What the NVIDIA builders (:mod:`kernels.cuda_gemm`, :mod:`kernels.cuda_attention`) share at
run time: one configuration's CUDA source, compiled on first use, and torch dtype names."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Callable, Optional

from ..runtime.launch_cache import BoundedCache, call_key

__all__ = ["CompiledKernel", "TORCH_DT", "dtype_name", "ir_compiled_kernel", "short_dtype"]

TORCH_DT = {"f16": "float16", "bf16": "bfloat16"}


def dtype_name(t: Any) -> str:
    """A torch tensor's dtype without the ``torch.`` prefix (``"float16"``)."""
    return str(t.dtype).replace("torch.", "")


def short_dtype(t: Any) -> Optional[str]:
    """``"f16"`` / ``"bf16"`` for a float16 / bfloat16 torch tensor, None for any other."""
    import torch
    return {torch.float16: "f16", torch.bfloat16: "bf16"}.get(t.dtype)


class CompiledKernel:
    """``cfg`` (with ``arch`` and ``name``) and its CUDA ``source``; ``module`` compiles the
    source with :func:`kernels.cuda.compile.compile_cuda` on first use.  A class whose
    ``bind(*args)`` checks a call's arguments and returns its ``run`` closure calls
    :meth:`bound` from ``__call__``."""

    def __init__(self, cfg: Any, source: str, backend: str = "auto") -> None:
        self.cfg = cfg
        self.source = source
        self.backend = backend
        self._module = None
        self._calls: BoundedCache = BoundedCache(64)

    @property
    def module(self):
        if self._module is None:
            from ..toolchain.nvrtc import compile_cuda
            self._module = compile_cuda(self.source, self.cfg.arch, name=f"{self.cfg.name}.cu",
                                        backend=self.backend)
        return self._module

    def bound(self, *args: Any) -> Callable[..., Any]:
        """The ``run`` closure :meth:`bind` returns for arguments with this
        :func:`~kernels.runtime.launch_cache.call_key` (their dtypes, shapes, strides,
        devices, pointer alignment and scalar values), made once per key: a later call with
        an equal key skips the checks ``bind`` ran (issue 20: host time per call).  Arguments
        that fail ``bind``'s checks raise and are never cached."""
        key = call_key(*args)
        run = self._calls.get(key)
        if run is None:
            run = self._calls.put(key, self.bind(*args))
        return run

    def forget_calls(self) -> None:
        """Drop every bound call (the next call of each key is checked again)."""
        self._calls.clear()

    def bind(self, *args: Any) -> Callable[..., Any]:  # pragma: no cover - per kernel class
        raise NotImplementedError


def ir_compiled_kernel(ir: Any, arch: str, source: str, backend: str = "auto") -> CompiledKernel:
    """The :class:`CompiledKernel` of a kernel built as IR (``ir.name``) and printed to
    ``source`` for ``arch``: its configuration is just that name and arch (the IR decodes'
    split, combine and fused kernels)."""
    return CompiledKernel(SimpleNamespace(name=ir.name, arch=arch), source, backend)
