"""The marks of the tests that need an NVIDIA GPU (``pytest -m gpu`` selects them on the device
machine; elsewhere they skip with one reason).  Import after ``pytest.importorskip("torch")``."""

from __future__ import annotations

import pytest

from kernels.cuda.launch import cuda_available

NVIDIA_GPU = [pytest.mark.gpu,
              pytest.mark.skipif(not cuda_available(),
                                 reason="needs an NVIDIA GPU, torch with CUDA and cuda-python")]
