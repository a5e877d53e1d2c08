#include "conv.h"
const mxp_op_impl conv_direct_impl = { .hdr = MXP_HEADER(mxp_op_impl), .op_name = "Convolution", .impl_name = "direct", .device = "cpu" };
const mxp_op_impl conv_winograd_impl = { .hdr = MXP_HEADER(mxp_op_impl), .op_name = "Convolution", .impl_name = "winograd", .device = "cpu" };
