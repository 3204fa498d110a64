"""Local response normalisation across channels, as every frontend writes it in core ops:
the windowed sum of squares over channels is a 1x1 convolution with a banded 0/1 weight."""
from __future__ import annotations

import numpy as np


def channel_window_band(channels: int, before: int, after: int) -> np.ndarray:
    """The (C, C, 1, 1) OIHW weight summing channels [c - before, c + after] into channel c
    (clipped at the edges, as every runtime's LRN clips its window)."""
    band = np.zeros((channels, channels, 1, 1), dtype=np.float32)
    for c in range(channels):
        band[c, max(0, c - before):min(channels, c + after + 1), 0, 0] = 1.0
    return band
