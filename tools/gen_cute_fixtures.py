#!/usr/bin/env python3
"""Generate tests/fixtures/cute_oracle.jsonl: differential-test fixtures from the real CuTe C++ algebra.

The generator
  1. builds a deterministic list of oracle queries (fixed random seed) covering every op of the
     cute_oracle query grammar, plus every line of the oracle's own examples.txt;
  2. runs the CuTe oracle (``cute_oracle.py --mode static --values 1024``) on them, in batches;
  3. annotates every ``composition`` record whose oracle result is ok with ``"sound": true/false``:
     whether CuTe's result really is the function composition, i.e. R(i) == A(B(i)) for all
     i < size(B) (for by-mode tilers / shape tuples: mode by mode, untouched modes must be kept).
     CuTe's admissibility check is looser than true admissibility, so some "ok" compositions are
     wrong; a strict library is expected to refuse those;
  4. writes one JSON object per line, keeping the oracle's fields (id, op, args, ok, result, error,
     size, cosize, rank, depth, values, and for tv_layout: tiler, layout_mn) minus ``raw``.
     ``result``/``tiler``/``layout_mn`` are printed without CuTe's static '_' markers.

Usage (from the repository root):

    python3 tools/gen_cute_fixtures.py [--oracle PATH/cute_oracle.py] [--out tests/fixtures/cute_oracle.jsonl]

The oracle path defaults to $CUTE_ORACLE, else ../shared/tools/cute_oracle/cute_oracle.py relative to
the repository root. The oracle needs the CuTe headers (run its setup_headers.sh once, or set
CUTE_INCLUDE / CUDA_INCLUDE / CCCL_INCLUDE). Compiled binaries are cached in $CUTE_ORACLE_CACHE
(default: a directory in the system temp dir, so a read-only oracle checkout works).
``--dry-run`` only prints the queries.
"""
import argparse
import collections
import concurrent.futures
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time

SEED = 20261121
VALUES_LIMIT = 1024
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_ORACLE = os.path.join(REPO, "..", "shared", "tools", "cute_oracle", "cute_oracle.py")
DEFAULT_OUT = os.path.join(REPO, "tests", "fixtures", "cute_oracle.jsonl")

# The layout model (parse, fmt, ev, composition_sound, ...) is in tools/cute_model.py.
from cute_model import (  # noqa: E402
    Lay, Sw, composition_sound, cosize, ev, flat, fmt, mode, parse, rank, size)


# ================================================================================================
# Random query generation
# ================================================================================================

EXTENTS = [2, 2, 2, 2, 4, 4, 4, 8, 8, 16, 32, 1, 3, 3, 5, 6, 6, 12]


