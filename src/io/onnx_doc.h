/* The ONNX importer's op list as Markdown (the table in docs/onnx.md),
 * for `chutney info --supported-ops`. Internal: tools link the static
 * library. Returns the number of ops listed (0 without ONNX support). */
#ifndef CN_IO_ONNX_DOC_H
#define CN_IO_ONNX_DOC_H

#include <stdio.h>

int cn_onnx_ops_markdown(FILE *f);

#endif
