"""layoutalg.verify: proofs of layout properties (bank conflicts, coverage, vectors, lanes)."""

from .model import LdsModel

__all__ = ["LdsModel"]
