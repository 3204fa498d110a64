#!/bin/sh
# Regenerate caffe_pb2.py from caffe.proto. Needs `protoc` (Debian: protobuf-compiler) only
# when the .proto changes; the generated module is committed, so users never need protoc.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
protoc --proto_path=. --python_out=. caffe.proto
echo "wrote $here/caffe_pb2.py with $(protoc --version)"
