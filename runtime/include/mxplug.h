/* mxplug.h — the public C API of libmxplug for applications.
 *
 * Conventions (see README.md):
 *   - Every fallible call returns int: MXP_OK (0) or a negative MXP_E* code.
 *     mxp_last_error() then gives a message naming what failed, why and where.
 *   - Handles are opaque.  create/free, retain/release, open/close pair up;
 *     every free/release accepts NULL.
 *   - Out-parameters come last and are cleared on entry.
 * Shared vocabulary (status codes, dtypes, devices, shapes) comes from
 * <mxp/types.h>, the same header plugin packs use.
 * The API is split by module under mxplug/; this header includes them all. */
#ifndef MXPLUG_H
#define MXPLUG_H

#include <mxplug/base.h>     /* errors, logging, versions, dtype names   */
#include <mxplug/engine.h>   /* dependency engine                        */
#include <mxplug/registry.h> /* packs, ops, implementation choice        */
#include <mxplug/storage.h>  /* device memory pools                      */
#include <mxplug/random.h>   /* seeding the random generators            */
#include <mxplug/ndarray.h>  /* n-dimensional arrays, .params files      */
#include <mxplug/invoke.h>   /* running ops on NDArrays (imperative)     */
#include <mxplug/symbol.h>   /* symbolic graphs, JSON, inference         */
#include <mxplug/executor.h> /* bound graphs: forward, backward          */
#include <mxplug/io.h>       /* data iterators, prefetching              */
#include <mxplug/recordio.h> /* RecordIO .rec/.idx files (MXNet im2rec)   */
#include <mxplug/train.h>    /* initializers, optimizers, metrics, checkpoints */
#include <mxplug/kvstore.h>  /* KVStore: push/pull, local and distributed */
#include <mxplug/autograd.h> /* imperative autograd: record, backward      */
#include <mxplug/fileio.h>   /* regular-file reads, atomic writes, checked sizes */
#include <mxplug/profiler.h> /* Chrome-trace profiles, per-op tables    */

#endif /* MXPLUG_H */