class Gen:
  def __init__(self, seed):
    self.r = random.Random(seed)

  # ---- shapes -----------------------------------------------------------------------------------
  def leaves(self, nmin=1, nmax=4, budget=256, pool=EXTENTS):
    n = self.r.randint(nmin, nmax)
    out, prod = [], 1
    for _ in range(n):
      cands = [e for e in pool if prod * e <= budget] or [1]
      e = self.r.choice(cands)
      out.append(e)
      prod *= e
    return out

  def nest(self, items, max_depth=3):
    """Group a flat list into a random nested tuple of depth <= max_depth (a single item stays bare)."""
    r = self.r
    if len(items) == 1:
      return (items[0],) if max_depth >= 1 and r.random() < 0.04 else items[0]
    if max_depth <= 1 or r.random() < 0.35:
      return tuple(items)
    cuts = sorted(r.sample(range(1, len(items)), r.randint(1, len(items) - 1)))
    groups = [items[a:b] for a, b in zip([0] + cuts, cuts + [len(items)])]
    return tuple(self.nest(gr, max_depth - 1) for gr in groups)

  def deep(self, items, d):
    """Nest items (len(items) > d) into a tuple of depth exactly d."""
    if d <= 1:
      return tuple(items)
    k = self.r.randint(1, len(items) - d)
    head, tail = items[:k], items[k:]
    other = self.nest(head, d - 1) if len(head) > 1 else head[0]
    inner = self.deep(tail, d - 1)
    return (other, inner) if self.r.random() < 0.5 else (inner, other)

  def deep_layout(self, budget=256, styles=None):
    """A layout of depth exactly 3."""
    r = self.r
    ext = self.leaves(4, 5, budget, pool=[1, 2, 2, 2, 3, 4, 4, 2, 6, 8])
    st = self.strides(ext, r.choice(styles or ["col", "row", "perm", "gap", "zero", "rand"]))
    tmpl = self.deep(list(range(len(ext))), 3)
    return Lay(self.rebuild(tmpl, ext), self.rebuild(tmpl, st))

  @staticmethod
  def rebuild(template, values):
    it = iter(values)

    def go(t):
      if isinstance(t, tuple):
        return tuple(go(e) for e in t)
      return next(it)
    return go(template)

  # ---- strides ----------------------------------------------------------------------------------
  def strides(self, ext, style):
    n = len(ext)
    r = self.r
    if style == "col":
      out, acc = [], 1
      for e in ext:
        out.append(acc)
        acc *= e
      return out
    if style == "row":
      out, acc = [0] * n, 1
      for k in reversed(range(n)):
        out[k] = acc
        acc *= ext[k]
      return out
    if style in ("perm", "gap", "zero"):
      order = list(range(n))
      r.shuffle(order)
      out, acc = [0] * n, 1
      for k in order:
        if style != "perm" and r.random() < 0.35:
          acc *= r.choice([2, 2, 3, 4, 8])
        out[k] = acc
        acc *= ext[k]
      if style == "zero":
        for k in range(n):
          if r.random() < 0.4 or (k == n - 1 and 0 not in out):
            out[k] = 0
      return out
    if style == "rand":
      return [r.choice([0, 1, 1, 2, 2, 3, 4, 4, 5, 6, 8, 8, 12, 16, 24, 32, 64]) for _ in ext]
    raise ValueError(style)

  def layout(self, nmin=1, nmax=4, budget=256, max_depth=3, styles=None, pool=EXTENTS):
    r = self.r
    ext = self.leaves(nmin, nmax, budget, pool)
    style = r.choice(styles or ["col", "col", "row", "perm", "perm", "gap", "gap", "zero", "rand"])
    st = self.strides(ext, style)
    # size-1 modes get an arbitrary stride sometimes
    st = [r.choice([0, 1, 3, 7]) if e == 1 and r.random() < 0.5 else d for e, d in zip(ext, st)]
    tmpl = self.nest(list(range(len(ext))), max_depth)
    return Lay(self.rebuild(tmpl, ext), self.rebuild(tmpl, st))

  def pow2_layout(self, **kw):
    return self.layout(pool=[1, 2, 2, 2, 4, 4, 8, 16], **kw)

  def shape_tuple(self, nmin=1, nmax=3, budget=64, max_depth=2):
    ext = self.leaves(nmin, nmax, budget)
    return self.nest(ext, max_depth)

  def sub_layout(self, A, budget=None):
    """A layout likely to be admissible as B in A o B: extents/strides from A's prefix products."""
    r = self.r
    n = size(A)
    budget = budget or n
    ext, st = [], []
    used = 1
    for _ in range(r.randint(1, 3)):
      e = r.choice([d for d in (1, 2, 2, 3, 4, 4, 6, 8, 16) if used * d <= max(budget, 1)] or [1])
      ext.append(e)
      used *= e
    order = list(range(len(ext)))
    r.shuffle(order)
    acc = r.choice([1, 1, 1, 2, 4, 3])
    out = [0] * len(ext)
    for k in order:
      out[k] = acc
      acc *= ext[k] * (r.choice([1, 1, 2]) if r.random() < 0.3 else 1)
    tmpl = self.nest(list(range(len(ext))), 2)
    return Lay(self.rebuild(tmpl, ext), self.rebuild(tmpl, out))

  def tiler_elem(self, Ak, allow_nested=True):
    r = self.r
    x = r.random()
    if x < 0.15:
      return None
    if x < 0.35:
      return r.choice([d for d in (1, 2, 3, 4, 4, 8, 2, 6) if d <= max(size(Ak), 1)] or [1])
    if x < 0.45 and allow_nested and isinstance(Ak.shape, tuple) and len(Ak.shape) >= 2:
      m = r.randint(1, len(Ak.shape))
      return [self.tiler_elem(mode(Ak, j), False) for j in range(m)]
    return self.sub_layout(Ak)

  def tiler(self, A):
    """A by-mode tiler <...> for A (rank <= rank(A))."""
    m = self.r.randint(1, rank(A))
    el = [self.tiler_elem(mode(A, k)) for k in range(m)]
    if all(e is None for e in el):
      el[0] = 2
    return el

  def shape_for(self, A):
    m = self.r.randint(1, rank(A))
    return tuple(self.r.choice([d for d in (1, 2, 3, 4, 8) if d <= max(size(mode(A, k)), 1)] or [1])
                 for k in range(m))


