"""kernels.cuda: run generated kernels on NVIDIA GPUs (sm_80 / sm_90).

* :func:`compile_cuda` (``kernels.cuda.compile``): CUDA C++ -> cubin with NVRTC at run time
  (cuda-python) or ``nvcc`` offline, cached by content hash;
* :func:`launch` (``kernels.cuda.launch``): the cubin on torch CUDA tensors, with argument,
  device, grid and shared-memory validation (:class:`kernels.errors.LaunchError`).

The builders that use it: :mod:`kernels.cuda_gemm` (mma.sync GEMM) and
:mod:`kernels.cuda_attention` (flash-attention prefill and decode).
"""

from ..toolchain.nvrtc import CudaModule, compile_cuda, nvcc_path, nvrtc_available
from ..runtime.cuda import check_cuda_tensor, cuda_available, device_info, function_attributes, launch

__all__ = ["CudaModule", "compile_cuda", "nvcc_path", "nvrtc_available", "launch",
           "check_cuda_tensor", "cuda_available", "device_info", "function_attributes"]
