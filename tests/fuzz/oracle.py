"""Judge one generated graph: it converts and computes the source runtime's numbers (batch 1
and 3 for a symbolic batch, the declared one otherwise), or it is refused and every refused
node is one the table predicts (``claims.explained``)."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from nhwc_onnx import convert
from nhwc_onnx.errors import NhwcOnnxError, UnsupportedOpError
from nhwc_onnx.support.claims import NOTES
from nhwc_onnx.options import ConvertOptions
from nhwc_onnx.runtime import run
from nhwc_onnx.verification.compare import to_converted_layout, to_source_layout
from tests.fuzz.claims import Made, explained, must_refuse

TOL = 1e-4
SYMBOLIC_BATCHES = (1, 3)
FIXED_BATCH = 3
# The table's note that explains a [batch] refusal under a symbolic batch.
SYMBOLIC_BATCH_NOTE = next(n for n in NOTES if n.startswith("With a symbolic batch, a node"))


@dataclass
class Verdict:
    converted: bool = False
    failures: list[str] = field(default_factory=list)
    explained: list[str] = field(default_factory=list)  # the table's reason per refused node

    def __bool__(self) -> bool:
        return not self.failures


def owner(node: str, made: Mapping[str, Made]) -> Made | None:
    """The generated node a problem names (the converter's own nodes are named node/...)."""
    while node:
        if node in made:
            return made[node]
        if "/" not in node:
            return None
        node = node.rsplit("/", 1)[0]
    return None


def refused(framework: str, exc: UnsupportedOpError, made: Mapping[str, Made],
            verdict: Verdict) -> list:
    """Record the table's reason for each refused node; returns the problems it does not
    explain."""
    left = []
    for p in exc.problems:
        why = explained(framework, owner(p.node, made))
        if why is None:
            left.append(p)
        else:
            verdict.explained.append(why)
    return left


def judge(framework: str, path: Path, made: Mapping[str, Made], batches,
          source_run: Callable[[dict], dict] | None, input_dims: Mapping[str, tuple],
          options: ConvertOptions | None = None) -> Verdict:
    """``source_run(feeds)`` runs the source in its own runtime (feeds and outputs in the
    source layout; None: ``nhwc_onnx.verify`` does, at the declared batch);
    ``input_dims``: each input's shape after the batch."""
    verdict = Verdict()
    options = (options or ConvertOptions()).replace(framework=framework, exact_cut=False,
                                                    allow_transpose=True)
    try:
        model = convert(path, options=options).model
    except UnsupportedOpError as exc:
        left = refused(framework, exc, made, verdict)
        needs_fixed_batch = [p for p in left if p.rule == "batch" and options.batch is None
                             and len(batches) > 1]
        verdict.failures += [f"unexplained refusal: {p}" for p in left
                             if p not in needs_fixed_batch]
        if needs_fixed_batch:  # the symbolic-batch note: --batch N converts such a node
            fixed = judge(framework, path, made, (FIXED_BATCH,), source_run, input_dims,
                          options.replace(batch=FIXED_BATCH))
            if fixed.converted and not fixed.failures:
                verdict.explained += [f"{SYMBOLIC_BATCH_NOTE}: {p.node}"
                                      for p in needs_fixed_batch]
            else:
                verdict.failures += [f"unexplained refusal: {p}" for p in needs_fixed_batch]
                verdict.failures += [f"with --batch {FIXED_BATCH}: {f}" for f in fixed.failures]
        return verdict
    except NhwcOnnxError as exc:
        verdict.failures.append(f"error: {type(exc).__name__}: {exc}")
        return verdict
    verdict.converted = True
    for name, m in made.items():
        if must_refuse(framework, m):
            verdict.failures.append(f"claimed never, converted: node '{name}' ({m.op})")
    if source_run is None:  # the package's verify: the source in its own runtime (TF, OpenCV)
        from nhwc_onnx import verify

        report = verify(path, model, options, seed=0, atol=TOL, rtol=TOL)
        if not (report.outputs and report.ok):
            verdict.failures += [f"{c.name} differs by {c.max_abs_error:.3g}"
                                 for c in report.outputs] or ["verify compared no output"]
        return verdict
    perms = model.io_permutations
    for batch in batches:
        rng = np.random.default_rng(batch)
        feeds = {n: rng.uniform(-1, 1, (batch, *d)).astype(np.float32)
                 for n, d in input_dims.items()}
        expected = source_run(feeds)
        ours = run(model, {n: to_converted_layout(a, perms.get(n)) for n, a in feeds.items()})
        for name, want in expected.items():
            if name not in ours:
                verdict.failures.append(f"output {name} missing")
                continue
            got = to_source_layout(ours[name], perms.get(name))
            if got.shape != want.shape:
                verdict.failures.append(f"batch {batch}: {name} shape {got.shape} != "
                                        f"{want.shape}")
                continue
            scale = max(1.0, float(np.max(np.abs(want))) if want.size else 1.0)
            err = float(np.max(np.abs(got - want))) if want.size else 0.0
            if not err <= TOL * scale:
                verdict.failures.append(f"batch {batch}: {name} differs by {err:.3g} "
                                        f"(scale {scale:.3g})")
    return verdict
