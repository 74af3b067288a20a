"""kernels.amd: the IR-based AMD kernels (gfx942) and their registries.

GEMM (:mod:`~kernels.amd.gemm_plan`, :mod:`~kernels.amd.gemm`), prefill flash attention
(:mod:`~kernels.amd.attention_plan`, :mod:`~kernels.amd.flash_attention`), decode
(:mod:`~kernels.amd.decode`) and split-KV decode (:mod:`~kernels.amd.decode_splitkv`); the CLI
entries (:mod:`~kernels.amd.registry`, :mod:`~kernels.amd.attention_registry`).
"""
