/* module.c — mx.mod.Module in C: a symbol bound through the executor
 * (mxp_executor_simple_bind) to an iterator's shapes, its parameters, an
 * optimizer, and the fit / score / predict loops (python/mxnet/module/
 * base_module.py fit(): per epoch reset metric, for each batch
 * forward_backward + update + update_metric, then score the validation
 * data, checkpoint, reset the iterator).
 *
 * Training executor: every argument gets a gradient except data and
 * labels.  Inference executor (score/predict): bound on demand with data
 * shapes only and no gradients; parameters are copied into it before each
 * pass (from a pending load_checkpoint instead, read from the file, so a
 * fresh module can score/predict a checkpoint without fit).  Optimizer index i = parameter i in list_arguments order minus
 * data/label (MXNet's Module order).
 *
 * Resume: load_checkpoint only records prefix/epoch; fit seeds and
 * initializes as a fresh run would (so the RNG moves identically), then
 * copies the checkpoint's parameters in and restores optimizer states and
 * RNG position; the iterator is set to each epoch explicitly, so epoch e
 * sees the order of (seed, e) whether or not the run was interrupted.
 *
 * Device (mxp_module_set_device, MXNet's Module(context=...)): both
 * executors are bound on it, so parameters, gradients, optimizer states
 * and outputs live there; batches are copied in from the iterators' host
 * arrays at every step (feed), and whatever the host reads — metrics, the
 * finiteness checks, predictions, checkpoints — is copied back first.
 * Initializers run on host arrays that are then copied to the device, so
 * one seed gives the same initial weights on every device. */
#include "train/train.h"
#include "base/env.h"
#include "engine/engine.h"
#include "kvstore/kvstore_fit.h"
#include "plugin/plugin.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mxplug/executor.h>
#include <mxplug/registry.h>

struct mxp_module {
    mxp_symbol *sym;
    char **data_names, **label_names;
    int n_data, n_label;
    char **arg_names;       /* list_arguments copy                         */
    int n_args;
    char **aux_names;
    int n_aux;
    int *is_param;          /* [n_args] 1 unless data/label                */
    int *opt_index;         /* [n_args] optimizer index or -1              */
    int n_params;
    char **param_names;     /* [n_params] (borrowed from arg_names)        */
    mxp_executor *train_ex; /* bound at first fit                          */
    int64_t batch;
    mxp_executor *infer_ex;
    int64_t infer_batch;
    int initialized;
    mxp_optimizer *opt;
    char *load_prefix;
    int load_epoch, load_states, load_pending;
    mxp_kvstore *kv;        /* the store whose keys fit initialised      */
    mxp_ndarray *kv_metric; /* float64 [2]: a metric's sum and count     */
    mxp_device dev;         /* where the executors are bound (cpu(0))    */
};

static const mxp_device cpu0 = {MXP_DEV_CPU, 0};

static int on_host(mxp_device d) { return d.type == MXP_DEV_CPU || d.type == MXP_DEV_CPU_PINNED || d.type == MXP_DEV_CPU_SHARED; }

/* Copy a checkpoint array into a bound one: same dtype and the same shape,
 * not only the same element count (a transposed (784,128) weight into a
 * (128,784) binding would train or score garbage silently). */
static int copy_param(const mxp_module *m, const char *what, const char *name, mxp_ndarray *src, mxp_ndarray *dst) {
    int ns = mxp_ndarray_ndim(src), nd = mxp_ndarray_ndim(dst);
    const int64_t *ss = mxp_ndarray_shape(src), *ds = mxp_ndarray_shape(dst);
    int same = ns == nd;
    for (int i = 0; same && i < ns; i++) same = ss[i] == ds[i];
    if (!same) {
        mxp_shape a = {0}, b = {0};
        a.ndim = ns;
        b.ndim = nd;
        for (int i = 0; i < ns && i < MXP_MAX_NDIM; i++) a.dims[i] = ss[i];
        for (int i = 0; i < nd && i < MXP_MAX_NDIM; i++) b.dims[i] = ds[i];
        char sa[160], sb[160];
        mxp__shape_str(&a, sa, sizeof sa);
        mxp__shape_str(&b, sb, sizeof sb);
        return mxp__error(MXP_ESHAPE, "checkpoint '%s' epoch %d: %s '%s' has shape %s, the network needs %s",
                          m->load_prefix ? m->load_prefix : "?", m->load_epoch, what, name, sa, sb);
    }
    int rc = mxp_ndarray_copy(src, dst);
    return rc ? mxp__error_prefix(rc, "checkpoint %s '%s'", what, name) : MXP_OK;
}

/* On an error return of a call that pushed work (fit, score, predict):
 * wait for everything queued, so the caller may free the module, its
 * iterators or the registry at once; the call's own message is kept. */
static int drained(int rc) {
    if (rc) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", mxp_last_error());
        mxp__engine_drain();
        mxp__error(rc, "%s", msg);
    }
    return rc;
}

static char **copy_names(int n, const char *const *src) {
    char **d = calloc((size_t)n + 1, sizeof *d);
    if (!d) return NULL;
    for (int i = 0; i < n; i++)
        if (!(d[i] = strdup(src[i]))) {
            for (int j = 0; j < i; j++) free(d[j]);
            free(d);
            return NULL;
        }
    return d;
}

static void free_names(char **v, int n) {
    if (!v) return;
    for (int i = 0; i < n; i++) free(v[i]);
    free(v);
}

static int in_list(char **v, int n, const char *s) {
    for (int i = 0; i < n; i++)
        if (!strcmp(v[i], s)) return i;
    return -1;
}

