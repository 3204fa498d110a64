"""The dialect's 37 ops (domain ``nhwc``) and the core ops frontends emit (domain ``core``).

Each dialect family module registers its schemas (ports, typed attributes, shape inference and
the lowering to standard ONNX used by ``nhwc_onnx.runtime``) on import; a registry imports its
families on its first lookup (``base.Registry``).
"""
from .base import (
    CORE_OPS,
    DIALECT_OPS,
    Attr,
    AttrKind,
    LayoutClass,
    OpSchema,
    Port,
    RuleError,
    attr,
)
from .validate import infer_shapes, validate

__all__ = [
    "CORE_OPS", "DIALECT_OPS", "Attr", "AttrKind", "LayoutClass", "OpSchema", "Port", "RuleError",
    "attr",
    "infer_shapes", "validate",
]
