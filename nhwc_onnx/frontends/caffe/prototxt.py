"""Read a deploy .prototxt: parse (errors carry the line), upgrade legacy formats, and keep
only the layers Caffe would instantiate in the TEST phase."""
from __future__ import annotations

import os
import re

from google.protobuf import text_format

from ...errors import InvalidModelError, ModelLoadError
from ...files.reads import read_regular
from ..base import check_node_count
from . import caffe_pb2 as pb
from .upgrade import needs_upgrade, upgrade_net

_MAX_PROTOTXT_BYTES = 256 << 20  # deploy files are kilobytes; refuse anything absurd
_LAYER_OPENING = re.compile(rb"\blayers?\s*:?\s*\{")


def read_prototxt(path: str | os.PathLike) -> pb.NetParameter:
    path = os.fspath(path)
    raw = read_regular(path, f"prototxt {path}", _MAX_PROTOTXT_BYTES)
    # Parsing text protobuf is slow per layer: count layers before parsing (an upper
    # bound: a comment or a name may hold the word too).
    check_node_count(len(_LAYER_OPENING.findall(raw)), f"prototxt {path}", "layers")
    if b"\0" in raw:
        raise ModelLoadError(
            f"{path} is binary, not a text prototxt (a .caffemodel goes to --weights)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ModelLoadError(
            f"{path} is not UTF-8 text (byte {e.start}): not a prototxt") from None
    net = parse_prototxt_text(text, path)
    if needs_upgrade(net):
        net = upgrade_net(net)
    if not net.layer and not net.input:
        raise InvalidModelError(f"prototxt {path} defines no layers")
    return net


def parse_prototxt_text(text: str, path: str = "<text>") -> pb.NetParameter:
    net = pb.NetParameter()
    try:
        text_format.Parse(text, net)
    except text_format.ParseError as e:
        message = re.sub(r"^\d+:\d+\s*:\s*", "", str(e)).replace("nhwc_onnx_caffe.", "")
        line, column = e.GetLine(), e.GetColumn()
        where = f"line {line}, column {column}" if line else "unknown position"
        raise ModelLoadError(f"prototxt syntax error in {path} at {where}: {message}") from None
    except RecursionError:
        raise ModelLoadError(f"prototxt {path} nests messages too deeply") from None
    return net


def _rule_met(rule: pb.NetStateRule, state: pb.NetState) -> bool:
    if rule.HasField("phase") and rule.phase != state.phase:
        return False
    if rule.HasField("min_level") and state.level < rule.min_level:
        return False
    if rule.HasField("max_level") and state.level > rule.max_level:
        return False
    stages = set(state.stage)
    if any(s not in stages for s in rule.stage):
        return False
    return not any(s in stages for s in rule.not_stage)


def inference_layers(net: pb.NetParameter) -> list[pb.LayerParameter]:
    """The layers Caffe builds for inference (phase TEST unless the net's state says so)."""
    state = pb.NetState()
    state.CopyFrom(net.state)
    if not net.state.HasField("phase"):
        state.phase = pb.TEST
    kept = []
    for layer in net.layer:
        if layer.include and layer.exclude:
            raise InvalidModelError(
                f"layer '{layer.name}' has both include and exclude rules (Caffe forbids it)")
        if layer.include:
            if not any(_rule_met(r, state) for r in layer.include):
                continue
        elif any(_rule_met(r, state) for r in layer.exclude):
            continue
        kept.append(layer)
    return kept
