# io-image: zlib reads gzipped IDX files (gzopen/gzread also pass plain
# files through).
PACK_LDLIBS_io-image += -lz

# The fuzz harness tests/fuzz/fuzz_idx.c drives the pack's IDX parser, which
# is not part of the runtime objects the generic fuzz rule links: add it.
$(BUILD)/fuzz/obj/plugins/io-image/src/%.o: plugins/io-image/src/%.c | deps
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -Iplugins/io-image/src -c $< -o $@
$(BUILD)/fuzz/fuzz_idx: $(BUILD)/fuzz/obj/plugins/io-image/src/idx.o

# ImageRecordIter: JPEG through libjpeg-turbo (its libjpeg API for cropped,
# DCT-scaled decoding; TurboJPEG for encoding) and PNG through libpng.  The
# RecordIO format functions are the runtime's recordio_core.c, compiled a
# second time into the pack (the pack cannot call runtime internals).
PACK_LDLIBS_io-image += -ljpeg -lturbojpeg -lpng
PACK_EXTRA_OBJS_io-image += $(BUILD)/obj/plugins/io-image/shared/recordio_core.o
$(BUILD)/obj/plugins/io-image/shared/recordio_core.o: runtime/src/io/recordio_core.c | deps
	@mkdir -p $(dir $@)
	$(CC) $(PACK_FLAGS) -c $< -o $@
PACK_CFLAGS_io-image += -Iruntime/src/io

# tests/fuzz/fuzz_image.c drives the decode path (codec, resize, augmenter).
IO_IMAGE_FUZZ_OBJS := $(addprefix $(BUILD)/fuzz/obj/plugins/io-image/src/,img_codec.o img_resize.o img_bilinear.o image_aug.o)
$(BUILD)/fuzz/fuzz_image: $(IO_IMAGE_FUZZ_OBJS)
$(BUILD)/fuzz/fuzz_image: RUNTIME_LIBS += -ljpeg -lturbojpeg -lpng

# tests/fuzz/fuzz_iter_create.c creates the pack's iterators through the
# runtime: it loads a copy of the pack built with the fuzz flags (coverage,
# ASan/UBSan; sanitizer runtimes come from the harness executable), named by
# its own manifest next to the harness.
IO_IMAGE_FUZZ_PACK_OBJS := $(patsubst %.c,$(BUILD)/fuzz/obj/%.o,$(wildcard plugins/io-image/src/*.c)) \
  $(BUILD)/fuzz/obj/plugins/io-image/shared/recordio_core.o
$(BUILD)/fuzz/obj/plugins/io-image/shared/recordio_core.o: runtime/src/io/recordio_core.c | deps
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fvisibility=hidden -c $< -o $@
$(BUILD)/fuzz/iter-packs/libmxp-io-image.so: $(IO_IMAGE_FUZZ_PACK_OBJS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) -shared -fsanitize=fuzzer-no-link $(FUZZ_SAN) -o $@ $^ -ljpeg -lturbojpeg -lpng -lz -lm -pthread
$(BUILD)/fuzz/iter-packs/manifest.yaml: plugins/io-image/manifest.yaml
	@mkdir -p $(dir $@)
	@{ echo "manifest_version: 1"; echo "packs:"; sed 's/^/  /' $<; } > $@.tmp && mv $@.tmp $@
$(BUILD)/fuzz/fuzz_iter_create: | $(BUILD)/fuzz/iter-packs/libmxp-io-image.so $(BUILD)/fuzz/iter-packs/manifest.yaml

# tests/fuzz/fuzz_img_list.c drives the .lst reader (ImageIter, im2rec pack mode).
$(BUILD)/fuzz/fuzz_img_list: $(BUILD)/fuzz/obj/plugins/io-image/src/img_list.o
