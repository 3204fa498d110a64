"""How ``--input-shape`` and ``--batch`` set the shape of one graph input: written once.

The rule (docs/cli.md, ``convert -h``): ``--input-shape NAME=D1,D2,...`` gives an input's whole
shape, in the source's layout; its first entry may be -1, a symbolic batch. ``--batch N`` then
sets axis 0 of every graph input to N, whatever the source declares. Without ``--batch`` a
symbolic batch stays symbolic and a fixed one stays fixed.

A batch is symbolic when the source leaves axis 0 open: no value (TensorFlow's -1 or None,
an ONNX dim without a value) or a name (ONNX ``dim_param``).
The conversion runs with a probe size in its place (``nhwc_onnx.conversion.symbolic_batch``, twice
with two sizes) and writes the symbol back: the source's name for it, else ``N``.

Frontends call these when they create their graph inputs (they need the shapes while
converting); the static-shapes pass calls ``input_shape`` again on the IR graph's inputs, so
both agree by construction.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..errors import UsageError
from ..options import SYMBOLIC  # an --input-shape entry: a symbolic batch

DEFAULT_SYMBOL = "N"  # the batch's name when the source gives none
# The sizes an open batch takes in the two probe conversions: two sizes no real dimension is
# likely to equal (2, 3, 5, 7 are common kernel, grid and channel sizes).
PROBES = (11, 13)


def probing(options):
    """The options of the first conversion: an open batch takes the first probe size (none
    with --batch, which fixes every batch)."""
    if options.batch is not None or options.batch_probe is not None:
        return options
    return options.running(batch_probe=PROBES[0])


def find_override(overrides: Mapping[str, Sequence[int]], *names: str | None) -> list[int] | None:
    """The user's shape for an input known under any of ``names`` (TensorFlow: 'x:0', 'x')."""
    for name in names:
        if name is not None and name in overrides:
            return [int(d) for d in overrides[name]]
    return None


def is_open(dim, axis: int = 0) -> bool:
    """Whether a declared dimension has no fixed size: None or a name, and at axis 0 also -1
    (--input-shape's symbolic batch; any other negative size is an error said later). A
    declared 0 is a size (an empty tensor), which only --batch replaces."""
    return dim is None or isinstance(dim, str) or (axis == 0 and int(dim) == SYMBOLIC)


def input_shape(declared: Sequence[int | str | None] | None,
                override: Sequence[int] | None = None, batch: int | None = None, *,
                probe: int | None = None, name: str | None = None
                ) -> tuple[int | None, ...] | None:
    """The shape of one graph input: the override when given, else the declared shape (None:
    unknown rank). ``batch`` then sets axis 0; without it an open axis 0 takes ``probe`` (the
    size a symbolic batch has in one probe conversion) or stays None. Every other open
    dimension is None. An override of another rank than the declared one is a UsageError
    (the model would be converted for an input it does not take)."""
    if override is not None and declared is not None and len(override) != len(declared):
        shown = "x".join("?" if is_open(d, i) else str(d) for i, d in enumerate(declared))
        raise UsageError(f"{name or 'the input'}={','.join(map(str, override))} gives "
                         f"{len(override)} dimension(s), but the input has rank "
                         f"{len(declared)} ({shown})", param_hint="--input-shape")
    if override is not None:
        shape: list = list(override)
    elif declared is not None:
        shape = list(declared)
    else:
        return None
    resolved = [None if is_open(d, i) else int(d) for i, d in enumerate(shape)]
    if resolved:
        if batch is not None:
            resolved[0] = int(batch)
        elif resolved[0] is None and probe is not None:
            resolved[0] = int(probe)
    return tuple(resolved)


def batch_symbol(declared: Sequence[int | str | None] | None,
                 override: Sequence[int] | None = None, batch: int | None = None
                 ) -> str | None:
    """The name of the input's symbolic batch, or None when its batch is fixed (declared,
    given by --input-shape or by --batch) or it has no axis 0."""
    if batch is not None:
        return None
    shape = override if override is not None else declared
    if not shape or not is_open(shape[0]):
        return None
    named = declared[0] if declared else None
    return named if isinstance(named, str) and named else DEFAULT_SYMBOL
