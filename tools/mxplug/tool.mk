# tools/mxplug/tool.mk — extra link flags for the mxplug CLI (included by the
# top-level Makefile).  `list --json` and `packs --json` use libjansson
# directly, so the CLI links it itself (the runtime's own DT_NEEDED entry is
# not enough for symbols the CLI references); model loading (train/predict)
# reads gzipped files with zlib.
TOOL_LDLIBS_mxplug += -ljansson -lz

# `mxplug im2rec` decodes, resizes and encodes images with the io-image
# pack's codec and reads IDX files with its parser: those sources are
# compiled a second time for the CLI (img_list.c: the .lst reader ImageIter
# shares) (they use only libc, libjpeg-turbo,
# libpng and zlib).
IM2REC_PACK_SRCS := img_codec.c img_resize.c idx.c idx_file.c img_list.c
IM2REC_PACK_OBJS := $(IM2REC_PACK_SRCS:%.c=$(BUILD)/obj/tools/mxplug/io-image/%.o)
$(BUILD)/obj/tools/mxplug/io-image/%.o: plugins/io-image/src/%.c | deps
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) $(API_INC) -Iplugins/io-image/src -c $< -o $@
$(BUILD)/bin/mxplug: $(IM2REC_PACK_OBJS)
TOOL_LDLIBS_mxplug += $(IM2REC_PACK_OBJS) -ljpeg -lturbojpeg -lpng

# tests/fuzz/fuzz_cli_args.c drives the option parsers without a command:
# cli_args.c and device_opt.c compiled by the fuzz rules (the harness
# supplies the message functions main.c has).
$(BUILD)/fuzz/obj/tools/mxplug/%.o: tools/mxplug/%.c | deps $(CONFIG_H)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -Itools/mxplug -c $< -o $@
$(BUILD)/fuzz/obj/tests/fuzz/fuzz_cli_args.o: FUZZ_CFLAGS += -Itools/mxplug
$(BUILD)/fuzz/fuzz_cli_args: $(BUILD)/fuzz/obj/tools/mxplug/cli_args.o $(BUILD)/fuzz/obj/tools/mxplug/device_opt.o
