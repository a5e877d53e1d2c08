# tools/mxplug/tool.mk — extra link flags for the mxplug CLI (included by the
# top-level Makefile).  `list --json` and `packs --json` use libjansson
# directly, so the CLI links it itself (the runtime's own DT_NEEDED entry is
# not enough for symbols the CLI references); model loading (train/predict)
# reads gzipped files with zlib.
TOOL_LDLIBS_mxplug += -ljansson -lz
