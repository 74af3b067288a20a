"""What the NVIDIA builders (:mod:`kernels.cuda_gemm`, :mod:`kernels.cuda_attention`) share at
run time: one configuration's CUDA source, compiled on first use, and torch dtype names."""

from __future__ import annotations

from typing import Any, Optional

__all__ = ["CompiledKernel", "TORCH_DT", "dtype_name", "short_dtype"]

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
    source with :func:`kernels.cuda.compile.compile_cuda` on first use."""

    def __init__(self, cfg: Any, source: str, backend: str = "auto") -> None:
        self.cfg = cfg
        self.source = source
        self.backend = backend
        self._module = None

    @property
    def module(self):
        if self._module is None:
            from ..toolchain.nvrtc import compile_cuda
            self._module = compile_cuda(self.source, self.cfg.arch, name=f"{self.cfg.name}.cu",
                                        backend=self.backend)
        return self._module
