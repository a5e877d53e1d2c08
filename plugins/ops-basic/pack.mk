# ops-basic: dot/batch_dot call OpenBLAS cblas_?gemm.
PACK_LDLIBS_ops-basic += -lopenblas
# gcc 12 -O2 uses the "very cheap" vectoriser, which refuses loops needing a
# runtime alias check (every kernel: out may alias an input for inplace).
PACK_CFLAGS_ops-basic += -fvect-cost-model=dynamic
