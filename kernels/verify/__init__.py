"""kernels.verify: the verifier of a kernel, before and after it is printed.

* what a kernel must compute: :mod:`~kernels.verify.spec` (``KernelSpec``: tensors with named
  dimensions and roles, contractions, online softmax, split partition / merge, symbols, domain);
* which checks a spec calls for: :mod:`~kernels.verify.rules` (``RULES``, ``checks_for``);
* the one entry point: :func:`kernels.verify.verifier.verify` (``verify_kernel`` and
  ``verify_attention`` are it for the kernels' own specs, under their old names);
* the every-block engine: :mod:`~kernels.verify.gate` (report, translation lemma), its passes
  :mod:`~kernels.verify.gate_static` and :mod:`~kernels.verify.gate_dataflow`;
* the instance engine: :mod:`~kernels.verify.attention_gate`,
  :mod:`~kernels.verify.attention_static`, :mod:`~kernels.verify.attention_dataflow`,
  :mod:`~kernels.verify.attention_softmax` (the softmax / masking / merge rules),
  :mod:`~kernels.verify.attention_ids` (element identities), :mod:`~kernels.verify.attention_roles`
  (the tensors the rules talk about, read from the spec);
* role-specialised (ping-pong) waves, for a spec naming ``wave_roles``: the per-wave phase model
  :mod:`~kernels.verify.wave_phases` (barrier balance, role schedule, row ownership, LDS races
  between waves at different phases), run by the instance engine;
* what both share: :mod:`~kernels.verify.gate_common`;
* the checks of the printed source against the IR (what is compiled is what is verified):
  :mod:`~kernels.verify.printed` (``printed_source``, ``declarations``, ``index_ranges``),
  reading the text back with :mod:`~kernels.verify.source_text` and evaluating its integer
  expressions with C semantics in :mod:`~kernels.verify.cexpr`.

The verifier imports the IR, never a kernel builder, and names no tensor: the builder's spec
(``Kernel.spec``) says what the kernel computes and on which domain it is checked.
"""
