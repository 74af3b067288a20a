"""kernels.printer: the IR -> HIP C++ printers (:mod:`kernels.printer.hip`: the core statements;
:mod:`kernels.printer.attention`: the attention statements and the softmax helpers)."""
