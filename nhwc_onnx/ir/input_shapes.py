"""How ``--input-shape`` and ``--batch`` set the shape of one graph input: written once.

Frontends call it when they create their graph inputs (they need the shapes while converting);
the static-shapes pass calls it again on the IR graph's inputs, so both agree by construction.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence


def find_override(overrides: Mapping[str, Sequence[int]], *names: str | None) -> list[int] | None:
    """The user's shape for an input known under any of ``names`` (TensorFlow: 'x:0', 'x')."""
    for name in names:
        if name is not None and name in overrides:
            return [int(d) for d in overrides[name]]
    return None


def input_shape(declared: Sequence[int | None] | None, override: Sequence[int] | None = None,
                batch: int | None = None, *, batch_replaces_fixed: bool = False
                ) -> tuple[int | None, ...] | None:
    """The shape of one graph input: the override when given, else the declared shape (None:
    unknown rank). ``batch`` then sets the first dimension when it is unknown (None, or 0 as
    some exporters write it), or always with ``batch_replaces_fixed`` (Caffe and ONNX, whose
    declared batch is only an example size)."""
    if override is not None:
        shape = [int(d) for d in override]
    elif declared is not None:
        shape = list(declared)
    else:
        return None
    if batch is not None and shape and (batch_replaces_fixed or shape[0] in (None, 0)):
        shape[0] = int(batch)
    return tuple(shape)
