"""Is the installed ``kernels`` / ``visualize`` / ``mfma_specs`` really layoutalg's?

The distribution installs four top-level packages, and two of the names are common: Hugging
Face's ``kernels`` is in many ML environments, and ``visualize`` is taken on PyPI too.  The
repository layout is fixed by design, so instead of renaming we refuse to run silently on a
foreign package:

* *shadowed*: a package of that name is found somewhere other than next to ``layoutalg`` (an
  earlier ``sys.path`` entry: another distribution, a folder in the working directory);
* *clobbered*: the package sits next to ``layoutalg`` but its ``__init__.py`` is not the file our
  wheel installed (another distribution overwrote it; detected from the wheel's ``RECORD``
  hashes, so it applies to wheel installs, not to a source checkout), or a file the wheel
  installed is gone (e.g. the HIP headers: every compile would fail).

``import layoutalg`` runs the cheap *shadowed* check and warns (:class:`PackageClashWarning`);
the ``layoutalg`` console script runs both and exits 3 with the message.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import warnings
from pathlib import Path
from typing import List

__all__ = ["SIBLINGS", "PackageClashWarning", "package_clashes", "warn_on_clashes"]

SIBLINGS = ("mfma_specs", "kernels", "visualize")
_ADVICE = ("install layoutalg into its own virtualenv (python3 -m venv .venv && "
           ".venv/bin/pip install layoutalg), or uninstall the other package")


class PackageClashWarning(UserWarning):
    """A top-level package layoutalg ships is shadowed or overwritten by a foreign one."""


def _root() -> Path:
    return Path(__file__).resolve().parent.parent


def _shadowed(name: str) -> List[str]:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):  # a broken foreign package: report it as foreign
        return [f"the top-level package {name!r} cannot be located; {_ADVICE}"]
    if spec is None or not spec.origin:  # not installed (its commands are absent) / namespace
        return [] if spec is None else [
            f"{name!r} resolves to a namespace package at {list(spec.submodule_search_locations)},"
            f" not layoutalg's {_root() / name}; {_ADVICE}"]
    found = Path(spec.origin).resolve().parent
    want = _root() / name
    if found != want:
        return [f"the top-level package {name!r} is imported from {found}, not layoutalg's "
                f"{want}: another distribution or folder named {name!r} comes first on "
                f"sys.path; {_ADVICE}"]
    return []


def _clobbered() -> List[str]:
    """Files of the installed wheel that are gone, and ``__init__.py`` files whose content
    differs from its RECORD (overwritten).  Existence of every file, hashes of four: cheap."""
    from importlib import metadata
    try:
        dist = metadata.distribution("layoutalg")
    except metadata.PackageNotFoundError:
        return []
    if not _is_wheel_install(dist):
        return []
    out, missing = [], []
    for f in dist.files or ():
        parts = f.parts
        if parts[0] not in SIBLINGS + ("layoutalg",) or "__pycache__" in parts:
            continue
        path = Path(dist.locate_file(f))
        if path.resolve().parents[len(parts) - 2] != _root() / parts[0]:
            continue  # a different installation of layoutalg (e.g. an editable one) is in use
        if not path.exists():
            missing.append(str(path))
            continue
        if len(parts) != 2 or parts[1] != "__init__.py" or not f.hash:
            continue
        data = path.read_bytes()
        digest = base64.urlsafe_b64encode(hashlib.new(f.hash.mode, data).digest()).rstrip(b"=")
        if digest.decode() != f.hash.value:
            out.append(f"{path} is not the file layoutalg installed: another distribution "
                       f"with a top-level package {parts[0]!r} overwrote it; {_ADVICE}")
    if missing:
        more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        out.append(f"files installed by layoutalg's wheel are missing: "
                   f"{', '.join(missing[:3])}{more} (a damaged install: reinstall layoutalg)")
    return out


def _is_wheel_install(dist) -> bool:
    """Only an installed wheel's RECORD says which files must exist.  A checkout's
    ``layoutalg.egg-info`` (build metadata found through the checkout on ``sys.path``; its
    SOURCES.txt goes stale when files move) and an editable install are not checked."""
    if dist.read_text("RECORD") is None:
        return False
    direct = dist.read_text("direct_url.json") or ""
    try:
        return not json.loads(direct).get("dir_info", {}).get("editable", False)
    except ValueError:
        return True


def package_clashes(deep: bool = True) -> List[str]:
    """One plain sentence per problem; empty when every sibling package is layoutalg's own.

    ``deep`` also checks the wheel's RECORD: every installed file present, the packages'
    ``__init__.py`` files unchanged.
    """
    out: List[str] = []
    for name in SIBLINGS:
        out += _shadowed(name)
    if deep and not out:
        out += _clobbered()
    return out


def warn_on_clashes() -> None:
    """Warn (once per process) about shadowed sibling packages; cheap (no imports)."""
    for msg in package_clashes(deep=False):
        warnings.warn(msg, PackageClashWarning, stacklevel=3)
