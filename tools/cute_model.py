#!/usr/bin/env python3
"""A tiny, self-contained model of CuTe layouts for tools/gen_cute_fixtures.py: parsing and
printing the cute_oracle query grammar, evaluation, and whether an oracle composition result
really is ``A o B`` (the fixtures' ``"sound"`` field).

It is independent of layoutalg on purpose: the fixtures judge layoutalg, so the judge must not
be layoutalg.  Split out of gen_cute_fixtures.py unchanged (2-space indentation kept).
"""
import collections
import re

# ================================================================================================
# A tiny, self-contained model of CuTe layouts (parsing, printing, evaluation).
#   int tuple : int | tuple of int tuples
#   layout    : Lay(shape, stride)
#   tiler     : list of (Lay | int tuple | list | None)      (None is '_')
#   swizzle   : Sw(b, m, s)
# ================================================================================================


class Lay(collections.namedtuple("Lay", "shape stride")):
  pass


class Sw(collections.namedtuple("Sw", "b m s")):
  def __call__(self, x):
    bit_msk = (1 << self.b) - 1
    yyy = bit_msk << (self.m + max(0, self.s))
    t = x & yyy
    t = t >> self.s if self.s >= 0 else t << -self.s
    return x ^ t


_TOK = re.compile(r"\s*(Sw<|_?-?\d+|[(),:<>_])")


def _tokenize(s):
  s, pos, out = s.strip(), 0, []
  while pos < len(s):
    m = _TOK.match(s, pos)
    if not m:
      raise ValueError(f"bad input {s!r} at {pos}")
    out.append(m.group(1))
    pos = m.end()
    while pos < len(s) and s[pos].isspace():
      pos += 1
  return out


def parse(s):
  """Parse CuTe syntax (layout, int tuple, tiler, '_', swizzle). Static markers are accepted."""
  toks, i = _tokenize(s), [0]

  def peek():
    return toks[i[0]] if i[0] < len(toks) else None

  def eat(t=None):
    cur = peek()
    if cur is None or (t is not None and cur != t):
      raise ValueError(f"expected {t!r} got {cur!r} in {s!r}")
    i[0] += 1
    return cur

  def inttuple():
    if peek() == "(":
      eat("(")
      el = [inttuple()]
      while peek() == ",":
        eat(",")
        el.append(inttuple())
      eat(")")
      return tuple(el)
    return int(eat().lstrip("_"))

  def anything():
    cur = peek()
    if cur == "Sw<":
      eat()
      b = inttuple(); eat(",")
      m = inttuple(); eat(",")
      z = inttuple(); eat(">")
      return Sw(b, m, z)
    if cur == "<":
      eat("<")
      el = [anything()]
      while peek() == ",":
        eat(",")
        el.append(anything())
      eat(">")
      return el
    if cur == "_":
      eat()
      return None
    it = inttuple()
    if peek() == ":":
      eat(":")
      return Lay(it, inttuple())
    return it

  v = anything()
  if peek() is not None:
    raise ValueError(f"trailing tokens in {s!r}")
  return v


def fmt(x):
  """CuTe print format without static markers."""
  if isinstance(x, Lay):
    return f"{fmt(x.shape)}:{fmt(x.stride)}"
  if isinstance(x, Sw):
    return f"Sw<{x.b},{x.m},{x.s}>"
  if isinstance(x, list):
    return "<" + ",".join(fmt(e) for e in x) + ">"
  if x is None:
    return "_"
  if isinstance(x, tuple):
    return "(" + ",".join(fmt(e) for e in x) + ")"
  return str(x)


def flat(t):
  if isinstance(t, tuple):
    return [y for e in t for y in flat(e)]
  return [t]


def size(t):
  if isinstance(t, Lay):
    t = t.shape
  p = 1
  for e in flat(t):
    p *= e
  return p


def depth(t):
  if isinstance(t, tuple):
    return 1 + max(depth(e) for e in t)
  return 0


def rank(t):
  if isinstance(t, Lay):
    t = t.shape
  return len(t) if isinstance(t, tuple) else 1


def mode(L, k):
  if isinstance(L.shape, tuple):
    return Lay(L.shape[k], L.stride[k])
  assert k == 0
  return L


def ev(L, i):
  """CuTe's L(i) for an integer i: column-major idx2crd, the last (flattened) mode is unbounded."""
  sh, st = flat(L.shape), flat(L.stride)
  r = 0
  for k, (s, d) in enumerate(zip(sh, st)):
    if k == len(sh) - 1:
      r += i * d
    else:
      r += (i % s) * d
      i //= s
  return r


def cosize(L):
  return ev(L, size(L) - 1) + 1 if size(L) else 0


# ================================================================================================
# Soundness of composition
# ================================================================================================


def _same_function(R, F, n):
  return size(R) == n and all(ev(R, i) == F(i) for i in range(n))


def composition_sound(A, B, R):
  """Is R the composition A o B?  A: Lay | Sw, B: Lay | int | int tuple | tiler list, R: Lay or
  a values list (for swizzle compositions)."""
  if isinstance(A, Sw):
    n = size(B)
    return len(R) == n and all(R[i] == A(ev(B, i)) for i in range(n))
  if isinstance(B, int):
    B = Lay(B, 1)
  if isinstance(B, Lay):
    return _same_function(R, lambda i: ev(A, ev(B, i)), size(B))
  # by-mode (tuple of shapes or tiler <...>): mode k of R must be A_k o B_k ('_': A_k itself).
  # CuTe's composition drops the modes of A that the tiler does not reach, so rank(R) == len(B).
  elems = list(B)
  if len(elems) > rank(A) or rank(R) != len(elems):
    return False
  for k, e in enumerate(elems):
    Ak, Rk = mode(A, k), mode(R, k)
    if e is None:
      if not _same_function(Rk, lambda i: ev(Ak, i), size(Ak)):
        return False
    elif not composition_sound(Ak, e, Rk):
      return False
  return True
