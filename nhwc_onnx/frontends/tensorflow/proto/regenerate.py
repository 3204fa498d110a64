"""Regenerate tf_graph_pb2.py from tf_graph.proto with protoc.

Run from anywhere: ``python nhwc_onnx/frontends/tensorflow/proto/regenerate.py``.
Needs ``protoc`` on PATH (Debian/Ubuntu: ``apt-get install protobuf-compiler``) or the
``grpcio-tools`` package. The generated module is committed, so users never need either.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[3]  # the repository root: the descriptor is named by its package path
PROTO = HERE.relative_to(ROOT) / "tf_graph.proto"


def main() -> int:
    args = [f"--proto_path={ROOT}", f"--python_out={ROOT}", str(PROTO)]
    protoc = shutil.which("protoc")
    if protoc:
        subprocess.run([protoc, *args], check=True)
    else:
        try:
            from grpc_tools import protoc as grpc_protoc
        except ImportError:
            raise SystemExit("neither protoc nor grpcio-tools is installed") from None
        if grpc_protoc.main(["protoc", *args]) != 0:
            return 1
    print(f"wrote {HERE / 'tf_graph_pb2.py'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
