"""The contract every frontend's converter context keeps (ONNX ``NodeCtx``, TensorFlow
``TFContext``, Caffe ``CaffeBuilder``): the node being converted (``name``, ``op``), its
attributes read through ``attr`` (every read recorded), the attributes nobody read
(``unread_attributes``, checked by the conversion loop in base.py), its inputs, and the two
ways out: ``refuse(reason)`` (no exact form) and ``invalid(message)`` (a broken model: an
InvalidModelError carrying the node, so no message text is searched for it).

What counts as an attribute is the frontend's: an ONNX node's attributes, a TensorFlow
NodeDef's attr map, the set fields of a Caffe layer's ``*_param`` messages. Each frontend
says which of them have no effect on inference (``without_effect``): training settings,
type annotations, implementation choices.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from typing import Any, NoReturn

from ..errors import ConversionContext, InvalidAttributeError, InvalidModelError, located


class Refusal(Exception):
    """A converter cannot express this node exactly; the reason joins the one final error."""

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)


class NodeContext(ABC):
    """What a converter sees of the one source node being converted (see the module doc)."""

    framework = ""

    def __init__(self) -> None:
        self.name = ""
        self.op = ""
        self.read_attributes: set[str] = set()

    def begin_node(self, name: str, op: str, reads: set[str] | None = None) -> None:
        """Start converting node ``name``; ``reads`` is where its attribute reads are recorded
        (a frontend whose attributes record their own reads passes that set)."""
        self.name = name
        self.op = op
        self.read_attributes = set() if reads is None else reads

    @property
    def where(self) -> ConversionContext:
        return ConversionContext(self.name, self.op, self.framework)

    # -- attributes -------------------------------------------------------------------------
    @abstractmethod
    def attribute_names(self) -> Iterable[str]:
        """Every attribute the node carries (the frontend's own notion, see the module doc)."""

    @abstractmethod
    def attribute_value(self, name: str) -> Any:
        """The value of attribute ``name``, or None when the node does not carry it."""

    def without_effect(self, name: str) -> bool:
        """Whether attribute ``name`` leaves the inference result unchanged (the mode the
        node uses considered): such an attribute need not be read."""
        return False

    def attr(self, name: str, default: Any = None) -> Any:
        """The attribute's value (``default`` when absent); the read is recorded."""
        self.read_attributes.add(name)
        value = self.attribute_value(name)
        return default if value is None else value

    def mark_read(self, *names: str) -> None:
        """Record attributes as honoured without reading them through ``attr``."""
        self.read_attributes.update(names)

    def unread_attributes(self) -> list[str]:
        """The attributes with an effect that the converter never looked at: converting
        without them would silently compute something else."""
        return sorted(name for name in set(self.attribute_names())
                      if name not in self.read_attributes and not self.without_effect(name))

    # -- inputs -----------------------------------------------------------------------------
    @abstractmethod
    def inputs(self) -> list:
        """The node's input values, in order (IR Values)."""

    # -- ways out ---------------------------------------------------------------------------
    def refuse(self, reason: str) -> NoReturn:
        """The node has no exact core form: the loop lists it with every other refusal."""
        raise Refusal(reason)

    def invalid(self, message: str) -> InvalidModelError:
        """A broken model, naming this node (raise it)."""
        return located(InvalidModelError, self.where, message)

    def invalid_attribute(self, message: str) -> InvalidAttributeError:
        """An attribute value no model may carry, naming this node (raise it)."""
        return located(InvalidAttributeError, self.where, message)


def unread_refusal(unread: list[str]) -> Refusal:
    """The refusal of a node whose converter left attributes with an effect unread."""
    return Refusal(f"attribute(s) {unread} are not supported by this converter (the node "
                   "converts without them)")
