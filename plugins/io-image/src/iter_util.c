/* iter_util.c — what the io-image iterators share: reporting an error
 * through the host, and checking a float32 batch tensor the host hands to
 * next against the shape provide reported.  No state. */
#include "io_image.h"

#include <stdarg.h>
#include <stdio.h>

int io_image_report(const mxp_host *host, int status, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (host && host->set_error) return host->set_error(status, "%s", msg);
    return status;
}

int io_image_check_f32_batch(const mxp_host *host, const char *iter, const mxp_tensor *t, const char *what,
                             const mxp_shape *want) {
    int same = t->ndim == want->ndim && t->shape;
    for (int32_t d = 0; same && d < want->ndim; d++) same = t->shape[d] == want->dims[d];
    if (!same)
        return io_image_report(host, MXP_ESHAPE, "%s next: '%s' tensor does not have the shape provide reported",
                               iter, what);
    if (t->dtype != MXP_DTYPE_F32)
        return io_image_report(host, MXP_ETYPE, "%s next: '%s' tensor has dtype %d, expected float32", iter, what,
                               t->dtype);
    if (!t->data || !mxp_tensor_is_contiguous(t))
        return io_image_report(host, MXP_EUNSUPPORTED, "%s next: '%s' tensor must be dense and non-NULL", iter, what);
    if (t->device.type != MXP_DEV_CPU && t->device.type != MXP_DEV_CPU_PINNED && t->device.type != MXP_DEV_CPU_SHARED)
        return io_image_report(host, MXP_EDEVICE, "%s next: '%s' tensor must be in host memory (device type %d)",
                               iter, what, t->device.type);
    return MXP_OK;
}
