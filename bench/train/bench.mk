# bench/train/bench.mk — bench.c reads the IDX files itself (gzip via zlib).
BENCH_LDLIBS_train += -lz
