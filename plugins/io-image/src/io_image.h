/* io_image.h — what the files of the io-image pack share: the pack's
 * state (the host table, set by init) and the iterator definitions that
 * pack.c registers.  Everything here has hidden visibility (the pack is
 * built with -fvisibility=hidden); only mxp_plugin_v1 is exported. */
#ifndef MXP_IO_IMAGE_H
#define MXP_IO_IMAGE_H

#include <mxp/plugin.h>
#include <mxp/stats.h>

typedef struct io_image_pack {
    const mxp_host *host; /* valid between init and fini */
    /* Counters published to the application (ABI 1.2, mxp/stats.h; NULL
     * on an older host, where bumping them does nothing). */
    mxp_stat *skipped_corrupt; /* samples skip_corrupt left out */
} io_image_pack;

extern io_image_pack io_image_pack_state;
extern const mxp_iter_def io_image_mnist_iter_def;
extern const mxp_iter_def io_image_rec_iter_def;     /* image_rec_iter.c */
extern const mxp_iter_def io_image_rec_u8_iter_def;
extern const mxp_iter_def io_image_csv_iter_def;     /* csv_iter.c */
extern const mxp_iter_def io_image_list_iter_def;    /* image_list_iter.c: ImageIter */

/* iter_util.c: set the host's error (when it has set_error) and return
 * status; check a float32 batch tensor of `iter`'s next against `want`. */
int io_image_report(const mxp_host *host, int status, const char *fmt, ...) MXP_HOST_PRINTF(3, 4);
int io_image_check_f32_batch(const mxp_host *host, const char *iter, const mxp_tensor *t, const char *what,
                             const mxp_shape *want);

#endif /* MXP_IO_IMAGE_H */
