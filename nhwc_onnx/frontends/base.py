"""What all frontends share: options, the converter registry, the unsupported-op scan."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import NodeProblem, UnsupportedOpError


@dataclass
class FrontendOptions:
    """Options a user can pass to any frontend (each uses the ones that apply to it)."""

    inputs: list[str] | None = None  # graph input tensor names (TF: "name" or "name:0")
    outputs: list[str] | None = None  # graph output tensor names
    input_shapes: dict[str, list[int]] = field(default_factory=dict)  # overrides, source layout
    batch: int | None = None  # batch size for unknown / overridden batch dims
    weights: str | None = None  # Caffe: .caffemodel path, or "random"
    seed: int = 0  # seed for --weights random
    signature: str = "serving_default"  # TF SavedModel signature
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Converter:
    names: tuple[str, ...]
    fn: Callable
    doc: str = ""


class OpRegistry:
    """Source-op converters of one framework; one converter may serve several op names."""

    def __init__(self, framework: str):
        self.framework = framework
        self._by_name: dict[str, Converter] = {}

    def register(self, *names: str, doc: str = "") -> Callable[[Callable], Callable]:
        def deco(fn: Callable) -> Callable:
            conv = Converter(tuple(names), fn, doc or (fn.__doc__ or "").strip().split("\n")[0])
            for name in names:
                if name in self._by_name:
                    raise ValueError(
                        f"{self.framework} op '{name}' is registered twice "
                        f"({self._by_name[name].fn.__name__} and {fn.__name__})"
                    )
                self._by_name[name] = conv
            return fn

        return deco

    def get(self, name: str) -> Converter | None:
        return self._by_name.get(name)

    def __contains__(self, name: str) -> bool:
        return name in self._by_name

    def names(self) -> list[str]:
        return sorted(self._by_name)

    def describe(self) -> list[tuple[str, str]]:
        """(op name, one-line description) for docs and ``nhwc-onnx ops --framework``."""
        return [(n, self._by_name[n].doc) for n in self.names()]

    def scan(self, items: list[tuple[str, str]], framework_label: str = "") -> None:
        """Raise one UnsupportedOpError listing every (node name, op) without a converter."""
        problems = [
            NodeProblem(name, op, f"no {self.framework} converter for op '{op}'")
            for name, op in items
            if op not in self._by_name
        ]
        if problems:
            raise UnsupportedOpError(problems, framework_label or self.framework)
