"""Kernel registry: the names ``layoutalg compile KERNEL`` / ``check KERNEL`` accept.

An entry knows its command-line options, how to build a gated :class:`~kernels.gemm.BuiltKernel`
from them, how to make inputs, and the torch reference.  Add a kernel with :func:`register`
(attention will register ``"attention"`` the same way).
"""

from __future__ import annotations

import argparse
from typing import Any, Callable, Dict, List, Sequence, Tuple

__all__ = ["KernelEntry", "GemmEntry", "REGISTRY", "register", "get"]


class KernelEntry:
    """Interface of a registered kernel (subclass and override)."""

    name = ""
    help = ""

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        raise NotImplementedError

    def config(self, args: argparse.Namespace) -> Any:
        raise NotImplementedError

    def build(self, cfg: Any) -> Any:
        """A gated BuiltKernel (raises VerificationError / ConfigError)."""
        raise NotImplementedError

    def inputs(self, cfg: Any, seed: int = 0) -> List[Any]:
        """Kernel arguments (torch CPU tensors, outputs zeroed) in parameter order."""
        raise NotImplementedError

    def reference(self, cfg: Any, args: Sequence[Any]) -> Any:
        """The expected output (float32 torch tensor, in the output's logical shape)."""
        raise NotImplementedError

    def output(self, cfg: Any, outputs: Sequence[Any]) -> Any:
        """The kernel's output (from the emulator's outputs) as float32 in logical shape."""
        raise NotImplementedError

    def tolerance(self, cfg: Any) -> Tuple[float, float]:
        """(atol, rtol) for |out - ref| <= atol + rtol * |ref|."""
        raise NotImplementedError

    def ignored_options(self, args: argparse.Namespace, cfg: Any, command: str,
                        given: Callable[[str], bool]) -> List[str]:
        """One sentence per option the user set that ``command`` ("compile" / "check") does
        not use for ``cfg`` (``given(dest)``: set to other than its default); the CLI warns."""
        return []


def _torch_dtype(name: str) -> Any:
    import torch
    from ..ir.dtypes import ELEM_TYPES
    return getattr(torch, ELEM_TYPES[name].torch)


def _as_values(t: Any, dtype: str) -> Any:
    """A kernel argument as the values it holds: 8-bit floats travel as raw bytes (uint8)."""
    import torch
    from ..ir.dtypes import ELEM_TYPES
    return t.view(_torch_dtype(dtype)) if ELEM_TYPES[dtype].bytes == 1 and \
        t.dtype == torch.uint8 else t


def _one_byte(dtype: str) -> bool:
    """fp8/bf8 (a bad dtype is refused later, by the config it builds)."""
    from .gemm_plan import DTYPE_BYTES, ConfigError, norm_dtype
    try:
        return DTYPE_BYTES[norm_dtype(dtype)] == 1
    except (ConfigError, KeyError):
        return False


def _default_block(dtype: str) -> str:
    """128x128 with 64 bytes of k per LDS row (32 f16/bf16, 64 fp8/bf8)."""
    from .gemm_plan import DTYPE_BYTES, norm_dtype
    return f"128x128x{64 // DTYPE_BYTES[norm_dtype(dtype)]}"


