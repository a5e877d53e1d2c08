# bench/conv/bench.mk — the conv bench times forward+backward, and backward
# has no public entry point yet (no executor/autograd in the public API), so
# the bench drives the node runtime (op/op.h) directly: it sees the runtime's
# private headers and links the whole static runtime into the binary (every
# symbol it uses, public or internal, then comes from that one copy; the
# libmxplug.so the generic bench rule also names is never called).
BENCH_CFLAGS_conv += $(RUNTIME_PRIV_INC)
BENCH_LDLIBS_conv += -Wl,--whole-archive $(BUILD)/lib/libmxplug.a -Wl,--no-whole-archive $(RUNTIME_LIBS)
$(BUILD)/bench/conv: $(BUILD)/lib/libmxplug.a
