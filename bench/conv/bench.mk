# bench/conv/bench.mk — the conv bench times forward+backward, and backward
# has no public entry point yet (no executor/autograd in the public API), so
# the bench drives the node runtime (op/op.h) directly: it sees the runtime's
# private headers and links the whole static runtime into the binary (every
# symbol it uses, public or internal, then comes from that one copy; the
# libmxplug.so the generic bench rule also names is never called).
BENCH_CFLAGS_conv += $(RUNTIME_PRIV_INC)
BENCH_LDLIBS_conv += -Wl,--whole-archive $(BUILD)/lib/libmxplug.a -Wl,--no-whole-archive $(RUNTIME_LIBS)
$(BUILD)/bench/conv: $(BUILD)/lib/libmxplug.a

# The oneDNN column: bench/conv/onednn/onednn_conv.c is its own binary
# (conv-onednn), the only thing in the tree that links libdnnl (Debian
# libdnnl-dev, listed in tools/install-deps.sh); its own process, so
# oneDNN's OpenMP threads never share a process with the runtime's.
CONV_ONEDNN_OBJ := $(BUILD)/obj/bench/conv/onednn/onednn_conv.o
CONV_ONEDNN_BIN := $(BUILD)/bench/conv-onednn
$(CONV_ONEDNN_BIN): $(CONV_ONEDNN_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(LDSAN) -o $@ $(CONV_ONEDNN_OBJ) -ldnnl -lm
bench-conv: $(BUILD)/bench/conv-onednn
