"""What ``convert`` does around the pass pipeline: the exact cut, the symbolic batch,
``info`` on a source, several sources at once."""
