"""Convert a written source file and verify it against the source's own runtime (onnxruntime,
TensorFlow, OpenCV): the whole pipeline, seeded random inputs, float32 tolerance 1e-4; a
symbolic batch is kept and compared at more than one batch size."""
from __future__ import annotations

from pathlib import Path

import nhwc_onnx
from nhwc_onnx.options import ConvertOptions

TOL = 1e-4


def converts_exactly(source: Path, tmp_path: Path, *, symbolic: bool = False,
                     **options) -> tuple[float, object]:
    """Convert ``source`` (no exact cut), verify it; returns the largest absolute error over
    every output and batch, and the converted dialect model."""
    opts = ConvertOptions(exact_cut=False, **options)
    result = nhwc_onnx.convert(source, tmp_path / f"{source.stem}.nhwc.onnx", opts)
    if symbolic:
        assert result.report.batch is not None, "the batch was not kept symbolic"
    else:
        assert result.report.batch is None
    report = nhwc_onnx.verify(source, result.model, opts, seed=0, atol=TOL, rtol=TOL)
    assert report.outputs, "nothing was compared"
    assert report.ok, "\n".join(f"{c.name} (batch {c.batch}): max abs {c.max_abs_error:.3g}"
                                for c in report.outputs)
    if symbolic:
        assert len(report.batches) >= 2, report.batches
    return max(c.max_abs_error for c in report.outputs), result.model
