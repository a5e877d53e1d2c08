# ops-nn: BLAS for FullyConnected and the gemm/winograd convolutions.
# Vector kernels use function multiversioning (target_clones) and runtime
# CPU checks, so no -march flag is needed and the pack loads on any x86-64.
PACK_LDLIBS_ops-nn += -lopenblas
ifeq ($(SANITIZE),)
PACK_CFLAGS_ops-nn += -O3
endif
PACK_CFLAGS_ops-nn += -ffp-contract=fast
