"""The NCHW -> NHWC layout, used by the ``to_nhwc`` pass.

``perm``: a value's layout as a permutation of its source axes, and its algebra. ``walk``: the
walk's state and what a layout rule is. ``rules`` and ``moves``: the rules; ``table``: each core
op's rule and, from it, its layout class. ``images``: which nodes read a value as an NCHW
image. ``boundary``: the layout contract at the graph's inputs and outputs.
"""
