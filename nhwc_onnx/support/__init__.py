"""What converts: the claims of every source op, ``nhwc-onnx ops``, docs/ops.md, and
the did-you-mean of names."""
