"""An ONNX source in its own runtime (onnxruntime, from the ``verify`` extra): what
verification compares a conversion with. Feeds and fetches go by source tensor names."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ...errors import MissingDependencyError
from ...options import ConvertOptions


class SourceReference:
    def __init__(self, path: str, options: ConvertOptions):
        self.path = path

    def run(self, feeds: Mapping[str, np.ndarray], fetches: Sequence[str]) -> dict:
        try:
            import onnxruntime as ort
        except ImportError as exc:
            raise MissingDependencyError("onnxruntime", "verify",
                                         "verifying an ONNX source") from exc
        import onnx

        model = onnx.load(self.path)
        model.ir_version = min(model.ir_version, 10)
        outputs = {o.name for o in model.graph.output}
        for name in fetches:
            if name not in outputs:
                model.graph.output.add().name = name  # expose an intermediate tensor
        options = ort.SessionOptions()
        options.log_severity_level = 3
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        session = ort.InferenceSession(model.SerializeToString(), options,
                                       providers=["CPUExecutionProvider"])
        results = session.run(list(fetches), dict(feeds))
        return dict(zip(fetches, results))

    def tensor_names(self) -> set[str]:
        """The tensors ``run`` can fetch."""
        import onnx

        m = onnx.load(self.path, load_external_data=False)
        return {o for n in m.graph.node for o in n.output if o}