int mxp_module_create(mxp_symbol *sym, int n_data, const char *const *data_names, int n_label,
                      const char *const *label_names, mxp_module **out) {
    if (!out) return mxp__error(MXP_EINVAL, "mxp_module_create: out is NULL");
    *out = NULL;
    if (!sym) return mxp__error(MXP_EINVAL, "mxp_module_create: symbol is NULL");
    static const char *const def_data[] = {"data"}, *const def_label[] = {"softmax_label"};
    if (n_data < 0 || n_label < 0)
        return mxp__error(MXP_EINVAL, "mxp_module_create: negative name count (%d data, %d label)", n_data, n_label);
    /* NULL names: the default list, when the count asks for at most one
     * name (data: 0 or 1 -> {"data"}; label: 1 -> {"softmax_label"},
     * 0 -> no label).  A larger count with NULL names has no meaning. */
    if (!data_names && n_data > 1)
        return mxp__error(MXP_EINVAL, "mxp_module_create: %d data names expected, names are NULL", n_data);
    if (!label_names && n_label > 1)
        return mxp__error(MXP_EINVAL, "mxp_module_create: %d label names expected, names are NULL", n_label);
    if (!data_names) data_names = def_data, n_data = 1;
    if (!label_names && n_label == 1) label_names = def_label;
    mxp_module *m = calloc(1, sizeof *m);
    if (!m) return mxp__error_oom("module");
    m->sym = mxp_symbol_retain(sym);
    m->dev = cpu0;
    m->n_data = n_data;
    m->n_label = n_label;
    m->data_names = copy_names(n_data, data_names);
    m->label_names = copy_names(n_label, label_names);
    int n;
    const char *const *names;
    int rc = mxp_symbol_list_arguments(sym, &n, &names);
    if (rc == MXP_OK) {
        m->n_args = n;
        m->arg_names = copy_names(n, names);
        rc = mxp_symbol_list_auxiliary_states(sym, &n, &names);
    }
    if (rc == MXP_OK) {
        m->n_aux = n;
        m->aux_names = copy_names(n, names);
    }
    if (rc == MXP_OK) {
        m->is_param = calloc((size_t)m->n_args + 1, sizeof *m->is_param);
        m->opt_index = calloc((size_t)m->n_args + 1, sizeof *m->opt_index);
        m->param_names = calloc((size_t)m->n_args + 1, sizeof *m->param_names);
        if (!m->data_names || !m->label_names || !m->arg_names || !m->aux_names || !m->is_param || !m->opt_index ||
            !m->param_names)
            rc = mxp__error_oom("module");
    }
    for (int i = 0; rc == MXP_OK && i < n_data; i++)
        if (in_list(m->arg_names, m->n_args, m->data_names[i]) < 0)
            rc = mxp__error(MXP_EINVAL, "module: data '%s' is not an argument of the symbol", m->data_names[i]);
    for (int i = 0; rc == MXP_OK && i < m->n_args; i++) {
        int io = in_list(m->data_names, n_data, m->arg_names[i]) >= 0 || in_list(m->label_names, n_label, m->arg_names[i]) >= 0;
        m->is_param[i] = !io;
        m->opt_index[i] = io ? -1 : m->n_params;
        if (!io) m->param_names[m->n_params++] = m->arg_names[i];
    }
    if (rc != MXP_OK) {
        mxp_module_free(m);
        return rc;
    }
    *out = m;
    return MXP_OK;
}

int mxp_module_set_device(mxp_module *m, mxp_device dev) {
    if (!m) return mxp__error(MXP_EINVAL, "mxp_module_set_device: NULL module");
    if (m->train_ex || m->infer_ex)
        return mxp__error(MXP_EMISUSE, "mxp_module_set_device: the module is already bound on %s(%d)",
                          mxp__device_name(m->dev.type), (int)m->dev.id);
    int rc = mxp_device_check(dev);
    if (rc) return rc;
    m->dev = dev;
    return MXP_OK;
}

mxp_device mxp_module_device(const mxp_module *m) { return m ? m->dev : cpu0; }

void mxp_module_free(mxp_module *m) {
    if (!m) return;
    mxp_executor_free(m->train_ex);
    mxp_executor_free(m->infer_ex);
    mxp_optimizer_free(m->opt);
    mxp_ndarray_release(m->kv_metric);
    mxp_symbol_release(m->sym);
    free_names(m->data_names, m->n_data);
    free_names(m->label_names, m->n_label);
    free_names(m->arg_names, m->n_args);
    free_names(m->aux_names, m->n_aux);
    free(m->is_param);
    free(m->opt_index);
    free(m->param_names);
    free(m->load_prefix);
    free(m);
}

/* Shapes of an iterator's entries under the module's input names. */
static int iter_shapes(const mxp_module *m, const mxp_iter *it, int with_label, const char **names, mxp_shape *shapes,
                       int *out_n) {
    int n = 0;
    int nd = mxp_iter_num_data(it), nl = mxp_iter_num_label(it);
    if (nd != m->n_data)
        return mxp__error(MXP_EINVAL, "module: the iterator provides %d data entries, the module expects %d", nd, m->n_data);
    for (int k = 0; k < nd + (with_label ? nl : 0) && k < m->n_data + m->n_label; k++) {
        int ndim;
        const int64_t *shape;
        int rc = k < nd ? mxp_iter_provide_data(it, k, NULL, &ndim, &shape, NULL)
                        : mxp_iter_provide_label(it, k - nd, NULL, &ndim, &shape, NULL);
        if (rc) return rc;
        names[n] = k < nd ? m->data_names[k] : m->label_names[k - nd];
        memset(&shapes[n], 0, sizeof shapes[n]);
        shapes[n].ndim = ndim;
        memcpy(shapes[n].dims, shape, (size_t)ndim * sizeof *shape);
        n++;
    }
    *out_n = n;
    return MXP_OK;
}

static mxp_ndarray *ex_arg(mxp_executor *ex, int i) {
    int n;
    mxp_ndarray *const *a;
    if (mxp_executor_args(ex, &n, &a) || i >= n) return NULL;
    return a[i];
}

static int bind_train(mxp_module *m, const mxp_iter *it) {
    if (m->train_ex) return MXP_OK;
    const char *names[32];
    mxp_shape shapes[32];
    int n = 0;
    int rc = iter_shapes(m, it, 1, names, shapes, &n);
    if (rc) return rc;
    const char *no_grad[32];
    int n_ng = 0;
    for (int i = 0; i < m->n_data && n_ng < 32; i++) no_grad[n_ng++] = m->data_names[i];
    for (int i = 0; i < m->n_label && n_ng < 32; i++)
        if (in_list(m->arg_names, m->n_args, m->label_names[i]) >= 0) no_grad[n_ng++] = m->label_names[i];
    rc = mxp_executor_simple_bind(m->sym, m->dev, n, names, shapes, MXP_REQ_WRITE, n_ng, no_grad, &m->train_ex);
    if (rc) return mxp__error_prefix(rc, "module: binding for training");
    m->batch = mxp_iter_batch_size(it);
    return MXP_OK;
}