def static_marked(s, r):
  """Occasionally add CuTe's static '_' markers to integers (the oracle and the library accept them)."""
  return re.sub(r"(?<![\w<])(\d+)", lambda m: "_" + m.group(1) if r.random() < 0.7 else m.group(1), s)


def build_queries(examples_path):
  g = Gen(SEED)
  r = g.r
  Q = []

  def add(op, *args):
    Q.append(f"{op} " + " ; ".join(a if isinstance(a, str) else fmt(a) for a in args))

  def lay(**kw):
    return g.layout(**kw)

  # ---------------- composition: layout o layout -------------------------------------------------
  for _ in range(260):
    A = lay(nmax=4)
    x = r.random()
    if x < 0.55:
      B = g.sub_layout(A)
    elif x < 0.85:
      B = lay(nmax=3, budget=64)
    else:
      B = g.sub_layout(A, budget=size(A) * 4)  # reaches past size(A): uses the unbounded last mode
    add("composition", A, B)
  for _ in range(60):      # power-of-two heavy, mostly admissible
    A = g.pow2_layout(styles=["col", "row", "perm", "gap"])
    add("composition", A, g.sub_layout(A))
  for _ in range(30):      # stride-0 on either side
    A = lay(styles=["zero"]) if r.random() < 0.5 else lay()
    B = lay(nmax=2, budget=32, styles=["zero", "col"])
    add("composition", A, B)
  # ---------------- composition: layout o int / shape --------------------------------------------
  for _ in range(70):
    A = lay()
    add("composition", A, r.choice([1, 2, 3, 4, 4, 6, 8, 8, 12, 16, 32, 64]))
  for _ in range(70):
    A = lay(nmin=2)
    add("composition", A, g.shape_for(A) if r.random() < 0.8 else g.shape_tuple(1, 3))
  # ---------------- composition: by-mode tiler ---------------------------------------------------
  for _ in range(170):
    A = lay(nmin=2, nmax=4)
    add("composition", A, g.tiler(A))
  # ---------------- composition: swizzle o layout ------------------------------------------------
  for _ in range(50):
    b, m = r.randint(0, 3), r.randint(0, 3)
    s = r.choice([b, b, b + 1, max(b, 1), 2, 3])
    A = g.pow2_layout(styles=["col", "row", "perm"], budget=256)
    add("composition", Sw(b, m, s), A)

  # ---------------- complement -------------------------------------------------------------------
  for _ in range(70):
    add("complement", lay(nmax=3, budget=64))
  for _ in range(110):
    A = lay(nmax=3, budget=64)
    add("complement", A, r.choice([cosize(A), cosize(A) * 2, size(A) * 4, 24, 32, 64, 128, 256, 7]))
  for _ in range(60):
    A = lay(nmax=3, budget=32)
    add("complement", A, g.shape_tuple(1, 3, budget=256, max_depth=2))

  # ---------------- divides ----------------------------------------------------------------------
  for _ in range(70):
    A = lay(nmax=4)
    x = r.random()
    if x < 0.4:
      B = g.sub_layout(A)
    elif x < 0.6:
      B = r.choice([2, 3, 4, 8, 16])
    else:
      B = g.tiler(A) if rank(A) > 1 else g.sub_layout(A)
    for op in ("logical_divide", "zipped_divide", "tiled_divide", "flat_divide"):
      if r.random() < 0.8:
        add(op, A, B)

  # ---------------- products ---------------------------------------------------------------------
  for _ in range(70):
    A = lay(nmax=3, budget=32)
    B = lay(nmax=3, budget=16) if r.random() < 0.75 else g.tiler(A) if rank(A) > 1 else r.choice([2, 3, 4])
    for op in ("logical_product", "zipped_product", "tiled_product", "flat_product"):
      if r.random() < 0.75:
        add(op, A, B)
  for _ in range(70):
    A = lay(nmin=1 if r.random() < 0.1 else 2, nmax=3, budget=32, max_depth=2)
    B = lay(nmax=3, budget=16, max_depth=2)
    add(r.choice(["blocked_product", "raked_product"]), A, B)

  # ---------------- inverses ---------------------------------------------------------------------
  for _ in range(90):
    add("right_inverse", lay())
  for _ in range(90):
    add("left_inverse", lay(styles=["col", "row", "perm", "gap", "gap", "zero", "rand"]))

  # ---------------- coalesce / filter / nullspace ------------------------------------------------
  for _ in range(70):
    add("coalesce", lay())
  for _ in range(50):
    A = lay(nmin=2)
    prof = tuple(r.choice([1, 1, (1, 1), 1]) for _ in range(r.randint(1, rank(A))))
    add("coalesce", A, prof if r.random() < 0.85 else 1)
  for _ in range(50):
    add("filter", lay(styles=["zero", "zero", "col", "rand"]))
  for _ in range(30):
    A = lay(nmin=2, styles=["zero", "rand", "col"])
    prof = tuple(r.choice([1, 1, (1, 1)]) for _ in range(r.randint(1, rank(A))))
    add("filter", A, prof if r.random() < 0.85 else 1)
  for _ in range(70):
    add("nullspace", lay(styles=["zero", "zero", "rand", "col", "gap"]))

  # ---------------- max_common_vector / layout ---------------------------------------------------
  for _ in range(140):
    A = lay(nmax=3, budget=128)
    x = r.random()
    if x < 0.4:
      # same shape, different strides
      B = Lay(A.shape, Gen.rebuild(A.shape, g.strides(flat(A.shape), r.choice(["col", "row", "perm", "gap"]))))
    elif x < 0.6:
      B = A
    else:
      B = lay(nmax=3, budget=128, styles=["col", "row", "perm"])
    add(r.choice(["max_common_vector", "max_common_layout"]), A, B)

  # ---------------- tile_to_shape ----------------------------------------------------------------
  for _ in range(100):
    A = lay(nmax=2, budget=16, max_depth=1)
    R = max(rank(A), r.randint(1, 3))
    trg = tuple(r.choice([1, 2, 4, 8, 12, 16, 3, 6, (2, 4), (4, 4), 32]) for _ in range(R))
    if r.random() < 0.5:
      # usually divisible: multiples of A's mode sizes
      trg = tuple(size(mode(A, k)) * r.choice([1, 2, 3, 4]) if k < rank(A) else t
                  for k, t in enumerate(trg))
    if r.random() < 0.1:
      trg = tuple(trg[:max(rank(A) - 1, 1)])      # rank too small (refused if < rank(A))
    if r.random() < 0.4:
      order = tuple(r.sample(range(1, len(trg) + 1), len(trg)))
      add("tile_to_shape", A, trg, order)
    else:
      add("tile_to_shape", A, trg)

  # ---------------- upcast / downcast ------------------------------------------------------------
  for _ in range(60):
    A = lay(styles=["col", "row", "perm", "gap", "zero", "rand"])
    add("upcast", r.choice(["2", "4", "8", "3", "16"]), A)
  for _ in range(60):
    A = lay(styles=["col", "row", "perm", "gap", "zero", "rand"], budget=64)
    add("downcast", r.choice(["2", "4", "8", "3"]), A)

  # ---------------- tv_layout --------------------------------------------------------------------
  for _ in range(70):
    thr = g.pow2_layout(nmin=1 if r.random() < 0.1 else 2, nmax=2, budget=64, max_depth=1, styles=["col", "row", "perm", "gap", "rand"])
    val = g.pow2_layout(nmax=2, budget=8, max_depth=1, styles=["col", "row", "perm", "rand"])
    add("tv_layout", thr, val)

  # ---------------- swizzle ----------------------------------------------------------------------
  for _ in range(45):
    b, m = r.randint(0, 3), r.randint(0, 4)
    s = r.choice([b, b + 1, b + 2, max(b, 1), 3, -b, -(b + 1)])
    add("swizzle", Sw(b, m, s), str(r.choice([16, 32, 64, 128, 256, 512])))

  # ---------------- size / cosize / rank / depth / eval ------------------------------------------
  for op in ("size", "cosize", "rank", "depth"):
    for _ in range(35):
      add(op, lay(styles=["col", "row", "perm", "gap", "zero", "rand"]))
  for _ in range(40):
    add("eval", lay())

  # ---------------- inputs CuTe is likely to refuse (or to accept wrongly) -----------------------
  odd = [3, 5, 6, 10, 12, 2, 4]
  for _ in range(130):     # composite extents vs. strides that do not divide them
    A = lay(nmin=2, nmax=3, budget=128, pool=odd, styles=["col", "row", "perm", "gap", "gap"])
    if r.random() < 0.6:
      B = Lay(r.choice([2, 3, 4, 6, 8]), r.choice([2, 3, 4, 5, 8, 9]))
    else:
      B = lay(nmin=2, nmax=2, budget=32, pool=[2, 3, 4, 5, 6], styles=["col", "perm", "gap", "rand"])
    add("composition", A, B)
  for _ in range(40):      # tilers with non-dividing modes, or more modes than the layout has
    A = lay(nmin=2, nmax=3, budget=128, pool=odd, max_depth=1)
    el = [Lay(r.choice([2, 4, 3]), r.choice([1, 2, 4])) if r.random() < 0.7 else r.choice([4, 8, 5])
          for _ in range(rank(A) + (1 if r.random() < 0.25 else 0))]
    add("composition", A, el)
  for _ in range(80):      # complement of (mostly) non-injective layouts
    A = lay(nmin=2, nmax=3, budget=64, styles=["rand"])
    add("complement", A, r.choice([64, 128, 256, size(A) * 2]))
  for _ in range(40):      # divides by tilers that do not divide the layout
    A = lay(nmin=1, nmax=3, budget=128, pool=odd, styles=["col", "perm", "gap"])
    B = Lay(r.choice([2, 4, 8]), r.choice([1, 2, 3, 4, 8])) if r.random() < 0.7 else \
        [Lay(r.choice([2, 4]), r.choice([1, 2, 3])) for _ in range(rank(A))]
    add(r.choice(["logical_divide", "zipped_divide", "tiled_divide", "flat_divide"]), A, B)
  for _ in range(30):      # products with a non-injective block
    A = lay(nmin=2, nmax=3, budget=32, styles=["rand", "zero"])
    B = lay(nmin=1, nmax=2, budget=16, styles=["col", "row", "perm"])
    add(r.choice(["logical_product", "zipped_product", "blocked_product", "raked_product"]), A, B)
  for _ in range(40):      # left_inverse: sorted strides that do not divide each other
    d0 = r.choice([2, 3, 4])
    d1 = d0 * r.choice([1, 2, 3]) + r.randint(1, d0 - 1)
    A = Lay((r.choice([2, 3, 4, 8]), r.choice([2, 3, 4])), (d0, d1) if r.random() < 0.7 else (d1, d0))
    add("left_inverse", A)
  for _ in range(30):      # upcast by N that does not divide the strides
    A = lay(nmax=3, styles=["rand", "gap"])
    add("upcast", r.choice(["2", "4", "8", "16"]), A)
  for _ in range(40):      # coalesce / filter with a profile that is not congruent-compatible
    A = lay(nmin=1, nmax=3, max_depth=1)
    prof = tuple(r.choice([1, (1, 1), (1, (1, 1))]) for _ in range(r.randint(1, rank(A) + 1)))
    add(r.choice(["coalesce", "filter"]), A, prof)
  for _ in range(30):      # max_common_* with non-dividing shapes
    A = lay(nmin=2, nmax=3, budget=128, pool=odd, styles=["col", "perm"])
    B = lay(nmin=2, nmax=3, budget=128, pool=odd, styles=["col", "row", "perm"])
    add(r.choice(["max_common_vector", "max_common_layout"]), A, B)

  for _ in range(50):      # CuTe's weak stride condition (stride < extent) lets these through: often not A o B
    s0 = r.choice([6, 10, 12, 5, 3])
    k = r.choice([d for d in range(2, s0) if s0 % d] or [2])
    A = Lay((s0, r.choice([2, 4, 8])), (r.choice([1, 1, 2]), r.choice([s0 + 1, 2 * s0 + 2, 10, 16, 32])))
    add("composition", A, Lay(r.choice([2, 4, 3, 8]), k) if r.random() < 0.7 else
        Lay((r.choice([2, 4]), 2), (k, r.choice([1, s0]))))
  for _ in range(40):
    A = lay(nmin=2, nmax=3, budget=32, styles=["rand"])
    add("complement", A)
  for _ in range(40):      # tile_to_shape with non-dividing targets
    A = lay(nmin=1, nmax=2, budget=16, max_depth=1, pool=[2, 3, 4, 6])
    trg = tuple(r.choice([4, 8, 6, 9, 10, 16]) for _ in range(max(rank(A), r.randint(1, 3))))
    add("tile_to_shape", A, trg)
  for _ in range(30):      # downcast of layouts without a unit stride
    A = lay(nmin=1, nmax=3, budget=64, styles=["gap", "rand", "row"])
    add("downcast", r.choice(["2", "4"]), A)
  for _ in range(40):      # products with a non-injective or gapped block
    A = lay(nmin=2, nmax=3, budget=32, styles=["rand", "gap"])
    B = lay(nmin=1, nmax=2, budget=16, styles=["col", "row", "perm", "gap"])
    add(r.choice(["logical_product", "zipped_product", "tiled_product", "flat_product",
                  "blocked_product", "raked_product"]), A, B)

  # ---------------- depth-3 layouts through most ops ---------------------------------------------
  for _ in range(20):
    A = g.deep_layout()
    add("composition", A, g.sub_layout(A) if r.random() < 0.6 else g.tiler(A))
  for _ in range(10):
    add("composition", lay(nmax=3), g.deep_layout(budget=32, styles=["col", "perm", "zero"]))
  for op in ("complement", "coalesce", "filter", "right_inverse", "left_inverse", "nullspace", "eval",
             "size", "cosize", "rank", "depth"):
    for _ in range(8):
      add(op, g.deep_layout(styles=["col", "row", "perm", "gap"] if op == "complement" else None))
  for op in ("logical_divide", "zipped_divide", "logical_product", "tiled_product", "max_common_vector",
             "max_common_layout"):
    for _ in range(8):
      A = g.deep_layout(budget=64 if "product" in op else 256)
      B = (g.sub_layout(A) if "divide" in op else lay(nmax=2, budget=8) if "product" in op else
           Lay(A.shape, Gen.rebuild(A.shape, g.strides(flat(A.shape), r.choice(["col", "row", "perm"])))))
      add(op, A, B)
  for _ in range(8):
    add(r.choice(["upcast", "downcast"]), r.choice(["2", "4"]), g.deep_layout(styles=["col", "perm", "gap"]))

  # ---------------- hand-written refusals / edge cases -------------------------------------------
  extra = [
      "composition (4,6):(1,4) ; 5:1", "composition (4,6):(1,4) ; 3:3", "composition (6,4):(1,6) ; 4:4",
      "composition (3,5):(1,3) ; 2:2", "composition (2,3):(1,2) ; (2,2):(1,2)", "composition 8:1 ; 16:1",
      "composition (4,4):(4,1) ; 16:1", "composition (4,4):(0,1) ; (2,2):(1,4)", "composition 1:0 ; 8:1",
      "composition (2,2):(1,2) ; <(2,2):(1,2)>", "composition 4:1 ; <2:1, 2:1>",
      "composition (4,8):(1,4) ; <_, _>", "composition (4,8):(1,4) ; <_>", "composition (4,8):(1,4) ; <2,_>",
      "composition (4,8):(1,4) ; (2,2,2)", "composition (12,(4,8)):(59,(13,1)) ; <3:4, <2:1, 4:2>>",
      "complement (2,2):(1,1) ; 16", "complement (4,2):(1,2) ; 32", "complement (2,4):(2,1)",
      "complement 3:2 ; 24", "complement (3,3):(1,2) ; 36", "complement 4:3 ; 12", "complement 1:0",
      "complement 4:1 ; (4,4)", "complement 4:2 ; (2,8)", "complement (2,2):(1,8) ; (4,8)",
      "logical_divide 8:1 ; 3:1", "logical_divide (3,4):(1,5) ; 2:1", "logical_divide (4,6):(1,4) ; <2:1, 4:1>",
      "logical_divide (4,4):(1,4) ; <2:1, 2:1, 2:1>", "zipped_divide (4,4):(1,4) ; 5:1",
      "logical_product (2,2):(1,1) ; 4:1", "logical_product 4:2 ; 3:1", "blocked_product 4:1 ; <2:1>",
      "raked_product (2,2):(1,2) ; 3", "logical_product (2,2):(1,2) ; <2:1, 2:1, 2:1>",
      "right_inverse (2,2):(1,1)", "right_inverse 4:0", "right_inverse (4,2):(2,1)", "right_inverse 1:0",
      "left_inverse (2,2):(1,1)", "left_inverse 4:0", "left_inverse (4,2):(2,1)", "left_inverse 1:0",
      "nullspace 4:1", "nullspace (4,2,3):(0,0,0)", "nullspace 1:0", "nullspace (2,1,3):(0,5,1)",
      "coalesce 1:0", "coalesce (1,1):(3,5)", "coalesce (4,(1,1)):(1,(7,9)) ; (1,1)", "coalesce (2,4):(4,1) ; (1,1,1)",
      "filter (1,4,1):(9,0,3)", "filter 1:7", "filter ((1,2),(2,3)):((5,0),(0,1))",
      "max_common_vector 4:1 ; 4:2", "max_common_vector (4,8):(8,1) ; (4,8):(1,4)", "max_common_layout 8:1 ; 8:1",
      "max_common_layout (2,4):(4,1) ; (2,4):(4,1)", "max_common_vector 8:0 ; 8:1",
      "tile_to_shape (2,2):(1,2) ; (6,4)", "tile_to_shape (2,2):(1,2) ; (8,8) ; (2,1)", "tile_to_shape (2,2,2):(1,2,4) ; (8,8)",
      "tile_to_shape (4,2):(2,1) ; (8,(2,4))", "tile_to_shape 4:1 ; (8,8,2) ; (3,1,2)",
      "upcast 4 ; (8,3):(1,8)", "upcast 3 ; 8:2", "upcast 2 ; 8:0", "upcast 4 ; (2,8):(4,1)",
      "downcast 2 ; 8:2", "downcast 4 ; (8,2):(1,16)", "downcast 2 ; (4,4):(4,1)",
      "tv_layout (4,8):(8,1) ; (2,2):(2,1)", "tv_layout (2,2):(1,1) ; 2:1", "tv_layout 32:1 ; 4:1",
      "swizzle Sw<0,0,0> ; 8", "swizzle Sw<3,3,3> ; 1024", "swizzle Sw<2,4,-3> ; 256", "swizzle Sw<1,0,1> ; 1",
      "size ((2,3),(1,5)):((1,2),(0,6))", "cosize 4:0", "cosize (2,2):(0,0)", "rank (((2,3)),4):(((1,2)),6)",
      "depth 7:3", "depth ((2,(3,2)),5):((1,(2,6)),12)", "eval (_4,(_2,_3)):(_1,(_8,_16))",
      "eval ((1,2),(4,1)):((0,1),(2,0))", "composition (_4,_8):(_8,_1) ; <_2:_1, _4:_2>",
      "raked_product 6:8 ; 6:4", "blocked_product 4:1 ; 8:1", "tv_layout 16:4 ; 8:1",
      "zipped_divide (4,6):(1,4) ; <2:1, _>", "zipped_divide ((2,2),6):((1,4),8) ; <2:1, _>",
      "swizzle Sw<3,0,2> ; 64", "composition Sw<3,0,2> ; 64:1", "swizzle Sw<2,1,-2> ; 64",
      "composition Sw<1,1,1> ; 8:1", "composition Sw<2,2,2> ; (4,(4,2)):(16,(1,4))", "composition Sw<0,2,3> ; 16:1",
  ]
  Q.extend(extra)

  # static '_' markers on a sample of queries (oracle runs in static mode anyway)
  Q = [q if r.random() < 0.9 or "Sw<" in q or q.startswith(("upcast", "downcast")) else
       q.split(" ", 1)[0] + " " + static_marked(q.split(" ", 1)[1], r) for q in Q]

  examples = []
  with open(examples_path) as f:
    for line in f:
      line = line.strip()
      if line and not line.startswith("#"):
        examples.append(line)
  out, seen = [], set()
  for q in examples + Q:
    key = re.sub(r"\s+", "", q).replace("_", "") if not q.startswith("bogus") else q
    # '_' stripping above would merge '<_,..>' with '<,..>', which do not exist; harmless for dedup
    if key in seen:
      continue
    seen.add(key)
    out.append(q)
  return out


