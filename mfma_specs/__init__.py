"""mfma_specs: AMD matrix-core instructions as closed-form TV layouts, the arch model, selection."""

from .arch import Target, UnknownTargetError, lds_model, target, targets

__all__ = ["Target", "UnknownTargetError", "lds_model", "target", "targets"]
