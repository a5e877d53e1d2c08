# bench/kvstore/bench.mk — the `raw` mode calls MPI_Allreduce directly (the
# floor the KVStore is compared with), so the bench links Open MPI when it is
# installed; without it bench.c builds without that mode and run.sh skips.
KVBENCH_MPICC := $(shell command -v mpicc 2>/dev/null)
ifneq ($(KVBENCH_MPICC),)
BENCH_CFLAGS_kvstore += $(shell mpicc --showme:compile) -DKVBENCH_HAVE_MPI
BENCH_LDLIBS_kvstore += $(shell mpicc --showme:link)
endif
