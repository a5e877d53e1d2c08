/* plugin/tune_device.h — tune's device side (tune_device.c): scratch
 * tensors in a device's own memory, a stream for the timing thread, and
 * waiting for asynchronous impls.  Used by tune.c only. */
#ifndef MXP_PLUGIN_TUNE_DEVICE_H
#define MXP_PLUGIN_TUNE_DEVICE_H

#include "opdef.h"
#include "storage/storage.h"

typedef struct mxp__tune_dev_slot {
    void **where;              /* the tensor's data field                    */
    void *host;                /* the host buffer it held (tune.c frees it)  */
    mxp_storage_block block;   /* the device copy it points to meanwhile     */
} mxp__tune_dev_slot;

typedef struct mxp__tune_dev {
    mxp_device dev;
    int on_device;             /* 0: the host reaches dev's memory: no-ops   */
    void *stream;              /* the timing thread's stream, or NULL        */
    mxp__tune_dev_slot *slots;
    int n, cap;
} mxp__tune_dev;

/* For dev: a stream (thread_init + stream_create, as a worker gets). */
int mxp__tune_dev_begin(mxp_device dev, mxp__tune_dev *td);
/* *ptr (a host buffer of `bytes`, already filled) is copied to the device
 * and replaced by the device pointer until mxp__tune_dev_end. */
int mxp__tune_dev_move(mxp__tune_dev *td, void **ptr, size_t bytes);
/* Put every host pointer back, free the device blocks and the stream. */
void mxp__tune_dev_end(mxp__tune_dev *td);
/* mxp__inst_run, and for an async impl wait until it completed (its
 * status and message become the result). */
int mxp__tune_run(const mxp__inst *inst, const mxp__run *r, mxp_op_ctx *ctx);

#endif /* MXP_PLUGIN_TUNE_DEVICE_H */
