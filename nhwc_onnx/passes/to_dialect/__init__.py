"""The core->dialect half of the passes: the op table, bias and BatchNorm folding,
padding normalisation, op selection and legalisation."""