mxp_ndarray *mxp_module_param(const mxp_module *m, const char *name) {
    if (!m || !name || !m->train_ex) return NULL;
    int i = in_list(m->arg_names, m->n_args, name);
    if (i >= 0) return m->is_param[i] ? ex_arg(m->train_ex, i) : NULL;
    i = in_list(m->aux_names, m->n_aux, name);
    if (i < 0) return NULL;
    int n;
    mxp_ndarray *const *a;
    if (mxp_executor_aux(m->train_ex, &n, &a) || i >= n) return NULL;
    return a[i];
}

int mxp_module_num_params(const mxp_module *m) { return m ? m->n_params : 0; }
const char *mxp_module_param_name(const mxp_module *m, int i) {
    return m && i >= 0 && i < m->n_params ? m->param_names[i] : NULL;
}

/* One initializer rule on a bound array; off the host, through a host
 * array of the same shape (the initializers' random ops run on the CPU,
 * and the weights do not depend on the device). */
static int init_one(const mxp_init_rules *rules, const char *name, mxp_ndarray *dst) {
    if (!dst || on_host(mxp_ndarray_device(dst))) return mxp_init_rules_apply(rules, name, dst);
    mxp_ndarray *h = NULL;
    int rc = mxp_ndarray_create(mxp_ndarray_shape(dst), mxp_ndarray_ndim(dst), mxp_ndarray_dtype(dst), cpu0, &h);
    if (rc == MXP_OK) rc = mxp_init_rules_apply(rules, name, h);
    if (rc == MXP_OK) rc = mxp_ndarray_copy(h, dst);
    mxp_ndarray_release(h); /* the copy holds the chunk until it ran */
    return rc;
}

static int init_params(mxp_module *m, const mxp_init *weight_init) {
    mxp_init def = mxp_init_uniform(0.01);
    mxp_init_rules *rules = NULL;
    int rc = mxp_init_rules_create(weight_init ? weight_init : &def, &rules);
    for (int i = 0; rc == MXP_OK && i < m->n_args; i++)
        if (m->is_param[i]) rc = init_one(rules, m->arg_names[i], ex_arg(m->train_ex, i));
    for (int i = 0; rc == MXP_OK && i < m->n_aux; i++)
        rc = init_one(rules, m->aux_names[i], mxp_module_param(m, m->aux_names[i]));
    mxp_init_rules_free(rules);
    if (rc == MXP_OK) m->initialized = 1;
    return rc;
}

static int apply_checkpoint(mxp_module *m) {
    int na, nx;
    char **an, **xn;
    mxp_ndarray **aa, **xa;
    int rc = mxp_checkpoint_load_params(m->load_prefix, m->load_epoch, &na, &an, &aa, &nx, &xn, &xa);
    if (rc) return rc;
    for (int i = 0; rc == MXP_OK && i < na + nx; i++) {
        const char *nm = i < na ? an[i] : xn[i - na];
        mxp_ndarray *src = i < na ? aa[i] : xa[i - na];
        mxp_ndarray *dst = mxp_module_param(m, nm);
        if (!dst) continue; /* MXNet's allow_extra: unused entries are skipped */
        rc = copy_param(m, i < na ? "parameter" : "aux state", nm, src, dst);
    }
    for (int i = 0; rc == MXP_OK && i < m->n_params; i++)
        if (in_list(an, na, m->param_names[i]) < 0)
            rc = mxp__error(MXP_ENOENT, "checkpoint '%s' epoch %d lacks parameter '%s'", m->load_prefix, m->load_epoch,
                            m->param_names[i]);
    mxp_ndarray_list_free(na, aa, an);
    mxp_ndarray_list_free(nx, xa, xn);
    if (rc == MXP_OK) rc = mxp_engine_wait_for_all();
    return rc;
}

/* Copy batch entries into the executor's input arrays. */
static int feed(mxp_module *m, mxp_executor *ex, mxp_iter *it, int with_label) {
    for (int k = 0; k < m->n_data + (with_label ? m->n_label : 0); k++) {
        const char *nm = k < m->n_data ? m->data_names[k] : m->label_names[k - m->n_data];
        int i = in_list(m->arg_names, m->n_args, nm);
        if (i < 0) continue;
        mxp_ndarray *src = k < m->n_data ? mxp_iter_data(it, k) : mxp_iter_label(it, k - m->n_data);
        mxp_ndarray *dst = ex_arg(ex, i);
        if (!src || !dst) return mxp__error(MXP_EINVAL, "module: no array for input '%s'", nm);
        /* Same element count is not enough (a 32x32 validation image into a
         * 28x28 binding): name the iterator and both shapes. */
        int same = mxp_ndarray_ndim(src) == mxp_ndarray_ndim(dst);
        for (int d = 0; same && d < mxp_ndarray_ndim(src); d++) same = mxp_ndarray_shape(src)[d] == mxp_ndarray_shape(dst)[d];
        if (!same) {
            mxp_shape a = {0}, b = {0};
            a.ndim = mxp_ndarray_ndim(src);
            b.ndim = mxp_ndarray_ndim(dst);
            for (int d = 0; d < a.ndim && d < MXP_MAX_NDIM; d++) a.dims[d] = mxp_ndarray_shape(src)[d];
            for (int d = 0; d < b.ndim && d < MXP_MAX_NDIM; d++) b.dims[d] = mxp_ndarray_shape(dst)[d];
            char sa[160], sb[160];
            mxp__shape_str(&a, sa, sizeof sa);
            mxp__shape_str(&b, sb, sizeof sb);
            return mxp__error(MXP_ESHAPE, "module: the %s iterator's '%s' batch has shape %s, the network was bound for %s",
                              ex == m->train_ex ? "training" : "evaluation", nm, sa, sb);
        }
        int rc = mxp_ndarray_copy(src, dst);
        if (rc) return mxp__error_prefix(rc, "module: feeding '%s'", nm);
    }
    return MXP_OK;
}

static int output0(mxp_executor *ex, mxp_ndarray **out) {
    int n;
    mxp_ndarray *const *o;
    int rc = mxp_executor_outputs(ex, &n, &o);
    if (rc == MXP_OK && n < 1) rc = mxp__error(MXP_EINVAL, "module: the symbol has no output");
    *out = rc == MXP_OK ? o[0] : NULL;
    return rc;
}

