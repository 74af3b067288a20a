"""What a launch's validation depended on, as a hashable key, and a bounded cache keyed by it
(issue 20: the host time of a steady-state call).

A launch of a microsecond kernel used to spend hundreds of microseconds in Python re-deciding
and re-validating the same call.  Everything those checks read of a tensor is its dtype,
shape, strides, device and the alignment of its data pointer, so two calls whose tensors
agree on :func:`tensor_key` get the same answers: the kernel selection and the argument
checks run once per key, and a later call with an equal key re-uses what they produced
(comparing the keys *is* the validation then).  A call that fails validation is never stored,
so bad input gets its own error every time.

Pointer values are not in the key, only their residue modulo :data:`ALIGN_MOD` (every
alignment the checks ask for divides it), so a new allocation of the same shape hits.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Dict, Generic, Hashable, Optional, Tuple, TypeVar

__all__ = ["ALIGN_MOD", "tensor_key", "arg_key", "call_key", "BoundedCache", "PerStream",
           "stream_handle"]

ALIGN_MOD = 128          # the widest alignment a check asks for (TMA line padding: 128 bytes)

V = TypeVar("V")

# torch's C entry for the current stream's raw cudaStream_t (what Triton's launcher calls):
# 0.8 us against 5.8 us for ``torch.cuda.current_stream(d).cuda_stream``, which builds a
# Python Stream object (H100 host, benchmarks/results/gpu_padwall_h100_2026-11-24.txt).
# Tests with a pretend GPU set it False so that their patched ``current_stream`` is used.
RAW_STREAM = True


def stream_handle(device: Any) -> int:
    """The ``cudaStream_t`` (an int) of torch's current stream on ``device`` (a torch.device
    or an index; None or an index-less device: the current device): the stream a launch
    goes to.  Called once or twice per launch, so it avoids building torch's Stream object
    where torch has its raw entry (:data:`RAW_STREAM`); the same handle either way."""
    import torch
    index = getattr(device, "index", device)
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None) if RAW_STREAM else None
    if raw is None:
        return torch.cuda.current_stream(device).cuda_stream
    return raw(torch.cuda.current_device() if index is None else index)


def tensor_key(t: Any) -> Tuple[Any, ...]:
    """``(dtype, shape, strides, device, data_ptr % ALIGN_MOD)`` of a torch tensor: all that
    the shape/dtype/stride/device/alignment checks read.  Raises AttributeError or TypeError
    for something that is not a tensor (the caller then takes the uncached, checking path)."""
    return (t.dtype, t.shape, t.stride(), t.device, t.data_ptr() % ALIGN_MOD)


def arg_key(a: Any) -> Hashable:
    """:func:`tensor_key` of a tensor, ``None`` for None, else ``(type, value)`` of a scalar
    (the value is part of what was validated: a range check, a float's finiteness)."""
    if a is None:
        return None
    if hasattr(a, "data_ptr"):
        return tensor_key(a)
    return (type(a), a)


def call_key(*parts: Any) -> Optional[Tuple[Any, ...]]:
    """The :func:`arg_key` of each part (tensors, None, scalars) as one hashable key, or None
    when some part is not hashable or a tensor-like object lacks what :func:`tensor_key`
    reads (the caller then takes its checking path, which raises its own error)."""
    try:
        key = tuple(arg_key(p) for p in parts)
        hash(key)
        return key
    except (AttributeError, TypeError):
        return None


class BoundedCache(Generic[V]):
    """A dict that forgets everything when it holds ``limit`` entries (a process that keeps
    bringing new shapes must not grow without bound; the common case is a handful of shapes
    called many times).  ``get`` of a ``None`` key is a miss; ``put`` with one stores nothing."""

    def __init__(self, limit: int = 512) -> None:
        self.limit = limit
        self._d: dict = {}
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: Optional[Hashable]) -> Optional[V]:
        v = self._d.get(key) if key is not None else None
        if v is None:
            self.misses += 1
        else:
            self.hits += 1
        return v

    def put(self, key: Optional[Hashable], value: V) -> V:
        if key is not None:
            with self._lock:
                if len(self._d) >= self.limit:
                    self._d.clear()
                self._d[key] = value
        return value

    def clear(self) -> None:
        with self._lock:
            self._d.clear()
        self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._d)


class PerStream(Generic[V]):
    """One value per (device, CUDA stream), made by ``make(device)`` on that stream's first
    call and kept: the workspaces of a bound call (split partials, arrival counters the kernel
    leaves at zero).  Launches on one stream run in order, so they never use a workspace at
    the same time; two streams get two."""

    def __init__(self, make: Callable[[Any], V]) -> None:
        self.make = make
        self._by_stream: Dict[Tuple[Any, int], V] = {}

    def on(self, device: Any) -> Tuple[V, int]:
        """``(value, stream)`` for a launch on ``device``'s current stream."""
        stream = stream_handle(device)
        key = (device, stream)
        v = self._by_stream.get(key)
        if v is None:
            v = self._by_stream[key] = self.make(device)
        return v, stream
