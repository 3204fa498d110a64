"""``python -m nhwc_onnx.cli``: the command line, as the ``nhwc-onnx`` script runs it."""
from . import main

if __name__ == "__main__":
    main()