static int bind_infer(mxp_module *m, mxp_iter *it) {
    int64_t b = mxp_iter_batch_size(it);
    if (m->infer_ex && m->infer_batch == b) return MXP_OK;
    mxp_executor_free(m->infer_ex);
    m->infer_ex = NULL;
    const char *names[32];
    mxp_shape shapes[32];
    int n = 0;
    int rc = iter_shapes(m, it, 0, names, shapes, &n);
    if (rc == MXP_OK) rc = mxp_executor_simple_bind(m->sym, m->dev, n, names, shapes, MXP_REQ_NULL, 0, NULL, &m->infer_ex);
    if (rc) return mxp__error_prefix(rc, "module: binding for inference");
    m->infer_batch = b;
    return MXP_OK;
}

/* Copy the trained parameters and aux states into the inference binding. */
static void shape_text(mxp_ndarray *a, char *buf, size_t cap) {
    mxp_shape s = {0};
    s.ndim = mxp_ndarray_ndim(a);
    for (int d = 0; d < s.ndim && d < MXP_MAX_NDIM; d++) s.dims[d] = mxp_ndarray_shape(a)[d];
    mxp__shape_str(&s, buf, cap);
}

static int sync_infer(mxp_module *m) {
    int rc = MXP_OK;
    for (int i = 0; rc == MXP_OK && i < m->n_args; i++) {
        if (!m->is_param[i]) continue;
        mxp_ndarray *src = ex_arg(m->train_ex, i), *dst = ex_arg(m->infer_ex, i);
        char a[160], b[160];
        shape_text(src, a, sizeof a);
        shape_text(dst, b, sizeof b);
        if (strcmp(a, b)) {
            /* The evaluation data's shapes differ from the training data's
             * (e.g. 32x32 validation images for a net trained on 28x28). */
            char ti[160] = "?", vi[160] = "?";
            int di = m->n_data ? in_list(m->arg_names, m->n_args, m->data_names[0]) : -1;
            if (di >= 0) {
                shape_text(ex_arg(m->train_ex, di), ti, sizeof ti);
                shape_text(ex_arg(m->infer_ex, di), vi, sizeof vi);
            }
            return mxp__error(MXP_ESHAPE,
                              "module: the evaluation iterator's '%s' is %s, the training iterator's was %s: "
                              "parameter '%s' would have to be %s instead of the trained %s",
                              m->n_data ? m->data_names[0] : "?", vi, ti, m->arg_names[i], b, a);
        }
        rc = mxp_ndarray_copy(src, dst);
    }
    int n1, n2;
    mxp_ndarray *const *a1, *const *a2;
    if (rc == MXP_OK && m->n_aux && !(rc = mxp_executor_aux(m->train_ex, &n1, &a1)) &&
        !(rc = mxp_executor_aux(m->infer_ex, &n2, &a2)))
        for (int i = 0; rc == MXP_OK && i < n1 && i < n2; i++) rc = mxp_ndarray_copy(a1[i], a2[i]);
    return rc;
}

/* Copy a pending checkpoint's parameters and aux states into the inference
 * binding (score/predict after load_checkpoint, with or without a fit
 * before).  Unlike apply_checkpoint every parameter and aux state must be
 * present: nothing was initialized to fall back on. */
static int load_infer(mxp_module *m) {
    int na, nx, n_aux = 0;
    char **an, **xn;
    mxp_ndarray **aa, **xa, *const *aux = NULL;
    int rc = mxp_checkpoint_load_params(m->load_prefix, m->load_epoch, &na, &an, &aa, &nx, &xn, &xa);
    if (rc) return rc;
    if (m->n_aux) rc = mxp_executor_aux(m->infer_ex, &n_aux, &aux);
    for (int i = 0; rc == MXP_OK && i < m->n_args + m->n_aux; i++) {
        if (i < m->n_args && !m->is_param[i]) continue;
        const char *nm = i < m->n_args ? m->arg_names[i] : m->aux_names[i - m->n_args];
        int j = i < m->n_args ? in_list(an, na, nm) : in_list(xn, nx, nm);
        mxp_ndarray *dst = i < m->n_args ? ex_arg(m->infer_ex, i) : i - m->n_args < n_aux ? aux[i - m->n_args] : NULL;
        if (j < 0)
            rc = mxp__error(MXP_ENOENT, "checkpoint '%s' epoch %d lacks %s '%s'", m->load_prefix, m->load_epoch,
                            i < m->n_args ? "parameter" : "aux state", nm);
        else if (!dst)
            rc = mxp__error(MXP_EINVAL, "module: no inference array for '%s'", nm);
        else
            rc = copy_param(m, i < m->n_args ? "parameter" : "aux state", nm, i < m->n_args ? aa[j] : xa[j], dst);
    }
    mxp_ndarray_list_free(na, aa, an);
    mxp_ndarray_list_free(nx, xa, xn);
    return rc;
}

/* Run inference over iter's current epoch; per batch call fn(out0, batch).
 * Parameters come from a pending load_checkpoint if any (the module is
 * bound for inference on demand, no fit needed), else from training. */
typedef int (*batch_fn)(void *ctx, mxp_ndarray *out, mxp_iter *it);
static int infer_loop(mxp_module *m, mxp_iter *it, batch_fn fn, void *ctx) {
    if (!m->train_ex && !m->load_pending)
        return mxp__error(MXP_EMISUSE, "module: not trained or loaded yet (call mxp_module_fit or "
                                       "mxp_module_load_checkpoint first)");
    int rc = bind_infer(m, it);
    if (rc == MXP_OK) rc = m->load_pending ? load_infer(m) : sync_infer(m);
    for (long long nbatch = 0;; nbatch++) {
        int has = 0;
        if (rc == MXP_OK) rc = mxp_iter_next(it, &has);
        if (rc || !has) break;
        mxp_ndarray *out;
        if ((rc = feed(m, m->infer_ex, it, 0)) || (rc = mxp_executor_forward(m->infer_ex, 0)) ||
            (rc = output0(m->infer_ex, &out)) || (rc = fn(ctx, out, it))) {
            rc = mxp__error_prefix(rc, "batch %lld", nbatch);
            break;
        }
    }
    return drained(rc);
}

static int score_batch(void *ctx, mxp_ndarray *out, mxp_iter *it) {
    mxp_ndarray *lab = mxp_iter_label(it, 0);
    if (!lab) return mxp__error(MXP_EINVAL, "module score: the iterator provides no label");
    return mxp_metric_update(ctx, 1, &lab, &out, mxp_iter_pad(it));
}

