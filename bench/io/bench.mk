# bench/io/bench.mk — bench.c times TurboJPEG's full decode itself (the
# decode bound), so it links libturbojpeg.
BENCH_LDLIBS_io += -lturbojpeg