# ================================================================================================
# Running the oracle
# ================================================================================================


def run_oracle(oracle, queries, batch, jobs, verbose):
  env = dict(os.environ)
  env.setdefault("CUTE_ORACLE_CACHE", os.path.join(tempfile.gettempdir(), "cute_oracle_cache"))
  batches = [queries[i:i + batch] for i in range(0, len(queries), batch)]

  def one(k):
    t0 = time.time()
    p = subprocess.run([sys.executable, oracle, "--mode", "static", "--values", str(VALUES_LIMIT)],
                       input="\n".join(batches[k]) + "\n", capture_output=True, text=True, env=env)
    if p.returncode != 0:
      raise RuntimeError(f"oracle failed on batch {k}:\n{p.stderr[-3000:]}")
    recs = [json.loads(line) for line in p.stdout.splitlines() if line.strip()]
    if len(recs) != len(batches[k]):
      raise RuntimeError(f"batch {k}: {len(recs)} records for {len(batches[k])} queries")
    if verbose:
      print(f"  batch {k + 1}/{len(batches)}: {len(recs)} records, {time.time() - t0:.0f}s", file=sys.stderr)
    return recs

  with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as ex:
    results = list(ex.map(one, range(len(batches))))
  return [rec for recs in results for rec in recs]


def strip_static(s):
  return re.sub(r"(?<![A-Za-z0-9])_(?=-?\d)", "", s)


