/* pack.c — the ops-nn pack descriptor and init: keeps the host table and
 * registers every op family.  mxp_plugin_v1 is the only exported symbol
 * (everything else has hidden visibility). */
#include "nn_common.h"
#include "bf16/bf16.h"

const mxp_host *nn_host;

static int nn_init(const mxp_plugin_init_args *a) {
    nn_host = a->host;
    nn_blas_init(); /* BLAS single-threaded: the runtime owns the cores */
    mxp_registrar *r = a->registrar;
    int st;
    if ((st = nn_register_fc(r)) < 0) return st;
    if ((st = nn_register_conv(r)) < 0) return st;
    if ((st = nn_register_pooling(r)) < 0) return st;
    if ((st = nn_register_activation(r)) < 0) return st;
    if ((st = nn_register_softmax_output(r)) < 0) return st;
    if ((st = nn_register_softmax(r)) < 0) return st;
    if ((st = nn_register_batchnorm(r)) < 0) return st;
    if ((st = nn_register_dropout(r)) < 0) return st;
    if ((st = nn_register_leaky_relu(r)) < 0) return st;
    if ((st = nn_register_embedding(r)) < 0) return st;
    if ((st = nn_register_upsampling(r)) < 0) return st;
    if ((st = nn_register_lrn(r)) < 0) return st;
    if ((st = nn_register_softmax_ce(r)) < 0) return st;
    if ((st = nn_register_deconv(r)) < 0) return st;
    if ((st = nn_register_ext(r)) < 0) return st;
    if ((st = nn_register_norm_ext(r)) < 0) return st;
    if ((st = nn_register_detect(r)) < 0) return st;
    if ((st = nn_register_multibox(r)) < 0) return st;
    if ((st = nn_register_ctc(r)) < 0) return st;
    if ((st = nn_register_spatial(r)) < 0) return st;
    if ((st = nn_register_rnn(r)) < 0) return st;
    if ((st = nn_register_bf16(r)) < 0) return st;
    if ((st = r->add_impl(r, &nn_bf16_direct_conv_impl)) < 0) return st;
    if ((st = r->add_impl(r, &nn_bf16_wino_row_conv_impl)) < 0) return st;
    return MXP_OK;
}

static const mxp_plugin_desc desc = {
    MXP_HEADER(mxp_plugin_desc), 0, 0, 0,
    "ops-nn", "0.1.0",
    "Neural-network operators (FullyConnected, Convolution, Pooling, Activation, BatchNorm, ...)",
    "Apache-2.0", nn_init, NULL
};

MXP_PLUGIN_DEFINE(desc)