int mxp_module_score(mxp_module *m, mxp_iter *it, const char *metric, double *out_value) {
    if (out_value) *out_value = NAN;
    if (!m || !it) return mxp__error(MXP_EINVAL, "mxp_module_score: NULL argument");
    mxp_metric *me = NULL;
    int rc = mxp_metric_create(metric ? metric : "acc", 0, NULL, NULL, &me);
    if (rc == MXP_OK) rc = infer_loop(m, it, score_batch, me);
    if (rc == MXP_OK) rc = mxp_metric_get(me, NULL, out_value);
    mxp_metric_free(me);
    return rc;
}

typedef struct pred_ctx { char *buf; size_t used, cap, row; int64_t rows; int ndim; int64_t shape[MXP_MAX_NDIM]; int dtype; } pred_ctx;

static int pred_batch(void *ctx, mxp_ndarray *out, mxp_iter *it) {
    pred_ctx *p = ctx;
    int rc = mxp_ndarray_wait_to_read(out);
    if (rc) return rc;
    int64_t b = mxp_ndarray_shape(out)[0], keep = b - mxp_iter_pad(it);
    p->row = mxp_ndarray_nbytes(out) / (size_t)b;
    p->ndim = mxp_ndarray_ndim(out);
    memcpy(p->shape, mxp_ndarray_shape(out), (size_t)p->ndim * sizeof(int64_t));
    p->dtype = mxp_ndarray_dtype(out);
    size_t need = p->used + (size_t)keep * p->row;
    if (need > p->cap) {
        size_t cap = need * 2;
        char *nb = realloc(p->buf, cap);
        if (!nb) return mxp__error_oom("predict");
        p->buf = nb;
        p->cap = cap;
    }
    if (mxp_ndarray_data(out)) {
        memcpy(p->buf + p->used, mxp_ndarray_data(out), (size_t)keep * p->row);
    } else { /* device output: the whole batch to the host, the kept rows appended */
        char *all = malloc(mxp_ndarray_nbytes(out) ? mxp_ndarray_nbytes(out) : 1);
        if (!all) return mxp__error_oom("predict");
        rc = mxp_ndarray_sync_copy_to(out, all, mxp_ndarray_nbytes(out));
        if (rc == MXP_OK) memcpy(p->buf + p->used, all, (size_t)keep * p->row);
        free(all);
        if (rc) return rc;
    }
    p->used = need;
    p->rows += keep;
    return MXP_OK;
}

int mxp_module_predict(mxp_module *m, mxp_iter *it, mxp_ndarray **out) {
    if (!out) return mxp__error(MXP_EINVAL, "mxp_module_predict: out is NULL");
    *out = NULL;
    if (!m || !it) return mxp__error(MXP_EINVAL, "mxp_module_predict: NULL argument");
    pred_ctx p = {0};
    int rc = infer_loop(m, it, pred_batch, &p);
    if (rc == MXP_OK && p.rows == 0) rc = mxp__error(MXP_EINVAL, "module predict: the iterator yielded no batch");
    if (rc == MXP_OK) {
        p.shape[0] = p.rows;
        rc = mxp_ndarray_create(p.shape, p.ndim, p.dtype, cpu0, out);
        if (rc == MXP_OK) rc = mxp_ndarray_sync_copy_from(*out, p.buf, p.used);
    }
    free(p.buf);
    return rc;
}

/* A checkpoint is a set: -symbol.json, -NNNN.states, -NNNN.params, each
 * written atomically, in that order, so a .params (what --load-epoch looks
 * for) never exists without its .states, whatever moment a crash hits. */
int mxp_module_save_checkpoint(mxp_module *m, const char *prefix, int epoch, int save_states) {
    if (!m || !prefix) return mxp__error(MXP_EINVAL, "mxp_module_save_checkpoint: NULL argument");
    if (!m->train_ex) return mxp__error(MXP_EMISUSE, "module: nothing to save before fit");
    if (save_states && !m->opt) return mxp__error(MXP_EMISUSE, "module: no optimizer state to save");
    char path[4096];
    int rc = mxp_checkpoint_path(prefix, epoch, "symbol", path, sizeof path);
    if (rc == MXP_OK) rc = mxp_symbol_save_file(m->sym, path);
    if (rc == MXP_OK && save_states) {
        rc = mxp_checkpoint_path(prefix, epoch, "states", path, sizeof path);
        if (rc == MXP_OK) rc = mxp_optimizer_save_states(m->opt, path);
    }
    mxp_ndarray **args = calloc((size_t)m->n_params + 1, sizeof *args);
    mxp_ndarray **auxs = calloc((size_t)m->n_aux + 1, sizeof *auxs);
    if (!args || !auxs) rc = mxp__error_oom("checkpoint");
    for (int i = 0; rc == MXP_OK && i < m->n_params; i++) args[i] = mxp_module_param(m, m->param_names[i]);
    for (int i = 0; rc == MXP_OK && i < m->n_aux; i++) auxs[i] = mxp_module_param(m, m->aux_names[i]);
    if (rc == MXP_OK)
        rc = mxp_checkpoint_save_params(prefix, epoch, m->n_params, (const char *const *)m->param_names, args, m->n_aux,
                                        (const char *const *)m->aux_names, auxs);
    free(args);
    free(auxs);
    return rc;
}

int mxp_module_load_checkpoint(mxp_module *m, const char *prefix, int epoch, int load_states) {
    if (!m || !prefix) return mxp__error(MXP_EINVAL, "mxp_module_load_checkpoint: NULL argument");
    char path[4096];
    int rc = mxp_checkpoint_path(prefix, epoch, "params", path, sizeof path);
    if (rc) return rc;
    if (access(path, R_OK)) return mxp__error(MXP_EIO, "checkpoint '%s': cannot read", path);
    if (load_states) {
        rc = mxp_checkpoint_path(prefix, epoch, "states", path, sizeof path);
        if (rc) return rc;
        if (access(path, R_OK)) return mxp__error(MXP_EIO, "checkpoint states '%s': cannot read", path);
    }
    char *p = strdup(prefix);
    if (!p) return mxp__error_oom("module");
    free(m->load_prefix);
    m->load_prefix = p;
    m->load_epoch = epoch;
    m->load_states = load_states;
    m->load_pending = 1;
    return MXP_OK;
}

