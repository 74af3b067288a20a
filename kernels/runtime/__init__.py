"""kernels.runtime: launching compiled kernels, with argument validation.

* :mod:`kernels.runtime.rocm`: ``launch`` of a code object on ROCm (ctypes / libamdhip64),
  ``TensorSpec`` and ``check_tensor`` (the argument checks the emulator uses too);
* :mod:`kernels.runtime.cuda`: ``launch`` of a cubin on torch CUDA tensors.
"""
