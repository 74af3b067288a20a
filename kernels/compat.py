"""Old import paths of modules that moved into subpackages (issue 13), kept for one release.

``import kernels.gemm`` (or ``from kernels.cuda_gemm import X``) returns the module that now
lives at the new path: the very same module object, so ``monkeypatch.setattr`` on the old name
patches the code that runs.  The old paths are served by an import hook, not by stub files, so
no module of the project depends on them (``tests/test_layering.py`` refuses project code that
imports an old path) and there is no file at the old path for an import cycle to go through.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import types
from typing import Dict, Tuple, Union

#: old module path -> new module path, or a tuple of them when names moved out of the old module
#: into another (``kernels.cuda_gemm.gemm`` is now ``kernels.nvidia.dispatch.gemm``)
MOVED: Dict[str, Union[str, Tuple[str, ...]]] = {
    "kernels.attention_ir": ("kernels.ir.attention", "kernels.printer.attention"),
    "kernels.emit": "kernels.printer.hip",
    "kernels.gate": "kernels.verify.gate",
    "kernels.attention_gate": "kernels.verify.attention_gate",
    "kernels.gate_common": "kernels.verify.gate_common",
    "kernels.cache": "kernels.toolchain.cache",
    "kernels.codeobject": "kernels.toolchain.codeobject",
    "kernels.launch": "kernels.runtime.rocm",
    "kernels.gemm": "kernels.amd.gemm",
    "kernels.gemm_plan": "kernels.amd.gemm_plan",
    "kernels.flash_attention": ("kernels.amd.flash_attention", "kernels.amd.attention_api"),
    "kernels.attention_plan": "kernels.amd.attention_plan",
    "kernels.decode": "kernels.amd.decode",
    "kernels.decode_splitkv": "kernels.amd.decode_splitkv",
    "kernels.registry": "kernels.amd.registry",
    "kernels.attention_registry": "kernels.amd.attention_registry",
    "kernels.cuda_gemm": ("kernels.nvidia.gemm", "kernels.nvidia.dispatch"),
    "kernels.cuda_wgmma": "kernels.nvidia.wgmma",
    "kernels.cuda_attention": ("kernels.nvidia.attention", "kernels.nvidia.dispatch"),
    "kernels.cuda_wgmma_attention": "kernels.nvidia.wgmma_attention",
    "kernels.cuda": "kernels.nvidia",
    "kernels.cuda.compile": "kernels.toolchain.nvrtc",
    "kernels.cuda.launch": "kernels.runtime.cuda",
    "kernels.cuda.builder": "kernels.nvidia.builder",
    "kernels.cuda.layout_c": "kernels.nvidia.layout_c",
    "kernels.cuda.prelude": "kernels.nvidia.prelude",
    "kernels.cuda.amd_flavour": ("kernels.nvidia.amd_flavour", "kernels.nvidia.amd_flavour_checks"),
}


def new_paths(old: str) -> Tuple[str, ...]:
    """The module(s) that hold what ``old`` held (empty if ``old`` did not move)."""
    new = MOVED.get(old, ())
    return (new,) if isinstance(new, str) else tuple(new)


class MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves ``MOVED``'s old names: the module at the new name itself where one module holds
    everything the old one did (so monkeypatching the old name patches the code that runs),
    else a :class:`_Proxy` over the new modules."""

    def __init__(self) -> None:
        self._own_spec: Dict[str, object] = {}

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        news = new_paths(spec.name)
        is_package = any(old.startswith(spec.name + ".") for old in MOVED)
        if is_package or len(news) > 1:
            return _Proxy(spec.name, news, is_package)
        module = importlib.import_module(news[0])
        self._own_spec[module.__name__] = module.__spec__
        return module

    def get_code(self, fullname):
        """``python -m OLD.PATH``: run the new module that has the command-line entry point
        (``python -m kernels.cuda.amd_flavour`` runs ``kernels.nvidia.amd_flavour_checks``)."""
        mains = [n for n in new_paths(fullname) if _has_main(n)]
        if not mains:
            raise ImportError(f"{fullname} (moved to {', '.join(new_paths(fullname))}) has no "
                              "command-line entry point")
        return compile(f"import runpy\nrunpy.run_module({mains[0]!r}, run_name='__main__', "
                       "alter_sys=True)\n", f"<{fullname}: moved to {mains[0]}>", "exec")

    def exec_module(self, module):
        # the import system stamped the old name's spec on the real module: give its own back
        if module.__name__ in self._own_spec:
            module.__spec__ = self._own_spec[module.__name__]


def _has_main(module: str) -> bool:
    spec = importlib.util.find_spec(module)
    source = spec.loader.get_source(module) if spec and spec.loader else None
    return bool(source) and 'if __name__ == "__main__"' in source


class _Proxy(types.ModuleType):
    """An old module whose names now live in several modules (``kernels.cuda_gemm``:
    ``kernels.nvidia.gemm`` and ``kernels.nvidia.dispatch``), or an old package whose submodules
    moved to different places (``kernels.cuda``: its ``compile`` is ``kernels.toolchain.nvrtc``).
    Attributes are looked up in the new modules in order; an old package's submodules come back
    to the finder.  As in the old package, a name the package exports shadows the submodule of
    that name (``kernels.cuda.launch`` is the function even after ``import kernels.cuda.launch``).
    Setting an attribute on a proxy does not reach the new modules: patch those."""

    def __init__(self, old: str, news: Tuple[str, ...], is_package: bool) -> None:
        mods = tuple(importlib.import_module(n) for n in news)
        super().__init__(old, mods[0].__doc__)
        self.__dict__["_mods"] = mods
        if is_package:
            self.__path__ = []                # ``old.sub`` comes back to the finder
        self.__all__ = [n for m in mods for n in getattr(m, "__all__", ())]

    def _new_names(self) -> str:
        return ", ".join(m.__name__ for m in self.__dict__["_mods"])

    def _owner(self, name: str):
        return next((m for m in self.__dict__["_mods"] if hasattr(m, name)), None)

    def __getattr__(self, name: str):
        m = self._owner(name)
        value = getattr(m, name) if m is not None else None
        if f"{self.__name__}.{name}" in MOVED and (m is None or
                                                   isinstance(value, types.ModuleType)):
            return importlib.import_module(f"{self.__name__}.{name}")   # the old submodule
        if m is not None:
            return value
        raise AttributeError(f"module {self.__name__!r} (moved to {self._new_names()}) has no "
                             f"attribute {name!r}")

    def __setattr__(self, name: str, value) -> None:
        if isinstance(value, types.ModuleType) and f"{self.__name__}.{name}" in MOVED:
            return                            # the import system binding an old submodule:
        super().__setattr__(name, value)      # __getattr__ resolves it (shadowing included)


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (idempotent)."""
    if not any(isinstance(f, MovedModuleFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, MovedModuleFinder())
