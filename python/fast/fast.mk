# python/fast/fast.mk — included by the Makefile: the optional CPython
# extension _mxplug_fast (python/fast/mxplug_fast.c; docs/python.md), built
# into $(BUILD)/lib next to libmxplug.so when Debian's python3-dev headers
# are there, skipped (the package then runs its ctypes path) when not.
# Not in sanitizer builds: Python would need the sanitizer runtime preloaded.
PY_FAST_INC := $(shell /usr/bin/python3 -c 'import sysconfig, os; p = sysconfig.get_paths()["include"]; print(p if os.path.isfile(os.path.join(p, "Python.h")) else "")' 2>/dev/null)
PY_FAST_SUFFIX := $(shell /usr/bin/python3 -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX") or "")' 2>/dev/null)
ifneq ($(and $(PY_FAST_INC),$(PY_FAST_SUFFIX)),)
ifeq ($(SANITIZE),)
PY_FAST := $(BUILD)/lib/_mxplug_fast$(PY_FAST_SUFFIX)
all: $(PY_FAST)
$(BUILD)/obj/python/fast/mxplug_fast.o: python/fast/mxplug_fast.c | deps
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) -fvisibility=hidden $(RUNTIME_INC) -isystem $(PY_FAST_INC) -c $< -o $@
$(PY_FAST): $(BUILD)/obj/python/fast/mxplug_fast.o
	@mkdir -p $(dir $@)
	$(CC) -shared -o $@ $^
endif
endif