/* ------------------------------------------------------------ kvstore */

static const char *const metric_key = "__mxp_metric__";

/* First fit with this store: one key per parameter, holding rank 0's
 * values, pulled into every worker's parameters; and the metric key.  With
 * a server-side store (dist_async) the optimizer goes to the servers
 * instead (opt_type / n_kw / keys / vals, the kwargs fit built) and there
 * is no metric key: a push there is an update, not a sum. */
static int kv_setup(mxp_module *m, mxp_kvstore *kv, const char *opt_type, int n_kw, const char *const *keys,
                    const char *const *vals) {
    if (m->kv == kv) return MXP_OK;
    if (!on_host(m->dev))
        return mxp__error(MXP_EUNSUPPORTED, "mxp_module_fit: kvstore '%s' with the module on %s(%d): KVStore sums run "
                          "on the CPU, GPU arrays (NCCL) are not supported yet; train without a kvstore on one GPU",
                          mxp_kvstore_type(kv), mxp__device_name(m->dev.type), (int)m->dev.id);
    if (m->kv) return mxp__error(MXP_EINVAL, "mxp_module_fit: this module was trained with another kvstore");
    const char **names = calloc((size_t)m->n_args + 1, sizeof *names);
    mxp_ndarray **w = calloc((size_t)m->n_args + 1, sizeof *w);
    int n = 0, rc = names && w ? MXP_OK : mxp__error_oom("module kvstore");
    for (int i = 0; rc == MXP_OK && i < m->n_args; i++) {
        if (m->opt_index[i] < 0) continue;
        names[n] = m->arg_names[i];
        w[n++] = ex_arg(m->train_ex, i);
    }
    if (rc == MXP_OK) rc = mxp_kvstore_init_str(kv, n, names, w);
    if (rc == MXP_OK) rc = mxp_kvstore_pull_str(kv, n, names, w, 0);
    int64_t two = 2;
    if (mxp_kvstore_updates_on_servers(kv)) {
        if (rc == MXP_OK) rc = mxp_kvstore_set_optimizer(kv, opt_type, n_kw, keys, vals);
    } else {
        if (rc == MXP_OK) rc = mxp_ndarray_create(&two, 1, MXP_DTYPE_F64, cpu0, &m->kv_metric);
        if (rc == MXP_OK) rc = mxp_ndarray_fill(m->kv_metric, 0.0);
        if (rc == MXP_OK) rc = mxp_kvstore_init_str(kv, 1, &metric_key, &m->kv_metric);
    }
    free(names);
    free(w);
    if (rc) return mxp__error_prefix(rc, "mxp_module_fit: kvstore '%s'", mxp_kvstore_type(kv));
    m->kv = kv;
    return MXP_OK;
}

/* Sum a metric's totals over all workers. */
static int kv_reduce_metric(mxp_module *m, mxp_metric *metric) {
    if (!m->kv_metric) return MXP_OK; /* dist_async: each worker reports its own */
    double v[2];
    int64_t num;
    mxp__metric_totals(metric, &v[0], &num);
    v[1] = (double)num;
    int rc = mxp_ndarray_sync_copy_from(m->kv_metric, v, sizeof v);
    if (rc == MXP_OK) rc = mxp_kvstore_pushpull_str(m->kv, 1, &metric_key, &m->kv_metric, &m->kv_metric, 0);
    if (rc == MXP_OK) rc = mxp_ndarray_sync_copy_to(m->kv_metric, v, sizeof v);
    if (rc == MXP_OK) mxp__metric_set_totals(metric, v[0], (int64_t)llround(v[1]));
    return rc;
}

static int train_step(mxp_module *m, mxp_iter *it, mxp_metric *metric) {
    int rc = feed(m, m->train_ex, it, 1);
    if (rc == MXP_OK) rc = mxp_executor_forward(m->train_ex, 1);
    if (rc == MXP_OK) rc = mxp_executor_backward(m->train_ex, 0, NULL);
    int n_g;
    mxp_ndarray *const *grads;
    if (rc == MXP_OK) rc = mxp_executor_grads(m->train_ex, &n_g, &grads);
    /* dist_async: the servers update; push the gradients, pull the weights
     * (the next forward waits for them through their vars). */
    int on_servers = m->kv && !m->kv_metric;
    for (int i = 0; rc == MXP_OK && on_servers && i < m->n_args; i++) {
        if (m->opt_index[i] < 0 || i >= n_g || !grads[i]) continue;
        const char *name = m->arg_names[i];
        mxp_ndarray *wt = ex_arg(m->train_ex, i);
        rc = mxp_kvstore_push_str(m->kv, 1, &name, &grads[i], -m->opt_index[i]);
        if (rc == MXP_OK) rc = mxp_kvstore_pull_str(m->kv, 1, &name, &wt, -m->opt_index[i]);
    }
    /* Sum each gradient over the store's pushes and workers, in place;
     * the engine orders the update below after it.  The store's own copy
     * of the key is not updated (kvstore_fit.h): fit never pulls it. */
    for (int i = 0; rc == MXP_OK && m->kv && !on_servers && i < m->n_args; i++) {
        if (m->opt_index[i] < 0 || i >= n_g || !grads[i]) continue;
        rc = mxp__kvstore_sum_in_place_str(m->kv, m->arg_names[i], grads[i], -m->opt_index[i]);
    }
    for (int i = 0; rc == MXP_OK && !on_servers && i < m->n_args; i++) {
        if (m->opt_index[i] < 0 || i >= n_g || !grads[i]) continue;
        rc = mxp_optimizer_update(m->opt, m->opt_index[i], m->arg_names[i], ex_arg(m->train_ex, i), grads[i]);
    }
    if (rc == MXP_OK && metric) {
        mxp_ndarray *out, *lab = mxp_iter_label(it, 0);
        rc = output0(m->train_ex, &out);
        if (rc == MXP_OK && lab) rc = mxp_metric_update(metric, 1, &lab, &out, mxp_iter_pad(it));
    }
    return rc;
}

/* Optimizer(sym=...): variables' __lr_mult__ / __wd_mult__ attributes
 * become the optimizer's per-name multipliers. */
