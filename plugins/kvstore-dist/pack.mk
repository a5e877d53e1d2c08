# kvstore-dist: links Open MPI (libopenmpi-dev provides mpicc and mpi.h).
# Without it the pack is skipped (make says so: the Makefile's deps target)
# and the rest of mxplug builds as usual; the front end then refuses dist_*
# types, naming this pack.
KVDIST_MPICC := $(shell command -v mpicc 2>/dev/null)
ifeq ($(KVDIST_MPICC),)
PACK_SKIP_kvstore-dist := Open MPI not found (no mpicc; install libopenmpi-dev openmpi-bin)
else
PACK_CFLAGS_kvstore-dist += $(shell mpicc --showme:compile)
PACK_LDLIBS_kvstore-dist += $(shell mpicc --showme:link)
endif
PACK_CFLAGS_kvstore-dist += -fvect-cost-model=dynamic
