"""The whole way from a frontend's core graph to a validated dialect graph.

``to_dialect(model, ctx)`` runs: the up-front scan (``scan.py``), cleanup, static shapes,
constant folding, cleanup, NCHW->NHWC, the embedded input preprocessing (if asked), static
shapes (all known), then the dialect passes (BatchNorm/bias folding, padding, op selection,
legalisation), then the dialect validator. A model the pipeline leaves invalid is a bug in
nhwc-onnx and raises ConversionBugError with every issue.

Refusals are collected, not raised as they come: those of the frontend (``model.refused``, its
stand-ins set aside by ``isolate_unconverted``), of the scan and of every pass stage end in ONE
UnsupportedOpError, raised once the passes are through (or when a pass fails on a model that
has refused nodes: the refusals are the error then).
"""
from __future__ import annotations

from ..errors import ConversionBugError, NhwcOnnxError, UnsupportedOpError
from ..ir import Model
from ..ir.metadata import KEY_SOURCE_FRAMEWORK
from .base import Pass, PassContext, PassManager
from .cleanup import Cleanup
from .fold_constants import FoldConstants
from .preprocess import EmbedPreprocessing
from .scan import isolate_unconverted, scan
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
        # on the stored inputs: the layout pass has told images apart and made them NHWC
        EmbedPreprocessing(),
        StaticShapes(apply_overrides=False, require_static=True),
    ]


def _dialect_passes() -> list[Pass]:
    # A failing import propagates: skipping these passes would save an unvalidated core model.
    from .to_dialect.pipeline import dialect_passes

    return dialect_passes()


def to_dialect(model: Model, ctx: PassContext | None = None) -> tuple[PassManager, PassContext]:
    """Rewrite ``model`` in place into the dialect; returns the manager (stats) and ctx."""
    ctx = ctx or PassContext()
    ctx.collect_refusals = True
    framework = model.metadata.get(KEY_SOURCE_FRAMEWORK, "")
    found = [UnsupportedOpError(model.refused, framework)] if model.refused else []
    early = scan(model)
    if early:
        found.append(UnsupportedOpError(early))
    if model.refused:
        _forget_outputs(ctx, isolate_unconverted(model))
    manager = PassManager(core_passes() + _dialect_passes())
    try:
        manager.run(model, ctx)
    except UnsupportedOpError as exc:  # a stage that raised instead of handing it over
        raise UnsupportedOpError.merged([*found, *ctx.stage_refusals, exc], framework) from None
    except NhwcOnnxError as exc:
        if found or ctx.stage_refusals:  # likely a consequence of a refused node
            raise UnsupportedOpError.merged([*found, *ctx.stage_refusals], framework) from exc
        raise
    if found or ctx.stage_refusals:
        raise UnsupportedOpError.merged([*found, *ctx.stage_refusals], framework)
    from ..schemas import validate

    issues = validate(model)
    if issues:
        lines = "\n".join(f"  - {i}" for i in issues)
        raise ConversionBugError(
            f"the conversion produced an invalid dialect model ({len(issues)} issue(s)); "
            f"this is a bug in nhwc-onnx:\n{lines}"
        )
    return manager, ctx


def _forget_outputs(ctx: PassContext, dropped) -> None:
    """--keep-layout names of outputs taken out with a refused node are no usage error."""
    names = {n for v in dropped for n in (v.name, v.meta.get("source_name"))}
    keep = ctx.options.keep_layout
    if keep and names:
        ctx.options = ctx.options.replace(keep_layout=[n for n in keep if n not in names])
