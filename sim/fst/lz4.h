/* The two LZ4 entry points Verilator's FST writer calls, declared for machines that
 * have the LZ4 runtime library (liblz4.so.1, present on most Linux systems) but not
 * its development headers. Their signatures have been stable since LZ4 1.7 (2015).
 * Used only when nnrtl builds a model with FST tracing; see nnrtl/sim/runner.py. */
#ifndef NNRTL_LZ4_SHIM_H
#define NNRTL_LZ4_SHIM_H
#ifdef __cplusplus
extern "C" {
#endif
int LZ4_compressBound(int inputSize);
int LZ4_compress_default(const char* src, char* dst, int srcSize, int dstCapacity);
#ifdef __cplusplus
}
#endif
#endif