class GemmEntry(KernelEntry):
    name = "gemm"
    help = ("C = A @ B on MFMA (fp16/bf16/fp8/bf8 in, fp32 accumulate, fp16/bf16/fp32 out; "
            "fp8/bf8 with per-tensor scales)")

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        g = p.add_argument_group("gemm options")
        g.add_argument("--m", type=int, default=256, help="rows of A and C (default 256)")
        g.add_argument("--n", type=int, default=256, help="columns of B and C (default 256)")
        g.add_argument("--k", type=int, default=256, help="reduction extent (default 256)")
        g.add_argument("--dtype", default="f16", help="A/B element type: f16 | bf16 | fp8 "
                       "(gfx942's E4M3 FNUZ, torch.float8_e4m3fnuz) | bf8 (E5M2 FNUZ, "
                       "torch.float8_e5m2fnuz)")
        g.add_argument("--out-dtype", default=None, help="C element type: f16 | bf16 | f32 "
                       "(default: --dtype; bf16 for fp8/bf8)")
        g.add_argument("--scales", default=None, choices=("tensor", "rowcol", "none"),
                       help="tensor: C = scale_a[0] * scale_b[0] * (A @ B); rowcol: C[i][j] = "
                       "scale_a[i] * scale_b[j] * (A @ B)[i][j] (M and N floats); two float* "
                       "kernel arguments after C (default: tensor for fp8/bf8, none for "
                       "f16/bf16)")
        g.add_argument("--layout", default="NN", help="NN | NT | TN | TT: A then B, N = "
                       "row-major as stored, T = column-major (default NN)")
        g.add_argument("--c-major", default="row", choices=("row", "col"))
        g.add_argument("--block", default=None, help="block tile MxNxK, e.g. 128x128x32 "
                       "(default: chosen for the problem size by kernels.amd.gemm_select, "
                       "with its waves, LDS stages and schedule; the reason is "
                       "printed and written to report.json; preshuffled B: fp8/bf8 chosen "
                       "from the preshuffled table, f16/bf16 128x128 with 64 bytes of k per "
                       "row)")
        g.add_argument("--waves", default=None, help="waves per block along MxN (with "
                       "--block; default 2x2)")
        g.add_argument("--mfma", default=None, help="32x32x8 | 16x16x16 | instruction name "
                       "(default: choose_mfma)")
        g.add_argument("--vec", type=int, default=None, help="global vector width in elements "
                       "(default: widest that fits; 8 = 128-bit)")
        g.add_argument("--stages", type=int, default=None, choices=(1, 2),
                       help="LDS buffers (with --block): 2 = double buffer (default), 1 = "
                       "single buffer with two barriers per k-tile")
        from .gemm_plan import SCHEDULES
        g.add_argument("--schedule", default=None, choices=SCHEDULES,
                       help="k-tile schedule (with --block): basic (default: reads, wait, "
                       "MFMAs per k-group), pipelined (every read of the k-tile first, "
                       "partial lgkmcnt waits, s_setprio, pinned interleave) or interleaved "
                       "(one LDS stage, one wave per SIMD: the next k-step's reads, the LDS "
                       "stores and the prefetch between the MFMAs; predicated loads as "
                       "buffer loads)")
        g.add_argument("--waves-per-eu", type=int, default=None, metavar="N",
                       help="with --block: amdgpu_waves_per_eu(N) on the kernel, a register "
                       "budget of 512 / N per lane (2: 256 registers, two waves per SIMD; "
                       "0: no hint, the default). The tile choice's 4096^3 f16/bf16 kernel is "
                       "--block 224x256x32 --waves 2x2 --stages 1 --mfma 16x16x16 "
                       "--schedule interleaved --swap-ab --waves-per-eu 1")
        g.add_argument("--swap-ab", action="store_true", default=None,
                       help="with --block: the MFMAs take B as srcA and A as srcB (C tiles "
                       "computed transposed), so each lane's accumulator values lie along N "
                       "and a row-major C is written with wide stores (square MFMAs only; the "
                       "tile choice sets it for its interleaved tile)")
        g.add_argument("--b-layout", default="plain", choices=("plain", "preshuffled"),
                       help="B storage: plain (B[K,N] as --layout says, through LDS; default) "
                       "or preshuffled (MFMA fragment order, kernels.amd.preshuffle: B loaded "
                       "straight into registers with buffer_load_dwordx4; --layout's B letter "
                       "is ignored; the kernel's B argument is then the buffer "
                       "kernels.preshuffle(B, instr) writes, never a plain B)")

    def config(self, args: argparse.Namespace) -> Any:
        from .gemm_plan import ConfigError, GemmConfig
        lay = str(args.layout).upper()
        if len(lay) != 2 or any(c not in "NT" for c in lay):
            raise ConfigError(f"--layout {args.layout!r}: use NN, NT, TN or TT")
        common = dict(dtype=args.dtype, out_dtype=args.out_dtype,
                      a_major="row" if lay[0] == "N" else "col",
                      b_major="row" if lay[1] == "N" else "col", c_major=args.c_major,
                      vec=args.vec, arch=getattr(args, "arch", "gfx942"),
                      scales=getattr(args, "scales", None),
                      b_layout=getattr(args, "b_layout", "plain"))
        waves = getattr(args, "waves", None)
        stages = getattr(args, "stages", None)
        schedule = getattr(args, "schedule", None)
        waves_per_eu = getattr(args, "waves_per_eu", None)
        swap_ab = getattr(args, "swap_ab", None)
        block = args.block
        # the tile choice has measured tables for plain B and for fp8/bf8 with preshuffled B;
        # 16-bit preshuffled B without --block keeps the fixed 128x128 default
        if block is None and (common["b_layout"] == "plain" or _one_byte(args.dtype)):
            given = [f"--{n}" for n, v in (("waves", waves), ("stages", stages),
                                           ("schedule", schedule), ("mfma", args.mfma),
                                           ("waves-per-eu", waves_per_eu),
                                           ("swap-ab", swap_ab))
                     if v is not None]
            if given:
                raise ConfigError(f"{', '.join(given)} without --block: the tile choice picks "
                                  "waves, stages, MFMA, schedule, waves per EU and operand "
                                  "order together; "
                                  "give --block "
                                  "too (e.g. --block 128x128x32) to set them yourself")
            from .gemm_select import select_gemm
            return select_gemm(args.m, args.n, args.k, **common).config
        block = block or _default_block(args.dtype)   # a bad dtype is refused here
        try:
            bm, bn, bk = (int(x) for x in str(block).lower().split("x"))
            wm, wn = (int(x) for x in str(waves or "2x2").lower().split("x"))
        except ValueError:
            raise ConfigError(f"--block {args.block!r} / --waves {waves!r}: use e.g. "
                              "128x128x32 and 2x2") from None
        return GemmConfig(args.m, args.n, args.k, block_m=bm, block_n=bn, block_k=bk,
                          waves_m=wm, waves_n=wn, mfma=args.mfma,
                          stages=2 if stages is None else stages,
                          schedule=schedule or "basic",
                          waves_per_eu=0 if waves_per_eu is None else waves_per_eu,
                          swap_ab=bool(swap_ab), **common)

    def build(self, cfg: Any) -> Any:
        if cfg.b_layout == "preshuffled":
            from .gemm_preshuffle import build_gemm_preshuffled
            return build_gemm_preshuffled(cfg)
        from .gemm import build_gemm
        return build_gemm(cfg)

    def inputs(self, cfg: Any, seed: int = 0) -> List[Any]:
        import torch
        c = cfg.normalized()
        from ..ir.dtypes import ELEM_TYPES
        g = torch.Generator().manual_seed(seed)
        dt = _torch_dtype(c.dtype)
        # 8-bit floats: spread the values over the format's exponents (x4), not just |x| < 4
        spread = 4.0 if ELEM_TYPES[c.dtype].bytes == 1 else 1.0
        a = (torch.randn(c.m, c.k, generator=g) * spread).to(dt)
        b = (torch.randn(c.k, c.n, generator=g) * spread).to(dt)
        # storage: row-major as is, column-major as the transpose's rows
        a_store = a.contiguous() if c.a_major == "row" else a.t().contiguous()
        b_store = b.contiguous() if c.b_major == "row" else b.t().contiguous()
        if ELEM_TYPES[c.dtype].bytes == 1:      # raw bytes: the emulator's uint8 arguments
            a_store, b_store = a_store.view(torch.uint8), b_store.view(torch.uint8)
        out_dt = _torch_dtype(c.out_dtype)
        if c.b_layout == "preshuffled":     # the buffer the kernel reads; reference uses b
            from .gemm_plan import plan_gemm
            from .preshuffle import preshuffle
            b_store = preshuffle(b, plan_gemm(c).spec.name, c.dtype, c.arch)
            if ELEM_TYPES[c.dtype].bytes == 1:      # the emulator's raw bytes, as for plain B
                b_store = b_store.view(torch.uint8)
        shape = (c.m, c.n) if c.c_major == "row" else (c.n, c.m)
        args = [a_store, b_store, torch.zeros(shape, dtype=out_dt)]
        if c.scales != "none":   # not powers of two (a missing factor cannot hide)
            na, nb = (1, 1) if c.scales == "tensor" else (c.m, c.n)
            args += [torch.rand(na, generator=g) + 0.3, torch.rand(nb, generator=g) + 0.3]
        return args

    def _logical(self, cfg: Any, args: Sequence[Any]):
        c = cfg.normalized()
        a, b = _as_values(args[0], c.dtype), _as_values(args[1], c.dtype)
        a = a if c.a_major == "row" else a.t()
        if c.b_layout == "preshuffled":    # back through the same layout (its inverse)
            from .gemm_plan import plan_gemm
            from .preshuffle import unshuffle
            return a, unshuffle(b, c.k, c.n, plan_gemm(c).spec.name, c.dtype, c.arch)
        b = b if c.b_major == "row" else b.t()
        return a, b

    def reference(self, cfg: Any, args: Sequence[Any]) -> Any:
        import torch
        c = cfg.normalized()
        a, b = self._logical(cfg, args)
        ref = torch.matmul(a.double(), b.double())
        if c.scales == "tensor":
            ref = ref * (args[3].double()[0] * args[4].double()[0])
        elif c.scales == "rowcol":
            ref = ref * args[3].double()[:, None] * args[4].double()[None, :]
        return ref.float()

    def output(self, cfg: Any, outputs: Sequence[Any]) -> Any:
        import numpy as np
        import torch
        c = cfg.normalized()
        out = outputs[2]
        t = torch.from_numpy(np.ascontiguousarray(out)) if not isinstance(out, torch.Tensor) \
            else out
        if c.out_dtype == "bf16" and t.dtype != torch.bfloat16:
            t = t.view(torch.bfloat16)
        t = t.float()
        return t if c.c_major == "row" else t.t()

    def tolerance(self, cfg: Any) -> Tuple[float, float]:
        c = cfg.normalized()
        # fp32 accumulation of exact fp16/bf16/fp8 products: only summation order and the
        # final rounding to the output type differ from the float64 reference (computed from
        # the same fp8 values)
        return {"f32": (1e-4, 1e-5), "f16": (2e-3, 2e-3), "bf16": (1e-2, 1e-2)}[c.out_dtype]


REGISTRY: Dict[str, KernelEntry] = {}


def register(entry: KernelEntry) -> None:
    REGISTRY[entry.name] = entry


def get(name: str) -> KernelEntry:
    from .gemm_plan import ConfigError
    try:
        return REGISTRY[name]
    except KeyError:
        raise ConfigError(f"unknown kernel {name!r}; known: {', '.join(sorted(REGISTRY))}") \
            from None


register(GemmEntry())

# attention (kernels/attention_registry.py) registers itself here
from .attention_registry import AttentionEntry  # noqa: E402

register(AttentionEntry())
