"""The leaf layer: bounded reads, safe writes, npy, wire formats, signals."""