FIELDS = ["id", "op", "args", "ok", "sound", "result", "error", "size", "cosize", "rank", "depth",
          "values", "tiler", "layout_mn"]


def annotate(rec):
  rec.pop("raw", None)
  for k in ("tiler", "layout_mn"):
    if k in rec:
      rec[k] = strip_static(rec[k])
  if rec["op"] == "composition" and rec["ok"]:
    A, B = parse(rec["args"][0]), parse(rec["args"][1])
    if isinstance(A, Sw):
      if rec.get("values") is None:
        raise RuntimeError(f"swizzle composition without values: {rec}")
      rec["sound"] = composition_sound(A, B, rec["values"])
    else:
      R = parse(rec["result"])
      if "values" in rec and [ev(R, i) for i in range(len(rec["values"]))] != rec["values"]:
        raise RuntimeError(f"evaluator disagrees with the oracle on {rec}")
      rec["sound"] = composition_sound(A, B, R)
  # self-check of the evaluator on every layout result
  if rec["ok"] and "values" in rec and rec["op"] not in ("swizzle",) and not rec["result"].startswith("Sw<"):
    R = parse(rec["result"])
    if [ev(R, i) for i in range(len(rec["values"]))] != rec["values"]:
      raise RuntimeError(f"evaluator disagrees with the oracle on {rec}")
  return {k: rec[k] for k in FIELDS if k in rec}


