"""kernels.verify: the verifiers that prove a kernel before it is printed (the GEMM gate
:mod:`kernels.verify.gate`, the attention gate :mod:`kernels.verify.attention_gate`, what they
share :mod:`kernels.verify.gate_common`)."""
