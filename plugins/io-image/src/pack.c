/* pack.c — the io-image pack's descriptor and init: registers the data
 * iterators (MNISTIter, ImageRecordIter, ImageRecordUInt8Iter, CSVIter, ImageIter) with the host.  Holds no other logic; the
 * iterators live in their own files.  Only mxp_plugin_v1 is exported. */
#include "io_image.h"

io_image_pack io_image_pack_state;

static const mxp_stat_def skipped_corrupt_def = {
    MXP_HEADER(mxp_stat_def), "image_iter.skipped_corrupt", MXP_STAT_COUNT, 0, "samples",
    "records or image files ImageRecordIter/ImageIter skipped as corrupt (skip_corrupt=True)",
};

static int io_image_init(const mxp_plugin_init_args *a) {
    if (!a || !a->host || !a->registrar || !a->registrar->add_iter) return MXP_EINVAL;
    io_image_pack_state.host = a->host;
    int rc = mxp_registrar_add_stat(a->registrar, &skipped_corrupt_def, &io_image_pack_state.skipped_corrupt);
    if (rc == MXP_OK) rc = a->registrar->add_iter(a->registrar, &io_image_mnist_iter_def);
    if (rc == MXP_OK) rc = a->registrar->add_iter(a->registrar, &io_image_rec_iter_def);
    if (rc == MXP_OK) rc = a->registrar->add_iter(a->registrar, &io_image_rec_u8_iter_def);
    if (rc == MXP_OK) rc = a->registrar->add_iter(a->registrar, &io_image_csv_iter_def);
    if (rc == MXP_OK) rc = a->registrar->add_iter(a->registrar, &io_image_list_iter_def);
    return rc;
}

static void io_image_fini(const mxp_plugin_fini_args *a) {
    (void)a;
    io_image_pack_state.host = NULL;
    io_image_pack_state.skipped_corrupt = NULL;
}

static const mxp_plugin_desc io_image_desc = {
    .hdr = MXP_HEADER(mxp_plugin_desc),
    .min_host_minor = 0,
    .name = "io-image",
    .version = "0.1.0",
    .description = "Image data iterators: MNISTIter (IDX files), ImageRecordIter and ImageRecordUInt8Iter (RecordIO, JPEG/PNG), CSVIter, ImageIter (.lst of image files)",
    .license = "Apache-2.0",
    .init = io_image_init,
    .fini = io_image_fini,
};

MXP_PLUGIN_DEFINE(io_image_desc)