def main():
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--oracle", default=os.environ.get("CUTE_ORACLE", DEFAULT_ORACLE))
  ap.add_argument("--examples", default=None, help="examples.txt (default: next to the oracle)")
  ap.add_argument("--out", default=DEFAULT_OUT)
  ap.add_argument("--batch", type=int, default=200)
  ap.add_argument("--jobs", type=int, default=max(1, min(4, os.cpu_count() or 1)))
  ap.add_argument("--dry-run", action="store_true")
  ap.add_argument("-q", "--quiet", action="store_true")
  ns = ap.parse_args()

  oracle = os.path.abspath(ns.oracle)
  examples = ns.examples or os.path.join(os.path.dirname(oracle), "examples.txt")
  queries = build_queries(examples)
  if ns.dry_run:
    print("\n".join(queries))
    return
  if not os.path.exists(oracle):
    sys.exit(f"gen_cute_fixtures: oracle not found at {oracle} (use --oracle or $CUTE_ORACLE)")
  t0 = time.time()
  if not ns.quiet:
    print(f"running {len(queries)} queries through {oracle} ...", file=sys.stderr)
  recs = run_oracle(oracle, queries, ns.batch, ns.jobs, not ns.quiet)
  out = []
  for i, rec in enumerate(recs):
    rec["id"] = i
    out.append(annotate(rec))
  os.makedirs(os.path.dirname(os.path.abspath(ns.out)), exist_ok=True)
  with open(ns.out, "w") as f:
    for rec in out:
      f.write(json.dumps(rec, separators=(",", ":")) + "\n")
  if not ns.quiet:
    per_op = collections.Counter(r["op"] for r in out)
    bad = collections.Counter(r["op"] for r in out if not r["ok"])
    unsound = sum(1 for r in out if r.get("sound") is False)
    for op in sorted(per_op):
      print(f"  {op:18s} {per_op[op]:5d}  refused {bad[op]:4d}", file=sys.stderr)
    print(f"{len(out)} records, {sum(bad.values())} refused, {unsound} unsound compositions, "
          f"{os.path.getsize(ns.out)} bytes, {time.time() - t0:.0f}s -> {ns.out}", file=sys.stderr)


if __name__ == "__main__":
  main()
