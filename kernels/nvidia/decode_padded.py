"""Head dims of the tensor-core decode's IR kernels other than 64 / 128 / 256 (issue 20 item 1).

The lane maps of :func:`.decode_mma.fragment_maps` place 16-byte vectors (8 head dims) at
``8 t + 32 i`` for Q / K (4 t-lanes of a row) and ``8 g + 64 i`` for V (8 g-lanes): they
cover the D axis exactly when D is a multiple of 32 (Q / K) resp. 64 (V).  A head_dim ``D``
that is a multiple of 16 runs the same maps over padded widths, :func:`qk_width` (D rounded
up to 32) for ``S = Q K^T`` and :func:`v_width` (D rounded up to 64) for ``O^T = V^T P^T``;
a vector past D is a predicated-off load (``lane < (D - first) / 8``: zeros, no memory
traffic), and the O^T rows past D are never stored.  What proves it is the one verifier with
the rules it already had plus one: a reduction slot of ``S = Q K^T`` whose A column and B row
are both zero fill contributes no head dim, and every score must still be summed over exactly
``[0, D)`` (:meth:`kernels.verify.warp_register_rules.WarpRegisterRules.mma_scores_qk`).
(V^T rows past D need no new rule: their O^T elements keep the head dim they were loaded at,
past D, so no store into ``[0, D)`` can take them.)

At 64 / 128 / 256 both widths are D and the kernels are the ones the template bitwise-matches.
"""

from __future__ import annotations

__all__ = ["TEMPLATE_HEAD_DIMS", "IR_MAX_HEAD_DIM", "qk_width", "v_width", "padded_head_dim",
           "ir_head_dim_ok", "policy_head_dim", "padded_decode_on_ir"]

TEMPLATE_HEAD_DIMS = (64, 128, 256)     # the template split kernel's (decode_mma.validate)
IR_MAX_HEAD_DIM = 256                   # the register budget: D past 256 would spill


def qk_width(D: int) -> int:
    """The head dims ``S = Q K^T`` spans: D rounded up to 32 (4 lanes x 8)."""
    return -(-D // 32) * 32


def v_width(D: int) -> int:
    """The head dims ``O^T = V^T P^T`` spans: D rounded up to 64 (8 lanes x 8)."""
    return -(-D // 64) * 64


def padded_head_dim(D: int) -> bool:
    """Whether the IR kernel runs ``D`` over padded widths (not 64 / 128 / 256)."""
    return qk_width(D) != D or v_width(D) != D


def ir_head_dim_ok(D: int) -> bool:
    """The head dims the IR split kernel is built for: multiples of 16 from 16 to 256."""
    return D % 16 == 0 and 16 <= D <= IR_MAX_HEAD_DIM


def policy_head_dim(D: int) -> int:
    """The template head dim whose configuration rules (validation, warps per block, blocks
    per SM, whole waves) a head_dim takes: the smallest of :data:`TEMPLATE_HEAD_DIMS` at
    least its :func:`v_width` (its registers and shared memory are at most that one's; the
    rules were measured there, not at ``D`` itself).  ``D`` itself at 64 / 128 / 256."""
    w = v_width(D)
    return min((t for t in TEMPLATE_HEAD_DIMS if t >= w), default=w)


def padded_decode_on_ir(D: int) -> bool:
    """THE dispatch rule for head dims other than 64 / 128 / 256: whether
    :func:`kernels.nvidia.dispatch.choose_decode` runs the verified IR kernel at ``D`` (a
    multiple of 16 up to 256).  Switch :data:`PADDED_HEAD_DIMS_ON_IR` off if a GPU run
    disagrees: such head dims then get the FMA split template's refusal, as before."""
    return PADDED_HEAD_DIMS_ON_IR and ir_head_dim_ok(D) and D not in TEMPLATE_HEAD_DIMS


#: on: run on an H100, tests/test_nvidia_ir_padded_gpu.py passed in session 9 (2026-11-24 17:17Z,
#: at c26285b: d32/80/96/160 bitwise equal to the kernel at its template head dim on
#: zero-padded inputs, within bounds of the float32 reference) and again in session 10 (at
#: 76749be, after the softmax unification); docs/PERFORMANCE.md, "The whole suite on merged
#: main, session 9" / "session 10" (raw benchmarks/results/gpu_tests_h100_2026-11-24_s9_a.txt,
#: gpu_tests_h100_2026-11-24_s10_b.txt)
PADDED_HEAD_DIMS_ON_IR = True