static int apply_var_mults(mxp_module *m, int on_servers) {
    mxp_symbol *internals = NULL;
    int rc = mxp_symbol_internals(m->sym, &internals);
    for (int i = 0; rc == MXP_OK && i < m->n_params; i++) {
        mxp_symbol *v = NULL;
        if (mxp_symbol_output_by_name(internals, m->param_names[i], &v) != MXP_OK) {
            mxp__error_clear();
            continue;
        }
        static const char *const keys[2] = {"__lr_mult__", "__wd_mult__"};
        for (int k = 0; k < 2 && rc == MXP_OK; k++) {
            const char *txt = NULL;
            if (mxp_symbol_attr(v, keys[k], &txt) != MXP_OK || !txt) continue;
            if (on_servers) {
                rc = mxp__error(MXP_EUNSUPPORTED, "module: variable '%s' has %s, which the dist_async servers' "
                                "optimizer does not apply (train it with dist_sync or local)", m->param_names[i],
                                keys[k]);
                break;
            }
            char *end;
            double x = strtod(txt, &end);
            if (end == txt || *end)
                rc = mxp__error(MXP_EINVAL, "module: variable '%s': %s '%s' is not a number", m->param_names[i],
                                keys[k], txt);
            else
                rc = k ? mxp_optimizer_set_wd_mult(m->opt, m->param_names[i], x)
                       : mxp_optimizer_set_lr_mult(m->opt, m->param_names[i], x);
        }
        mxp_symbol_release(v);
    }
    mxp_symbol_release(internals);
    return rc;
}

static int fit_epochs(mxp_module *m, mxp_iter *train, mxp_iter *val, const mxp_fit_opts *o);

/* Index of the first NaN/inf among the float values of `a`, or -1 (also for
 * integer dtypes).  Waits for `a`. */
static int64_t first_non_finite(mxp_ndarray *a) {
    if (mxp_ndarray_wait_to_read(a)) return -1;
    const void *p = mxp_ndarray_data(a);
    int64_t n = mxp_ndarray_size(a);
    int dt = mxp_ndarray_dtype(a);
    if (dt != MXP_DTYPE_F32 && dt != MXP_DTYPE_F64) return -1;
    void *copy = NULL;
    if (!p && n) { /* a device array: look at a host copy */
        copy = malloc(mxp_ndarray_nbytes(a));
        if (!copy || mxp_ndarray_sync_copy_to(a, copy, mxp_ndarray_nbytes(a))) {
            free(copy);
            return -1; /* the copy's error stays for the next wait */
        }
        p = copy;
    }
    int64_t bad = -1;
    for (int64_t i = 0; i < n && bad < 0; i++) {
        double v = dt == MXP_DTYPE_F32 ? ((const float *)p)[i] : ((const double *)p)[i];
        if (!isfinite(v)) bad = i;
    }
    free(copy);
    return bad;
}

/* A diverged run stops here instead of saving NaN weights with exit 0:
 * output 0 of the batch just trained (already read by the metric) and, at
 * the end of an epoch (nbatch < 0), every parameter. */
static int check_finite(mxp_module *m, int epoch, int64_t nbatch) {
    if (nbatch >= 0) {
        mxp_ndarray *out;
        int rc = output0(m->train_ex, &out);
        int64_t i = rc ? -1 : first_non_finite(out);
        if (i >= 0)
            return mxp__error(MXP_EINVAL,
                              "epoch %d batch %lld: the network's output holds a non-finite value (element %lld): "
                              "training diverged (lower the learning rate, or set allow_nan / --allow-nan to go on)",
                              epoch, (long long)nbatch, (long long)i);
        return MXP_OK;
    }
    for (int i = 0; i < m->n_params; i++) {
        int64_t k = first_non_finite(mxp_module_param(m, m->param_names[i]));
        if (k >= 0)
            return mxp__error(MXP_EINVAL,
                              "epoch %d (end): parameter '%s' holds a non-finite value (element %lld): training "
                              "diverged (lower the learning rate, or set allow_nan / --allow-nan to go on)",
                              epoch, m->param_names[i], (long long)k);
    }
    return MXP_OK;
}

/* Every error return leaves nothing queued behind it: initializers, copies
 * and updates pushed before the failure are waited for (their own errors
 * stay for a later wait), so a caller may free the module, the iterators or
 * the registry right away. */
int mxp_module_fit(mxp_module *m, mxp_iter *train, mxp_iter *val, const mxp_fit_opts *o) {
    mxp_fit_opts copy; /* at this library's size: fields the caller lacks are 0 */
    if (o) mxp__app_struct_in(&copy, sizeof copy, o, MXP__SIZE_THROUGH(mxp_fit_opts, allow_nan));
    return drained(fit_epochs(m, train, val, o ? &copy : NULL));
}

