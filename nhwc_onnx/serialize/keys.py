"""metadata_props keys the serializer owns (read back by the reader)."""
KEY_CONVERTER_VERSION = "converter_version"
KEY_IO_PERMUTATIONS = "io_permutations"
