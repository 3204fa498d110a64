"""The Caffe converter registry, plus per-layer-type checks run by the up-front scan.

A check returns the reason a particular layer cannot be converted exactly (for layer types
that are supported only in some configurations), or None; the loader collects every reason
and every unknown type into one UnsupportedOpError before converting anything.
"""
from __future__ import annotations

from collections.abc import Callable

from ..base import OpRegistry

REGISTRY = OpRegistry("caffe")
CHECKS: dict[str, Callable] = {}


def converter(*types: str, check: Callable | None = None, doc: str = "", emits=None,
              converts=None, condition=None) -> Callable:
    """Register ``fn(builder, layer)`` for the given Caffe layer types (``emits``,
    ``converts``, ``condition``: their Declaration, as for OpRegistry.register)."""

    def deco(fn: Callable) -> Callable:
        REGISTRY.register(*types, doc=doc, emits=emits, converts=converts,
                          condition=condition)(fn)
        if check is not None:
            for t in types:
                CHECKS[t] = check
        return fn

    return deco
