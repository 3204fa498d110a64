"""metadata_props keys the serializer owns (read back by the reader), and how a value is
written under them."""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

KEY_CONVERTER_VERSION = "converter_version"
KEY_IO_PERMUTATIONS = "io_permutations"


def encode_io_permutations(perms: Mapping[str, Sequence[int]]) -> str:
    """The value of ``KEY_IO_PERMUTATIONS``: graph input/output name -> the permutation of its
    source axes that is stored, as compact JSON with the names sorted."""
    return json.dumps({k: [int(i) for i in p] for k, p in perms.items()}, sort_keys=True,
                      separators=(",", ":"))
