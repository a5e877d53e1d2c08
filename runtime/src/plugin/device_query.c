/* device_query.c — asking a pack's device how many units it has, and
 * refusing a device ordinal that does not exist before any memory is asked
 * of it.  A device pack's init touches no hardware, so a machine without
 * the hardware loads the pack and its device reports 0 units; this file
 * turns "gpu(0) on such a machine" into one clear error (the device's own
 * explanation from its mem_info slot, e.g. "no CUDA device:
 * cudaGetDeviceCount says ..."), instead of a storage "out of memory".
 * Not here: registration (registrar.c), storage and copies (device_glue.c). */
#include "plugin/plugin_impl.h"

#include <string.h>

/* The name of the pack that registered def d, or "?". */
static const char *pack_of_def(const mxp_device_def *d) {
    const char *name = "?";
    mxp__registry_rdlock();
    for (int k = 0; k < mxp__g_reg.n_features; k++)
        if (mxp__g_reg.features[k].kind == MXP_FEATURE_DEVICE && mxp__g_reg.features[k].def == d &&
            mxp__g_reg.features[k].pack && mxp__g_reg.features[k].pack->man)
            name = mxp__g_reg.features[k].pack->man->name;
    mxp__registry_unlock();
    return name;
}

static int count_of(const mxp_device_def *d, int *out) {
    *out = 0;
    if (!d->count) return MXP_OK;
    mxp_dev_query_args q = {MXP_HEADER(mxp_dev_query_args), d->user_data, 0, 0, 0, 0};
    int rc = d->count(&q);
    if (rc != MXP_OK) return mxp__error_prefix(rc, "device '%s': count", d->name);
    *out = q.count > 0 ? q.count : 0;
    return MXP_OK;
}

int mxp__device_check(const mxp_device_def *d, int32_t dev_id) {
    if (!d || !d->count) return MXP_OK;
    const char *pack = pack_of_def(d);
    int n = 0;
    int rc = count_of(d, &n);
    if (rc) return rc;
    if (dev_id >= 0 && dev_id < n) return MXP_OK;
    /* Let the device explain (mem_info of a missing unit fails with why). */
    if (d->mem_info) {
        mxp__error_clear();
        mxp_dev_query_args q = {MXP_HEADER(mxp_dev_query_args), d->user_data, dev_id, 0, 0, 0};
        if (d->mem_info(&q) != MXP_OK && mxp_last_error()[0])
            return mxp__error_prefix(MXP_EDEVICE, "device %s(%d) (pack '%s', %d unit(s))", d->name, (int)dev_id,
                                     pack, n);
    }
    return mxp__error(MXP_EDEVICE, "device %s(%d) does not exist: pack '%s' reports %d unit(s)", d->name,
                      (int)dev_id, pack, n);
}

int mxp_device_count(const char *name, int *out_count) {
    if (out_count) *out_count = 0;
    if (!name || !out_count) return mxp__error(MXP_EINVAL, "mxp_device_count: NULL argument");
    if (!strcmp(name, "cpu")) {
        *out_count = 1;
        return MXP_OK;
    }
    const void *def = NULL;
    int rc = mxp__registry_feature(MXP_FEATURE_DEVICE, name, &def, NULL);
    if (rc) return rc;
    return count_of(def, out_count);
}

int mxp_device_check(mxp_device dev) {
    if (dev.type == MXP_DEV_CPU || dev.type == MXP_DEV_CPU_PINNED || dev.type == MXP_DEV_CPU_SHARED) {
        if (dev.id < 0) return mxp__error(MXP_EDEVICE, "device %s(%d): negative ordinal", mxp__device_name(dev.type), (int)dev.id);
        return MXP_OK;
    }
    const char *name = mxp__device_name(dev.type);
    if (!strcmp(name, "unknown"))
        return mxp__error(MXP_EDEVICE, "device type %d (ordinal %d): no loaded pack registered it", (int)dev.type,
                          (int)dev.id);
    const void *def = NULL;
    int rc = mxp__registry_feature(MXP_FEATURE_DEVICE, name, &def, NULL);
    if (rc) return mxp__error_prefix(MXP_EDEVICE, "device %s(%d)", name, (int)dev.id);
    return mxp__device_check(def, dev.id);
}

int mxp_pack_device_count(const mxp_pack *pack) { return pack && pack->man ? pack->man->n_devices : 0; }

const char *mxp_pack_device_at(const mxp_pack *pack, int index) {
    if (!pack || !pack->man || index < 0 || index >= pack->man->n_devices) return NULL;
    return pack->man->devices[index];
}
