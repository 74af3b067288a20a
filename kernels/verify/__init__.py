"""kernels.verify: the verifiers of a kernel, before and after it is printed.

* the GEMM gate: :mod:`~kernels.verify.gate` (entry point, report), its passes
  :mod:`~kernels.verify.gate_static` and :mod:`~kernels.verify.gate_dataflow`;
* the attention gate: :mod:`~kernels.verify.attention_gate` (entry point),
  :mod:`~kernels.verify.attention_static`, :mod:`~kernels.verify.attention_dataflow`,
  :mod:`~kernels.verify.attention_softmax` (the softmax / masking / merge rules),
  :mod:`~kernels.verify.attention_ids` (element identities);
* what both share: :mod:`~kernels.verify.gate_common`;
* the checks of the printed source against the IR (what is compiled is what is verified):
  :mod:`~kernels.verify.printed` (``printed_source``, ``declarations``, ``index_ranges``),
  reading the text back with :mod:`~kernels.verify.source_text` and evaluating its integer
  expressions with C semantics in :mod:`~kernels.verify.cexpr`.

The gates import the IR, never a kernel builder: an attention kernel's builder names the
instances it is checked on (``meta["instances"]``).
"""
