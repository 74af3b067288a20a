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
from typing import Dict

#: old module path -> new module path
MOVED: Dict[str, str] = {
    "kernels.attention_ir": "kernels.ir.attention",
    "kernels.emit": "kernels.printer.hip",
    "kernels.gate": "kernels.verify.gate",
    "kernels.attention_gate": "kernels.verify.attention_gate",
    "kernels.gate_common": "kernels.verify.gate_common",
    "kernels.cache": "kernels.toolchain.cache",
    "kernels.codeobject": "kernels.toolchain.codeobject",
    "kernels.launch": "kernels.runtime.rocm",
    "kernels.gemm": "kernels.amd.gemm",
    "kernels.gemm_plan": "kernels.amd.gemm_plan",
    "kernels.flash_attention": "kernels.amd.flash_attention",
    "kernels.attention_plan": "kernels.amd.attention_plan",
    "kernels.decode": "kernels.amd.decode",
    "kernels.decode_splitkv": "kernels.amd.decode_splitkv",
    "kernels.registry": "kernels.amd.registry",
    "kernels.attention_registry": "kernels.amd.attention_registry",
    "kernels.cuda_gemm": "kernels.nvidia.gemm",
    "kernels.cuda_wgmma": "kernels.nvidia.wgmma",
    "kernels.cuda_attention": "kernels.nvidia.attention",
    "kernels.cuda_wgmma_attention": "kernels.nvidia.wgmma_attention",
    "kernels.cuda": "kernels.nvidia",
    "kernels.cuda.compile": "kernels.toolchain.nvrtc",
    "kernels.cuda.launch": "kernels.runtime.cuda",
    "kernels.cuda.builder": "kernels.nvidia.builder",
    "kernels.cuda.layout_c": "kernels.nvidia.layout_c",
    "kernels.cuda.prelude": "kernels.nvidia.prelude",
    "kernels.cuda.amd_flavour": "kernels.nvidia.amd_flavour",
}


class MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves ``MOVED``'s old names with the modules at the new names."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def __init__(self) -> None:
        self._own_spec: Dict[str, object] = {}

    def create_module(self, spec):
        if any(old.startswith(spec.name + ".") for old in MOVED):
            return _PackageProxy(spec.name)
        module = importlib.import_module(MOVED[spec.name])
        self._own_spec[module.__name__] = module.__spec__
        return module

    def exec_module(self, module):
        # the import system stamped the old name's spec on the real module: give its own back
        if module.__name__ in self._own_spec:
            module.__spec__ = self._own_spec[module.__name__]


class _PackageProxy(types.ModuleType):
    """An old package whose submodules moved to different places (``kernels.cuda``: its
    ``compile`` is ``kernels.toolchain.nvrtc``, its ``launch`` module ``kernels.runtime.cuda``):
    the new package's names, and submodules served by the finder.  As in the old package, a
    name the package exports shadows the submodule of that name (``kernels.cuda.launch`` is the
    function even after ``import kernels.cuda.launch``)."""

    def __init__(self, old: str) -> None:
        new = importlib.import_module(MOVED[old])
        super().__init__(old, new.__doc__)
        self.__dict__["_new"] = new
        self.__path__ = []                    # a package: ``old.sub`` comes back to the finder
        self.__all__ = list(getattr(new, "__all__", ()))

    def __getattr__(self, name: str):
        new = self.__dict__["_new"]
        if hasattr(new, name) or f"{self.__name__}.{name}" not in MOVED:
            return getattr(new, name)
        return importlib.import_module(f"{self.__name__}.{name}")

    def __setattr__(self, name: str, value) -> None:
        if isinstance(value, types.ModuleType) and hasattr(self.__dict__["_new"], name):
            return                            # the import system binding a shadowed submodule
        super().__setattr__(name, value)


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (idempotent)."""
    if not any(isinstance(f, MovedModuleFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, MovedModuleFinder())
