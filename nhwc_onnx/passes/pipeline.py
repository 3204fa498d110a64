"""The whole way from a frontend's core graph to a validated dialect graph.

``to_dialect(model, ctx)`` runs: cleanup, static shapes, constant folding, cleanup, NCHW->NHWC,
static shapes (all known), then the dialect passes (BatchNorm/bias folding, padding, op
selection, legalisation), then the dialect validator. A model the pipeline leaves invalid is a
bug in nhwc-onnx and raises ConversionBugError with every issue.
"""
from __future__ import annotations

from ..errors import ConversionBugError
from ..ir import Model
from .base import Pass, PassContext, PassManager
from .cleanup import Cleanup
from .fold_constants import FoldConstants
from .static_shapes import StaticShapes
from .to_nhwc import ToNHWC


def core_passes() -> list[Pass]:
    """The passes that bring any frontend's core graph to all-NHWC with static shapes."""
    return [
        Cleanup(),
        StaticShapes(apply_overrides=True),
        FoldConstants(),
        Cleanup(),
        # Shapes are current here: StaticShapes and FoldConstants inferred them to a fixed
        # point, and Cleanup only drops nodes (a bypassed Identity's output has its input's shape).
        ToNHWC(infer_shapes=False),
        StaticShapes(apply_overrides=False, require_static=True),
    ]


def _dialect_passes() -> list[Pass]:
    # A failing import propagates: skipping these passes would save an unvalidated core model.
    from .dialect_pipeline import dialect_passes

    return dialect_passes()


def to_dialect(model: Model, ctx: PassContext | None = None) -> tuple[PassManager, PassContext]:
    """Rewrite ``model`` in place into the dialect; returns the manager (stats) and ctx."""
    ctx = ctx or PassContext()
    manager = PassManager(core_passes() + _dialect_passes())
    manager.run(model, ctx)
    from ..schemas import validate

    issues = validate(model)
    if issues:
        lines = "\n".join(f"  - {i}" for i in issues)
        raise ConversionBugError(
            f"the conversion produced an invalid dialect model ({len(issues)} issue(s)); "
            f"this is a bug in nhwc-onnx:\n{lines}"
        )
    return manager, ctx
