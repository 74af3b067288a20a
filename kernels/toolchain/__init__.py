"""kernels.toolchain: compilers and their products.

* :mod:`kernels.toolchain.hip`: find clang, ``compile_hip`` (HIP -> AMDGPU code object);
* :mod:`kernels.toolchain.cache`: the content-hash cache of code objects and libraries;
* :mod:`kernels.toolchain.codeobject`: ``CodeObject`` and its resource report;
* :mod:`kernels.toolchain.nvrtc`: CUDA C++ -> cubin with NVRTC / nvcc.

``from kernels.toolchain import compile_hip, find_toolchain`` keeps working (it was the module
``kernels/toolchain.py``).
"""

from .hip import (DEFAULT_OPT, DEVICE_FLAGS, INCLUDE_DIR, SUPPORTED_ARCHS, HostCompiler, Toolchain,
                  compile_built, compile_hip, find_host_compiler, find_toolchain,
                  parse_diagnostics, run_compiler)

__all__ = ["Toolchain", "HostCompiler", "find_toolchain", "find_host_compiler", "compile_hip",
           "compile_built", "parse_diagnostics", "run_compiler", "SUPPORTED_ARCHS",
           "INCLUDE_DIR", "DEVICE_FLAGS", "DEFAULT_OPT"]
