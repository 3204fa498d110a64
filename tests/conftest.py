"""Test-wide settings that must be in place before TensorFlow is first imported."""
import os

# TF 2.21's oneDNN CPU kernels return wrong numbers for some strided convolutions (e.g. a
# 1x2 kernel, stride 2, SAME, on a width-1 input gives zeros); the reference kernels are exact.
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

# CI runs the property tests on a fixed example sequence, so a run is reproducible; local runs
# keep exploring new examples.
from hypothesis import settings

settings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    settings.load_profile("ci")
