"""The float32 torch reference of one decode step of grouped-query attention, which the GPU
decode tests (tests/test_nvidia_*decode*_gpu.py, test_nvidia_gpu_shapes.py) compare with."""

from __future__ import annotations

import math


def gqa_decode_reference(q, k, v):
    """softmax(q K^T / sqrt(D)) V in float32 for q ``(B, Hq, 1, D)`` and K, V
    ``(B, Hkv, Skv, D)``: query head h reads KV head h // (Hq / Hkv)."""
    g = q.shape[1] // k.shape[1]
    kf, vf = k.float().repeat_interleave(g, 1), v.float().repeat_interleave(g, 1)
    s = (q.float() @ kf.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    return s.softmax(-1) @ vf
