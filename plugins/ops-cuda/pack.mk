# ops-cuda: the `gpu` device and CUDA/cuBLAS/cuDNN kernels.  Built only in
# the plain build when nvcc is found: sanitizer builds (SANITIZE set) skip
# it, since ASan/TSan cannot instrument device code and the CUDA libraries
# are not built for them; without nvcc the pack is skipped.  Either way make
# prints one line saying why (the Makefile's deps target).  C sources (src/*.c) are compiled by $(CC)
# against the toolkit's headers; CUDA sources (src/*.cu) by nvcc for sm_80
# and sm_90 plus sm_90 PTX (A100, H100, H200, and later GPUs through the
# driver's JIT).  The pack links cudart, cuBLAS and cuDNN; the host links
# none of them.
CUDA_HOME ?= /usr/local/cuda
NVCC ?= $(firstword $(shell command -v nvcc 2>/dev/null) $(wildcard $(CUDA_HOME)/bin/nvcc))
ifneq ($(SANITIZE),)
PACK_SKIP_ops-cuda := SANITIZE is set (CUDA code is compiled in the plain build only)
else ifeq ($(NVCC),)
PACK_SKIP_ops-cuda := nvcc not found (install the CUDA Toolkit, or set NVCC= or CUDA_HOME=)
endif

ifeq ($(PACK_SKIP_ops-cuda),)
CUDA_GENCODE := -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
                -gencode arch=compute_90,code=compute_90
NVCC_FLAGS := -std=c++17 -O3 $(CUDA_GENCODE) -Xcompiler -fPIC,-fvisibility=hidden,-Wall,-Wextra \
              -Werror all-warnings -Iplugin-api/include -Iplugins/ops-cuda/src
PACK_CFLAGS_ops-cuda += -I$(CUDA_HOME)/include
PACK_LDLIBS_ops-cuda += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudnn -lcublas -lcudart -lstdc++
ops-cuda_CU_SRCS := $(sort $(wildcard plugins/ops-cuda/src/*.cu))
ops-cuda_CU_OBJS := $(ops-cuda_CU_SRCS:%.cu=$(BUILD)/obj/%.cu.o)
PACK_EXTRA_OBJS_ops-cuda := $(ops-cuda_CU_OBJS)
$(BUILD)/obj/plugins/ops-cuda/%.cu.o: plugins/ops-cuda/%.cu | deps
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCC_FLAGS) -MD -MF $(@:.o=.d) -c $< -o $@
endif

# make test-gpu: the GPU-side tests (tests/unit/cuda/: every gpu op against
# the cpu, copies, the pack without a GPU).  Without a GPU, or without the
# pack, each test skips and says why (--verbose prints the reason).  They
# also run in `make test`, where they skip the same way.
CUDA_TEST_BINS := $(patsubst tests/unit/%.c,$(BUILD)/tests/unit/%,$(wildcard tests/unit/cuda/test_*.c))
test-gpu: all $(CUDA_TEST_BINS)
	@rc=0; log=$$(mktemp); for t in $(CUDA_TEST_BINS); do \
	  echo "--- $$t"; \
	  MXP_MANIFEST=$(BUILD_ABS)/plugins/manifest.yaml $$t --verbose >$$log 2>&1 || rc=1; \
	  grep -E '^\[(SKIP|FAIL|====)|Assertion|skip|no GPU' $$log || true; \
	done; rm -f $$log; exit $$rc
.PHONY: test-gpu
