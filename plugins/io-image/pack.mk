# io-image: zlib reads gzipped IDX files (gzopen/gzread also pass plain
# files through).
PACK_LDLIBS_io-image += -lz

# The fuzz harness tests/fuzz/fuzz_idx.c drives the pack's IDX parser, which
# is not part of the runtime objects the generic fuzz rule links: add it.
$(BUILD)/fuzz/obj/plugins/io-image/src/%.o: plugins/io-image/src/%.c | deps
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -Iplugins/io-image/src -c $< -o $@
$(BUILD)/fuzz/fuzz_idx: $(BUILD)/fuzz/obj/plugins/io-image/src/idx.o
