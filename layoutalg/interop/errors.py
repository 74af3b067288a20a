"""The interop error: an object from another tool that has no layoutalg equivalent."""

from __future__ import annotations

from ..errors import LayoutError


class InteropError(LayoutError):
    """A foreign layout cannot be translated (not representable, malformed, tool missing)."""
