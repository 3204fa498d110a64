"""A finished dialect model: ``check`` it, ``run`` it, ``lower`` it to standard ONNX."""