static int fit_epochs(mxp_module *m, mxp_iter *train, mxp_iter *val, const mxp_fit_opts *o) {
    if (!m || !train || !o) return mxp__error(MXP_EINVAL, "mxp_module_fit: NULL argument");
    if (o->begin_epoch < 0 || o->num_epoch < o->begin_epoch)
        return mxp__error(MXP_EINVAL, "mxp_module_fit: epochs [%d, %d) are not a range", o->begin_epoch, o->num_epoch);
    int rc;
    if (o->checkpoint_prefix && (rc = mxp_checkpoint_prepare(o->checkpoint_prefix))) return rc;
    rc = bind_train(m, train);
    if (rc) return rc;
    if (!m->initialized) {
        mxp_random_seed(o->seed);
        if ((rc = init_params(m, o->initializer))) return rc;
    }
    if (m->load_pending && (rc = apply_checkpoint(m))) return rc;
    int on_servers = o->kvstore && mxp_kvstore_updates_on_servers(o->kvstore);
    const char *keys[32], *vals[32];
    int n = 0;
    char rescale[32];
    if (!m->opt) {
        int has_rescale = 0;
        for (int i = 0; i < o->n_opt_kwargs && n < 31; i++) {
            keys[n] = o->opt_keys[i];
            vals[n++] = o->opt_vals[i];
            has_rescale |= !strcmp(o->opt_keys[i], "rescale_grad");
        }
        if (!has_rescale) { /* Module.init_optimizer: 1 / batch_size, times the
                             * workers for a synchronous dist store */
            double global = (double)m->batch;
            const char *kt = o->kvstore ? mxp_kvstore_type(o->kvstore) : "";
            if (!strncmp(kt, "dist", 4) && !strstr(kt, "_async")) global *= mxp_kvstore_num_workers(o->kvstore);
            keys[n] = "rescale_grad";
            vals[n++] = mxp__train_fmt(rescale, 1.0 / global);
        }
        if ((rc = mxp_optimizer_create(o->optimizer ? o->optimizer : "sgd", n, keys, vals, &m->opt))) return rc;
        if ((rc = apply_var_mults(m, on_servers))) return rc;
        if (o->n_lr_steps > 0 && on_servers)
            return mxp__error(MXP_EUNSUPPORTED, "mxp_module_fit: an lr schedule with kvstore '%s': the servers' "
                              "optimizer keeps a fixed lr", mxp_kvstore_type(o->kvstore));
        if (o->n_lr_steps > 0) {
            mxp_lr_schedule *sched = NULL;
            if ((rc = mxp_lr_schedule_multi_factor(o->n_lr_steps, o->lr_steps, o->lr_factor, &sched))) return rc;
            mxp_optimizer_set_lr_schedule(m->opt, sched);
        }
    }
    if (m->load_pending && m->load_states && on_servers)
        return mxp__error(MXP_EUNSUPPORTED, "mxp_module_fit: resuming optimizer states with kvstore '%s': the states "
                          "live on the servers (load the parameters only)", mxp_kvstore_type(o->kvstore));
    if (m->load_pending && m->load_states) {
        char path[4096];
        if ((rc = mxp_checkpoint_path(m->load_prefix, m->load_epoch, "states", path, sizeof path)) ||
            (rc = mxp_optimizer_load_states(m->opt, path)))
            return rc;
    }
    m->load_pending = 0;
    if (on_servers && !n && m->kv != o->kvstore)
        return mxp__error(MXP_EINVAL, "mxp_module_fit: kvstore '%s' needs the optimizer set in this fit (the "
                          "module already had one)", mxp_kvstore_type(o->kvstore));
    if (o->kvstore && (rc = kv_setup(m, o->kvstore, o->optimizer ? o->optimizer : "sgd", n, keys, vals))) return rc;
    mxp_kvstore *kv_used = o->kvstore;
    int rank0 = !kv_used || mxp_kvstore_rank(kv_used) == 0;
    mxp_metric *metric = NULL;
    if ((rc = mxp_metric_create(o->eval_metric ? o->eval_metric : "acc", 0, NULL, NULL, &metric))) return rc;
    /* The loop waits for every step's output (metric, finiteness check),
     * so the step's ops run on this thread when they are ready at their push
     * (engine.h: mxp__engine_pusher_runs_ready) instead of being handed to
     * a worker and back; big ops still spread over the thread budget through
     * parallel_for.  Not with a kvstore (its communication runs beside the
     * step).  MXP_FIT_ON_CALLER=0 hands every op to the workers. */
    int on_caller = !kv_used && mxp__env_bool("MXP_FIT_ON_CALLER", 1);
    for (int epoch = o->begin_epoch; rc == MXP_OK && epoch < o->num_epoch; epoch++) {
        mxp_metric_reset(metric);
        rc = mxp_iter_set_epoch(train, (uint64_t)epoch);
        int64_t nbatch = 0;
        for (;;) {
            int has = 0;
            /* The iterator's refill runs here too: an iterator producing on
             * this thread waits for the previous batch's readers through a
             * no-op write and a wait (mxp_ndarray_wait_to_write), two engine
             * ops per array that otherwise each woke a worker and waited for
             * it, every step. */
            int was = on_caller ? mxp__engine_pusher_runs_ready(1) : 0;
            if (rc == MXP_OK) rc = mxp_iter_next(train, &has);
            if (rc || !has) {
                if (on_caller) mxp__engine_pusher_runs_ready(was);
                break;
            }
            /* Work still pending from the previous step (an op that was not
             * ready at its push went to a worker, and so did everything
             * after it) is finished first, so this step's ops find their
             * inputs done again; nothing is pending in the usual case. */
            if (on_caller) rc = mxp__engine_drain();
            if (rc == MXP_OK) rc = train_step(m, train, metric);
            nbatch++;
            if (rc) rc = mxp__error_prefix(rc, "epoch %d batch %lld (training data)", epoch, (long long)nbatch);
            if (rc == MXP_OK && !o->allow_nan) rc = check_finite(m, epoch, nbatch);
            if (on_caller) mxp__engine_pusher_runs_ready(was);
            if (rc == MXP_OK && o->batch_cb) {
                const char *nm;
                double v;
                mxp_metric_get(metric, &nm, &v);
                o->batch_cb(o->user, epoch, nbatch, nm, v);
            }
        }
        if (rc == MXP_OK) rc = mxp_engine_wait_for_all();
        if (rc == MXP_OK && nbatch == 0)
            rc = mxp__error(MXP_EINVAL,
                            "epoch %d: the training iterator gave no batch (batch size %lld: more than the data "
                            "holds, or no data); nothing was trained and nothing is saved",
                            epoch, (long long)mxp_iter_batch_size(train));
        if (rc == MXP_OK && kv_used) rc = kv_reduce_metric(m, metric);
        if (rc == MXP_OK && !o->allow_nan) rc = check_finite(m, epoch, -1);
        const char *nm = NULL;
        double tv = NAN, vv = NAN;
        mxp_metric_get(metric, &nm, &tv);
        if (rc == MXP_OK && val) {
            mxp_metric *vm = NULL;
            rc = mxp_iter_set_epoch(val, 0);
            if (rc == MXP_OK) rc = mxp_metric_create(o->eval_metric ? o->eval_metric : "acc", 0, NULL, NULL, &vm);
            if (rc == MXP_OK) rc = infer_loop(m, val, score_batch, vm);
            if (rc == MXP_OK && kv_used) rc = kv_reduce_metric(m, vm);
            if (rc == MXP_OK) rc = mxp_metric_get(vm, NULL, &vv);
            if (rc) rc = mxp__error_prefix(rc, "epoch %d (validation data)", epoch);
            mxp_metric_free(vm);
        }
        if (rc == MXP_OK && o->checkpoint_prefix && rank0)
            rc = mxp_module_save_checkpoint(m, o->checkpoint_prefix, epoch + 1, 1);
        if (rc == MXP_OK && o->epoch_cb) o->epoch_cb(o->user, epoch, nm, tv, vv);
    }
    mxp_metric_free(metric);
    return rc;
}
