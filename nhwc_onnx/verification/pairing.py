"""Does a converted file belong to the source it is verified against?

Verifying a model against another model's source used to end in the source runtime's
internal error. The converted file records its source's framework and file name, its inputs
and outputs (names in the source, shapes via the recorded layout permutations); they are
compared with what the frontend reads from the source before anything runs.
"""
from __future__ import annotations

import os
from collections.abc import Mapping

from .. import frameworks
from ..errors import ModelLoadError
from ..ir import Model
from ..ir.metadata import (
    KEY_SOURCE_FILE,
    KEY_SOURCE_FRAMEWORK,
    KEY_SOURCE_NAMES,
    read_source_names,
)
from ..options import ConvertOptions


def check_pairing(source: str | os.PathLike, framework: str | frameworks.Framework,
                  options: ConvertOptions, converted: str | os.PathLike, model: Model,
                  source_layout_shapes: Mapping[str, tuple]) -> Model:
    """Raise ModelLoadError (exit 2) when ``converted`` was not converted from ``source``;
    return the source as the frontend reads it."""
    framework = frameworks.get(framework).name
    recorded_fw = model.metadata.get(KEY_SOURCE_FRAMEWORK)
    recorded_file = model.metadata.get(KEY_SOURCE_FILE)
    origin = (f"'{converted}' was converted from the {recorded_fw or '?'} model "
              f"'{recorded_file or '?'}'")
    if recorded_fw and recorded_fw != framework:
        article = "an" if framework[0] in "aeiou" else "a"
        raise ModelLoadError(f"{origin}, not from {article} {framework} model like '{source}'; "
                             "verify it against the model it was converted from")
    from ..ir.input_shapes import probing

    source_model = frameworks.load_source(source, framework, probing(options))
    parsed = source_model.graph
    # Compared by source tensor: the converted file may name them otherwise (the names users
    # know, --rename); its metadata 'source_names' maps them back.
    renamed = read_source_names(model.metadata.get(KEY_SOURCE_NAMES))

    def tensor(name: str) -> str:
        return name.removesuffix(":0")

    def source_tensor_of(v) -> str:
        return tensor(str(v.meta.get("source_name", v.name)))

    src_inputs = {source_tensor_of(v): v.shape for v in parsed.inputs}
    # inputs whose symbolic batch was read at a probe size -> the batch's name
    open_batch = {source_tensor_of(v): v.meta["batch_symbol"] for v in parsed.inputs
                  if "batch_symbol" in v.meta}
    src_outputs = {source_tensor_of(v) for v in parsed.outputs}
    ours_in = {tensor(renamed.get(n, n)): n for n in source_layout_shapes}
    ours_out = {tensor(renamed.get(v.name, v.name)) for v in model.graph.outputs}
    if set(ours_in) != set(src_inputs) or not ours_out <= src_outputs:
        raise ModelLoadError(
            f"{origin} and does not fit '{source}': its inputs {sorted(ours_in)} "
            f"and outputs {sorted(ours_out)}, the source's inputs {sorted(src_inputs)} and "
            f"outputs {sorted(src_outputs)}")
    for source_tensor, name in ours_in.items():
        shape = source_layout_shapes[name]
        declared = src_inputs[source_tensor]
        if declared is None:
            continue
        # --input-shape may have replaced declared dims at conversion: then only the rank counts
        fits = len(declared) == len(shape) and (bool(options.input_shapes) or all(
            not isinstance(d, int) or d == s or (i == 0 and source_tensor in open_batch)
            for i, (d, s) in enumerate(zip(declared, shape))))
        if not fits:
            if source_tensor in open_batch:  # its own name, not the probe size it was read at
                declared = (open_batch[source_tensor], *declared[1:])
            raise ModelLoadError(
                f"{origin} and does not fit '{source}': input '{name}' is "
                f"{tuple(shape)} in the converted model (source layout), the source declares "
                f"{tuple(declared)}")
    return source_model
