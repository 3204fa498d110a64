"""The passes that turn an all-NHWC, statically shaped core graph into dialect ops.

Order matters: biases fuse first (so a BatchNorm after Conv -> BiasAdd still folds), BatchNorm
and per-channel scalings fold, biases fuse again (an Add after a folded BatchNorm), padding is
normalised on the core ops, then one-to-one op selection, then legalisation of the rest (which
raises one error listing every node left over).
"""
from __future__ import annotations

from ..base import Pass
from .fold_batchnorm import FoldBatchNorm
from .fuse_bias import FuseBias
from .normalize_padding import NormalizePadding
from .select_and_legalize import Legalize, SelectOps


def dialect_passes() -> list[Pass]:
    return [FuseBias(), FoldBatchNorm(), FuseBias(), NormalizePadding(), SelectOps(), Legalize()]


__all__ = ["dialect_passes"]
