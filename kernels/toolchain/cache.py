"""Content-hash cache of build products (code objects, emulator libraries).

An entry is two files under ``<root>/<kind>/``: ``<key>.<suffix>`` (the product) and
``<key>.json`` (its size and SHA-256, plus free-form metadata).  ``key`` is the SHA-256 of
everything that determines the product (source, arch, flags, compiler version), see
:func:`content_key`.  A read verifies size and checksum; a truncated, corrupted or half-written
entry is deleted and reported as ``"corrupt"`` so the caller rebuilds it.  Writes go to a
temporary file and are renamed into place, so concurrent builders never see a partial entry.

The root is ``$LAYOUTALG_CACHE`` when set, else ``~/.cache/layoutalg``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Union

__all__ = ["Cache", "CacheEntry", "content_key", "default_cache", "default_root"]

log = logging.getLogger("kernels.cache")


def default_root() -> Path:
    env = os.environ.get("LAYOUTALG_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "layoutalg"


def content_key(*parts: Union[str, bytes]) -> str:
    """SHA-256 over ``parts`` (each length-prefixed, so ("ab","c") != ("a","bc"))."""
    h = hashlib.sha256()
    for p in parts:
        b = p.encode() if isinstance(p, str) else bytes(p)
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@dataclass
class CacheEntry:
    path: Path          # the product file
    status: str         # "hit", "miss" (built now) or "corrupt" (found damaged, rebuilt now)
    meta: dict


class Cache:
    def __init__(self, root: Union[str, Path, None] = None):
        self.root = Path(root) if root is not None else default_root()

    def paths(self, kind: str, key: str, suffix: str):
        d = self.root / kind
        return d / f"{key}.{suffix}", d / f"{key}.json"

    def lookup(self, kind: str, key: str, suffix: str) -> tuple:
        """``(path, meta)`` of a verified entry; ``(None, None)`` if absent; ``(None, "corrupt")``
        if it was present but damaged (it is deleted)."""
        product, side = self.paths(kind, key, suffix)
        if not product.exists() and not side.exists():
            return None, None
        try:
            meta = json.loads(side.read_text())
            ok = (product.stat().st_size == meta["size"] and _sha256_file(product) == meta["sha256"])
        except (OSError, ValueError, KeyError, TypeError):
            ok = False
        if ok:
            return product, meta
        log.warning("cache entry %s/%s is corrupted or truncated; rebuilding", kind, key)
        for p in (product, side):
            try:
                p.unlink()
            except OSError:
                pass
        return None, "corrupt"

    def store(self, kind: str, key: str, suffix: str, data: bytes, meta: Optional[dict] = None) -> Path:
        product, side = self.paths(kind, key, suffix)
        product.parent.mkdir(parents=True, exist_ok=True)
        full = dict(meta or {}, size=len(data), sha256=hashlib.sha256(data).hexdigest(),
                    created=time.time())
        for path, payload in ((product, data), (side, json.dumps(full, indent=1).encode())):
            fd, tmp = tempfile.mkstemp(dir=product.parent, prefix=".tmp-")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(payload)
                os.replace(tmp, path)
            except BaseException:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
                raise
        return product

    def get_or_build(self, kind: str, key: str, suffix: str,
                     build: Callable[[], bytes], meta: Optional[dict] = None) -> CacheEntry:
        """The verified entry for ``key``, building (and storing) it with ``build()`` when it is
        missing or damaged."""
        path, found = self.lookup(kind, key, suffix)
        if path is not None:
            return CacheEntry(path, "hit", found)
        data = build()
        path = self.store(kind, key, suffix, data, meta)
        return CacheEntry(path, "corrupt" if found == "corrupt" else "miss", dict(meta or {}))


def default_cache() -> Cache:
    """A :class:`Cache` at :func:`default_root` (read from the environment on every call)."""
    return Cache()
