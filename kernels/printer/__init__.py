"""kernels.printer: the IR -> HIP C++ printers (:mod:`kernels.printer.hip`; the attention
statements' printer is in :mod:`kernels.ir.attention`)."""
