/* test_layout.c — the frozen layout of every ABI v1.x boundary struct (1.0,
 * and what 1.1 appended: mxp_op_params, op_params in the impl args,
 * mxp_host.param_get; 1.2: mxp_stat_def, mxp_registrar.add_stat).
 *
 * The table below was written from the field lists by reasoning about LP64
 * (8-byte pointers, int64/double/uint64 aligned to 8, int32/uint32 to 4,
 * uint16 to 2, mxp_header 8 bytes, mxp_device two int32), independently of
 * the _Static_asserts in the plugin-api headers; this test confirms
 * the compiler agrees.  It also checks that every struct is fully covered
 * by the listed fields with no implicit padding (sum of field sizes equals
 * sizeof), so a field added without updating the table, or a hole that
 * some compiler could fill differently, fails here.  A failure means the
 * ABI changed: that needs a new minor (appended fields) or major, never an
 * edit of this table.  Also pins the enum numbers packs compile in. */
#include <criterion/criterion.h>

#include <mxp/plugin.h>

#include <stddef.h>
#include <string.h>

typedef struct layout_row {
    const char *type;
    const char *field;   /* NULL: a size row */
    size_t expected;     /* offset or size, from the hand-written table */
    size_t actual;       /* what the compiler says */
    size_t field_size;
} layout_row;

#define S(T, SIZE) {#T, NULL, SIZE, sizeof(T), 0}
#define F(T, FIELD, OFF) {#T, #FIELD, OFF, offsetof(T, FIELD), sizeof(((T *)0)->FIELD)}

static const layout_row rows[] = {
    S(mxp_header, 8),
    F(mxp_header, struct_size, 0),
    F(mxp_header, abi_major, 4),
    F(mxp_header, abi_minor, 6),
    S(mxp_device, 8),
    F(mxp_device, type, 0),
    F(mxp_device, id, 4),
    S(mxp_shape, 72),
    F(mxp_shape, ndim, 0),
    F(mxp_shape, reserved, 4),
    F(mxp_shape, dims, 8),
    S(mxp_tensor, 64),
    F(mxp_tensor, hdr, 0),
    F(mxp_tensor, data, 8),
    F(mxp_tensor, byte_offset, 16),
    F(mxp_tensor, dtype, 24),
    F(mxp_tensor, ndim, 28),
    F(mxp_tensor, shape, 32),
    F(mxp_tensor, strides, 40),
    F(mxp_tensor, device, 48),
    F(mxp_tensor, version, 56),
    S(mxp_param_shape, 136),
    F(mxp_param_shape, ndim, 0),
    F(mxp_param_shape, has_value, 4),
    F(mxp_param_shape, dims, 8),
    S(mxp_param_opt_int, 16),
    F(mxp_param_opt_int, has_value, 0),
    F(mxp_param_opt_int, reserved, 4),
    F(mxp_param_opt_int, value, 8),
    S(mxp_param_opt_float, 16),
    F(mxp_param_opt_float, has_value, 0),
    F(mxp_param_opt_float, reserved, 4),
    F(mxp_param_opt_float, value, 8),
    S(mxp_param_def, 72),
    F(mxp_param_def, hdr, 0),
    F(mxp_param_def, name, 8),
    F(mxp_param_def, type, 16),
    F(mxp_param_def, flags, 20),
    F(mxp_param_def, offset, 24),
    F(mxp_param_def, reserved, 28),
    F(mxp_param_def, default_value, 32),
    F(mxp_param_def, min, 40),
    F(mxp_param_def, max, 48),
    F(mxp_param_def, choices, 56),
    F(mxp_param_def, doc, 64),
    S(mxp_op_params, 40),                 /* since 1.1 */
    F(mxp_op_params, hdr, 0),
    F(mxp_op_params, op_name, 8),
    F(mxp_op_params, defs, 16),
    F(mxp_op_params, n_defs, 24),
    F(mxp_op_params, reserved, 28),
    F(mxp_op_params, values, 32),
    S(mxp_op_ctx, 96),
    F(mxp_op_ctx, hdr, 0),
    F(mxp_op_ctx, device, 8),
    F(mxp_op_ctx, stream, 16),
    F(mxp_op_ctx, is_train, 24),
    F(mxp_op_ctx, reserved, 28),
    F(mxp_op_ctx, workspace, 32),
    F(mxp_op_ctx, workspace_bytes, 40),
    F(mxp_op_ctx, rng, 48),
    F(mxp_op_ctx, parallel_for, 56),
    F(mxp_op_ctx, complete, 64),
    F(mxp_op_ctx, complete_token, 72),
    F(mxp_op_ctx, host, 80),
    F(mxp_op_ctx, host_private, 88),
    S(mxp_list_names_args, 40),
    F(mxp_list_names_args, hdr, 0),
    F(mxp_list_names_args, params, 8),
    F(mxp_list_names_args, user_data, 16),
    F(mxp_list_names_args, names, 24),
    F(mxp_list_names_args, capacity, 32),
    F(mxp_list_names_args, count, 36),
    S(mxp_infer_shape_args, 64),
    F(mxp_infer_shape_args, hdr, 0),
    F(mxp_infer_shape_args, params, 8),
    F(mxp_infer_shape_args, user_data, 16),
    F(mxp_infer_shape_args, n_in, 24),
    F(mxp_infer_shape_args, n_out, 28),
    F(mxp_infer_shape_args, n_aux, 32),
    F(mxp_infer_shape_args, reserved, 36),
    F(mxp_infer_shape_args, in, 40),
    F(mxp_infer_shape_args, out, 48),
    F(mxp_infer_shape_args, aux, 56),
    S(mxp_infer_type_args, 64),
    F(mxp_infer_type_args, hdr, 0),
    F(mxp_infer_type_args, params, 8),
    F(mxp_infer_type_args, user_data, 16),
    F(mxp_infer_type_args, n_in, 24),
    F(mxp_infer_type_args, n_out, 28),
    F(mxp_infer_type_args, n_aux, 32),
    F(mxp_infer_type_args, reserved, 36),
    F(mxp_infer_type_args, in, 40),
    F(mxp_infer_type_args, out, 48),
    F(mxp_infer_type_args, aux, 56),
    S(mxp_backward_deps_args, 56),
    F(mxp_backward_deps_args, hdr, 0),
    F(mxp_backward_deps_args, params, 8),
    F(mxp_backward_deps_args, user_data, 16),
    F(mxp_backward_deps_args, n_in, 24),
    F(mxp_backward_deps_args, n_out, 28),
    F(mxp_backward_deps_args, need_out_grad, 32),
    F(mxp_backward_deps_args, need_in, 40),
    F(mxp_backward_deps_args, need_out, 48),
    S(mxp_check_params_args, 24),
    F(mxp_check_params_args, hdr, 0),
    F(mxp_check_params_args, params, 8),
    F(mxp_check_params_args, user_data, 16),
    S(mxp_inplace_pair, 8),
    F(mxp_inplace_pair, from, 0),
    F(mxp_inplace_pair, to, 4),
    S(mxp_op_def, 192),
    F(mxp_op_def, hdr, 0),
    F(mxp_op_def, name, 8),
    F(mxp_op_def, aliases, 16),
    F(mxp_op_def, doc, 24),
    F(mxp_op_def, params, 32),
    F(mxp_op_def, n_params, 40),
    F(mxp_op_def, params_size, 44),
    F(mxp_op_def, arg_names, 48),
    F(mxp_op_def, output_names, 56),
    F(mxp_op_def, aux_names, 64),
    F(mxp_op_def, list_args, 72),
    F(mxp_op_def, list_outputs, 80),
    F(mxp_op_def, list_aux, 88),
    F(mxp_op_def, infer_shape, 96),
    F(mxp_op_def, infer_type, 104),
    F(mxp_op_def, flags, 112),
    F(mxp_op_def, backward_deps, 116),
    F(mxp_op_def, declare_backward, 120),
    F(mxp_op_def, forward_inplace, 128),
    F(mxp_op_def, n_forward_inplace, 136),
    F(mxp_op_def, n_backward_inplace, 140),
    F(mxp_op_def, backward_inplace, 144),
    F(mxp_op_def, mutate_inputs, 152),
    F(mxp_op_def, n_mutate_inputs, 160),
    F(mxp_op_def, resources, 164),
    F(mxp_op_def, n_visible_outputs, 168),
    F(mxp_op_def, reserved, 172),
    F(mxp_op_def, check_params, 176),
    F(mxp_op_def, user_data, 184),
    S(mxp_impl_query_args, 136),
    F(mxp_impl_query_args, hdr, 0),
    F(mxp_impl_query_args, params, 8),
    F(mxp_impl_query_args, user_data, 16),
    F(mxp_impl_query_args, device, 24),
    F(mxp_impl_query_args, n_in, 32),
    F(mxp_impl_query_args, n_out, 36),
    F(mxp_impl_query_args, n_aux, 40),
    F(mxp_impl_query_args, is_train, 44),
    F(mxp_impl_query_args, in_shapes, 48),
    F(mxp_impl_query_args, out_shapes, 56),
    F(mxp_impl_query_args, aux_shapes, 64),
    F(mxp_impl_query_args, in_dtypes, 72),
    F(mxp_impl_query_args, out_dtypes, 80),
    F(mxp_impl_query_args, aux_dtypes, 88),
    F(mxp_impl_query_args, reason, 96),
    F(mxp_impl_query_args, reason_size, 104),
    F(mxp_impl_query_args, reserved, 108),
    F(mxp_impl_query_args, workspace_bytes, 112),
    F(mxp_impl_query_args, state, 120),
    F(mxp_impl_query_args, op_params, 128), /* since 1.1 */
    S(mxp_forward_args, 96),
    F(mxp_forward_args, hdr, 0),
    F(mxp_forward_args, ctx, 8),
    F(mxp_forward_args, params, 16),
    F(mxp_forward_args, state, 24),
    F(mxp_forward_args, user_data, 32),
    F(mxp_forward_args, n_in, 40),
    F(mxp_forward_args, n_out, 44),
    F(mxp_forward_args, n_aux, 48),
    F(mxp_forward_args, reserved, 52),
    F(mxp_forward_args, in, 56),
    F(mxp_forward_args, out, 64),
    F(mxp_forward_args, aux, 72),
    F(mxp_forward_args, req, 80),
    F(mxp_forward_args, op_params, 88),   /* since 1.1 */
    S(mxp_backward_args, 112),
    F(mxp_backward_args, hdr, 0),
    F(mxp_backward_args, ctx, 8),
    F(mxp_backward_args, params, 16),
    F(mxp_backward_args, state, 24),
    F(mxp_backward_args, user_data, 32),
    F(mxp_backward_args, n_in, 40),
    F(mxp_backward_args, n_out, 44),
    F(mxp_backward_args, n_aux, 48),
    F(mxp_backward_args, reserved, 52),
    F(mxp_backward_args, out_grad, 56),
    F(mxp_backward_args, in, 64),
    F(mxp_backward_args, out, 72),
    F(mxp_backward_args, in_grad, 80),
    F(mxp_backward_args, aux, 88),
    F(mxp_backward_args, req, 96),
    F(mxp_backward_args, op_params, 104), /* since 1.1 */
    S(mxp_destroy_args, 24),
    F(mxp_destroy_args, hdr, 0),
    F(mxp_destroy_args, state, 8),
    F(mxp_destroy_args, user_data, 16),
    S(mxp_op_impl, 104),
    F(mxp_op_impl, hdr, 0),
    F(mxp_op_impl, op_name, 8),
    F(mxp_op_impl, impl_name, 16),
    F(mxp_op_impl, device, 24),
    F(mxp_op_impl, rank, 32),
    F(mxp_op_impl, flags, 36),
    F(mxp_op_impl, doc, 40),
    F(mxp_op_impl, supports, 48),
    F(mxp_op_impl, workspace, 56),
    F(mxp_op_impl, create, 64),
    F(mxp_op_impl, forward, 72),
    F(mxp_op_impl, backward, 80),
    F(mxp_op_impl, destroy, 88),
    F(mxp_op_impl, user_data, 96),
    S(mxp_simple_args, 64),
    F(mxp_simple_args, hdr, 0),
    F(mxp_simple_args, ctx, 8),
    F(mxp_simple_args, params, 16),
    F(mxp_simple_args, user_data, 24),
    F(mxp_simple_args, scalar, 32),
    F(mxp_simple_args, n_in, 40),
    F(mxp_simple_args, req, 44),
    F(mxp_simple_args, in, 48),
    F(mxp_simple_args, out, 56),
    S(mxp_simple_grad_args, 88),
    F(mxp_simple_grad_args, hdr, 0),
    F(mxp_simple_grad_args, ctx, 8),
    F(mxp_simple_grad_args, params, 16),
    F(mxp_simple_grad_args, user_data, 24),
    F(mxp_simple_grad_args, scalar, 32),
    F(mxp_simple_grad_args, n_in, 40),
    F(mxp_simple_grad_args, reserved, 44),
    F(mxp_simple_grad_args, out_grad, 48),
    F(mxp_simple_grad_args, in, 56),
    F(mxp_simple_grad_args, out, 64),
    F(mxp_simple_grad_args, in_grad, 72),
    F(mxp_simple_grad_args, req, 80),
    S(mxp_simple_op_def, 112),
    F(mxp_simple_op_def, hdr, 0),
    F(mxp_simple_op_def, name, 8),
    F(mxp_simple_op_def, aliases, 16),
    F(mxp_simple_op_def, doc, 24),
    F(mxp_simple_op_def, kind, 32),
    F(mxp_simple_op_def, grad_kind, 36),
    F(mxp_simple_op_def, inplace, 40),
    F(mxp_simple_op_def, resources, 44),
    F(mxp_simple_op_def, params, 48),
    F(mxp_simple_op_def, n_params, 56),
    F(mxp_simple_op_def, params_size, 60),
    F(mxp_simple_op_def, forward, 64),
    F(mxp_simple_op_def, backward, 72),
    F(mxp_simple_op_def, impl_name, 80),
    F(mxp_simple_op_def, device, 88),
    F(mxp_simple_op_def, rank, 96),
    F(mxp_simple_op_def, reserved, 100),
    F(mxp_simple_op_def, user_data, 104),
    S(mxp_dev_query_args, 40),
    F(mxp_dev_query_args, hdr, 0),
    F(mxp_dev_query_args, user_data, 8),
    F(mxp_dev_query_args, dev_id, 16),
    F(mxp_dev_query_args, count, 20),
    F(mxp_dev_query_args, free_bytes, 24),
    F(mxp_dev_query_args, total_bytes, 32),
    S(mxp_dev_alloc_args, 48),
    F(mxp_dev_alloc_args, hdr, 0),
    F(mxp_dev_alloc_args, user_data, 8),
    F(mxp_dev_alloc_args, dev_id, 16),
    F(mxp_dev_alloc_args, reserved, 20),
    F(mxp_dev_alloc_args, bytes, 24),
    F(mxp_dev_alloc_args, alignment, 32),
    F(mxp_dev_alloc_args, ptr, 40),
    S(mxp_dev_copy_args, 64),
    F(mxp_dev_copy_args, hdr, 0),
    F(mxp_dev_copy_args, user_data, 8),
    F(mxp_dev_copy_args, dst, 16),
    F(mxp_dev_copy_args, src, 24),
    F(mxp_dev_copy_args, dst_dev, 32),
    F(mxp_dev_copy_args, src_dev, 40),
    F(mxp_dev_copy_args, bytes, 48),
    F(mxp_dev_copy_args, stream, 56),
    S(mxp_dev_stream_args, 40),
    F(mxp_dev_stream_args, hdr, 0),
    F(mxp_dev_stream_args, user_data, 8),
    F(mxp_dev_stream_args, dev_id, 16),
    F(mxp_dev_stream_args, ready, 20),
    F(mxp_dev_stream_args, stream, 24),
    F(mxp_dev_stream_args, event, 32),
    S(mxp_device_def, 168),
    F(mxp_device_def, hdr, 0),
    F(mxp_device_def, name, 8),
    F(mxp_device_def, doc, 16),
    F(mxp_device_def, type_hint, 24),
    F(mxp_device_def, flags, 28),
    F(mxp_device_def, count, 32),
    F(mxp_device_def, mem_info, 40),
    F(mxp_device_def, alloc, 48),
    F(mxp_device_def, free, 56),
    F(mxp_device_def, alloc_pinned, 64),
    F(mxp_device_def, free_pinned, 72),
    F(mxp_device_def, copy, 80),
    F(mxp_device_def, stream_create, 88),
    F(mxp_device_def, stream_destroy, 96),
    F(mxp_device_def, stream_sync, 104),
    F(mxp_device_def, event_create, 112),
    F(mxp_device_def, event_destroy, 120),
    F(mxp_device_def, event_record, 128),
    F(mxp_device_def, event_wait, 136),
    F(mxp_device_def, event_query, 144),
    F(mxp_device_def, thread_init, 152),
    F(mxp_device_def, user_data, 160),
    S(mxp_kv_create_args, 56),
    F(mxp_kv_create_args, hdr, 0),
    F(mxp_kv_create_args, user_data, 8),
    F(mxp_kv_create_args, type, 16),
    F(mxp_kv_create_args, keys, 24),
    F(mxp_kv_create_args, vals, 32),
    F(mxp_kv_create_args, n_options, 40),
    F(mxp_kv_create_args, timeout_ms, 44),
    F(mxp_kv_create_args, store, 48),
    S(mxp_kv_args, 80),
    F(mxp_kv_args, hdr, 0),
    F(mxp_kv_args, user_data, 8),
    F(mxp_kv_args, store, 16),
    F(mxp_kv_args, n, 24),
    F(mxp_kv_args, priority, 28),
    F(mxp_kv_args, int_keys, 32),
    F(mxp_kv_args, str_keys, 40),
    F(mxp_kv_args, values, 48),
    F(mxp_kv_args, outs, 56),
    F(mxp_kv_args, complete, 64),
    F(mxp_kv_args, complete_token, 72),
    S(mxp_kv_info_args, 40),
    F(mxp_kv_info_args, hdr, 0),
    F(mxp_kv_info_args, user_data, 8),
    F(mxp_kv_info_args, store, 16),
    F(mxp_kv_info_args, rank, 24),
    F(mxp_kv_info_args, num_workers, 28),
    F(mxp_kv_info_args, num_servers, 32),
    F(mxp_kv_info_args, role, 36),
    S(mxp_kv_updater_args, 56),
    F(mxp_kv_updater_args, hdr, 0),
    F(mxp_kv_updater_args, user_data, 8),
    F(mxp_kv_updater_args, store, 16),
    F(mxp_kv_updater_args, op_name, 24),
    F(mxp_kv_updater_args, keys, 32),
    F(mxp_kv_updater_args, vals, 40),
    F(mxp_kv_updater_args, n_kwargs, 48),
    F(mxp_kv_updater_args, reserved, 52),
    S(mxp_kv_simple_args, 24),
    F(mxp_kv_simple_args, hdr, 0),
    F(mxp_kv_simple_args, user_data, 8),
    F(mxp_kv_simple_args, store, 16),
    S(mxp_kvstore_def, 112),
    F(mxp_kvstore_def, hdr, 0),
    F(mxp_kvstore_def, name, 8),
    F(mxp_kvstore_def, doc, 16),
    F(mxp_kvstore_def, create, 24),
    F(mxp_kvstore_def, destroy, 32),
    F(mxp_kvstore_def, init, 40),
    F(mxp_kvstore_def, push, 48),
    F(mxp_kvstore_def, pull, 56),
    F(mxp_kvstore_def, pushpull, 64),
    F(mxp_kvstore_def, info, 72),
    F(mxp_kvstore_def, barrier, 80),
    F(mxp_kvstore_def, set_updater, 88),
    F(mxp_kvstore_def, run_server, 96),
    F(mxp_kvstore_def, user_data, 104),
    S(mxp_iter_create_args, 32),
    F(mxp_iter_create_args, hdr, 0),
    F(mxp_iter_create_args, params, 8),
    F(mxp_iter_create_args, user_data, 16),
    F(mxp_iter_create_args, state, 24),
    S(mxp_iter_provide_args, 64),
    F(mxp_iter_provide_args, hdr, 0),
    F(mxp_iter_provide_args, user_data, 8),
    F(mxp_iter_provide_args, state, 16),
    F(mxp_iter_provide_args, capacity, 24),
    F(mxp_iter_provide_args, n_data, 28),
    F(mxp_iter_provide_args, n_label, 32),
    F(mxp_iter_provide_args, reserved, 36),
    F(mxp_iter_provide_args, names, 40),
    F(mxp_iter_provide_args, shapes, 48),
    F(mxp_iter_provide_args, dtypes, 56),
    S(mxp_iter_reset_args, 32),
    F(mxp_iter_reset_args, hdr, 0),
    F(mxp_iter_reset_args, user_data, 8),
    F(mxp_iter_reset_args, state, 16),
    F(mxp_iter_reset_args, epoch, 24),
    S(mxp_iter_next_args, 72),
    F(mxp_iter_next_args, hdr, 0),
    F(mxp_iter_next_args, user_data, 8),
    F(mxp_iter_next_args, state, 16),
    F(mxp_iter_next_args, n_data, 24),
    F(mxp_iter_next_args, n_label, 28),
    F(mxp_iter_next_args, data, 32),
    F(mxp_iter_next_args, label, 40),
    F(mxp_iter_next_args, has_batch, 48),
    F(mxp_iter_next_args, pad, 52),
    F(mxp_iter_next_args, index, 56),
    F(mxp_iter_next_args, index_capacity, 64),
    F(mxp_iter_next_args, reserved, 68),
    S(mxp_iter_destroy_args, 24),
    F(mxp_iter_destroy_args, hdr, 0),
    F(mxp_iter_destroy_args, user_data, 8),
    F(mxp_iter_destroy_args, state, 16),
    S(mxp_iter_def, 88),
    F(mxp_iter_def, hdr, 0),
    F(mxp_iter_def, name, 8),
    F(mxp_iter_def, doc, 16),
    F(mxp_iter_def, params, 24),
    F(mxp_iter_def, n_params, 32),
    F(mxp_iter_def, params_size, 36),
    F(mxp_iter_def, create, 40),
    F(mxp_iter_def, destroy, 48),
    F(mxp_iter_def, provide, 56),
    F(mxp_iter_def, reset, 64),
    F(mxp_iter_def, next, 72),
    F(mxp_iter_def, user_data, 80),
    S(mxp_host_push_args, 88),
    F(mxp_host_push_args, hdr, 0),
    F(mxp_host_push_args, fn, 8),
    F(mxp_host_push_args, async_fn, 16),
    F(mxp_host_push_args, arg, 24),
    F(mxp_host_push_args, free_arg, 32),
    F(mxp_host_push_args, const_vars, 40),
    F(mxp_host_push_args, mutate_vars, 48),
    F(mxp_host_push_args, n_const, 56),
    F(mxp_host_push_args, n_mutate, 60),
    F(mxp_host_push_args, device, 64),
    F(mxp_host_push_args, prop, 72),
    F(mxp_host_push_args, priority, 76),
    F(mxp_host_push_args, name, 80),
    S(mxp_host, 192),
    F(mxp_host, hdr, 0),
    F(mxp_host, host_version, 8),
    F(mxp_host, set_error, 16),
    F(mxp_host, log, 24),
    F(mxp_host, num_threads, 32),
    F(mxp_host, parallel_for, 40),
    F(mxp_host, alloc_host, 48),
    F(mxp_host, free_host, 56),
    F(mxp_host, rng_uniform_f32, 64),
    F(mxp_host, rng_normal_f32, 72),
    F(mxp_host, rng_bernoulli_f32, 80),
    F(mxp_host, rng_uniform_f64, 88),
    F(mxp_host, rng_normal_f64, 96),
    F(mxp_host, rng_bits, 104),
    F(mxp_host, rng_philox, 112),
    F(mxp_host, device_type, 120),
    F(mxp_host, parse_params, 128),
    F(mxp_host, free_params, 136),
    F(mxp_host, invoke, 144),
    F(mxp_host, engine_new_var, 152),
    F(mxp_host, engine_delete_var, 160),
    F(mxp_host, engine_push, 168),
    F(mxp_host, engine_wait_for_var, 176),
    F(mxp_host, param_get, 184),          /* since 1.1 */
    S(mxp_registrar, 72),
    F(mxp_registrar, hdr, 0),
    F(mxp_registrar, host_private, 8),
    F(mxp_registrar, add_op, 16),
    F(mxp_registrar, add_impl, 24),
    F(mxp_registrar, add_simple_op, 32),
    F(mxp_registrar, add_device, 40),
    F(mxp_registrar, add_kvstore, 48),
    F(mxp_registrar, add_iter, 56),
    F(mxp_registrar, add_stat, 64),       /* since 1.2 */
    S(mxp_stat_def, 40),                  /* since 1.2 */
    F(mxp_stat_def, hdr, 0),
    F(mxp_stat_def, name, 8),
    F(mxp_stat_def, kind, 16),
    F(mxp_stat_def, flags, 20),
    F(mxp_stat_def, unit, 24),
    F(mxp_stat_def, doc, 32),
    S(mxp_plugin_init_args, 32),
    F(mxp_plugin_init_args, hdr, 0),
    F(mxp_plugin_init_args, host, 8),
    F(mxp_plugin_init_args, registrar, 16),
    F(mxp_plugin_init_args, library_path, 24),
    S(mxp_plugin_fini_args, 16),
    F(mxp_plugin_fini_args, hdr, 0),
    F(mxp_plugin_fini_args, host, 8),
    S(mxp_plugin_desc, 64),
    F(mxp_plugin_desc, hdr, 0),
    F(mxp_plugin_desc, min_host_minor, 8),
    F(mxp_plugin_desc, reserved0, 10),
    F(mxp_plugin_desc, reserved1, 12),
    F(mxp_plugin_desc, name, 16),
    F(mxp_plugin_desc, version, 24),
    F(mxp_plugin_desc, description, 32),
    F(mxp_plugin_desc, license, 40),
    F(mxp_plugin_desc, init, 48),
    F(mxp_plugin_desc, fini, 56),
};

#define N_ROWS (sizeof rows / sizeof rows[0])

Test(abi_layout, lp64) {
    cr_assert_eq(sizeof(void *), 8, "the frozen layouts are LP64 layouts");
}

Test(abi_layout, offsets_and_sizes_match_the_table) {
    int bad = 0;
    for (size_t i = 0; i < N_ROWS; i++) {
        const layout_row *r = &rows[i];
        if (r->expected != r->actual) {
            bad++;
            cr_log_error("%s%s%s: expected %zu, compiler says %zu", r->type, r->field ? "." : "",
                         r->field ? r->field : " size", r->expected, r->actual);
        }
    }
    cr_assert_eq(bad, 0, "%d layout mismatch(es), see above", bad);
}

/* Fields listed per struct, in order, tile it exactly: no gaps, no
 * overlaps, nothing missing. */
Test(abi_layout, fields_cover_each_struct_without_padding) {
    size_t i = 0;
    int n_structs = 0;
    while (i < N_ROWS) {
        const layout_row *srow = &rows[i];
        cr_assert_null(srow->field, "table must start each struct with its size row (%s)", srow->type);
        size_t end = 0;
        i++;
        for (; i < N_ROWS && rows[i].field; i++) {
            cr_assert_str_eq(rows[i].type, srow->type);
            cr_expect_eq(rows[i].expected, end, "%s.%s at %zu, previous field ends at %zu (hole or overlap)",
                         srow->type, rows[i].field, rows[i].expected, end);
            end = rows[i].expected + rows[i].field_size;
        }
        cr_expect_eq(end, srow->expected, "%s: fields end at %zu but the struct is %zu bytes "
                     "(a field missing from the table, or tail padding)", srow->type, end, srow->expected);
        n_structs++;
    }
    cr_expect_eq(n_structs, 49, "every boundary struct of ABI 1.2 is in the table");
}

/* A boundary struct's header says its own size when built with MXP_HEADER. */
Test(abi_layout, header_macro) {
    mxp_op_def def;
    memset(&def, 0, sizeof def);
    def.hdr = (mxp_header)MXP_HEADER(mxp_op_def);
    cr_expect_eq(def.hdr.struct_size, 192);
    cr_expect_eq(def.hdr.abi_major, 1);
    cr_expect_eq(def.hdr.abi_minor, 3);
    cr_expect(MXP_HAS_FIELD(&def, mxp_op_def, user_data));
    def.hdr.struct_size = 184; /* a writer without user_data */
    cr_expect_not(MXP_HAS_FIELD(&def, mxp_op_def, user_data));
    cr_expect(MXP_HAS_FIELD(&def, mxp_op_def, check_params));
}

/* 1.1 appended op_params: args written by a 1.0 host end before it, and
 * the accessors then give NULL instead of reading past the struct. */
Test(abi_layout, op_params_only_when_the_writer_had_it) {
    mxp_op_params rec;
    memset(&rec, 0, sizeof rec);
    mxp_impl_query_args q;
    memset(&q, 0, sizeof q);
    q.hdr = (mxp_header)MXP_HEADER(mxp_impl_query_args);
    q.op_params = &rec;
    cr_expect_eq(mxp_impl_query_op_params(&q), &rec);
    q.hdr.struct_size = 128; /* a 1.0 host */
    cr_expect_null(mxp_impl_query_op_params(&q));
    mxp_forward_args f;
    memset(&f, 0, sizeof f);
    f.hdr = (mxp_header)MXP_HEADER(mxp_forward_args);
    f.op_params = &rec;
    cr_expect_eq(mxp_forward_op_params(&f), &rec);
    f.hdr.struct_size = 88;
    cr_expect_null(mxp_forward_op_params(&f));
    mxp_backward_args b;
    memset(&b, 0, sizeof b);
    b.hdr = (mxp_header)MXP_HEADER(mxp_backward_args);
    b.op_params = &rec;
    cr_expect_eq(mxp_backward_op_params(&b), &rec);
    b.hdr.struct_size = 104;
    cr_expect_null(mxp_backward_op_params(&b));
    /* A 1.0 host table has no param_get: the helpers refuse, not crash. */
    mxp_host h;
    memset(&h, 0, sizeof h);
    h.hdr = (mxp_header)MXP_HEADER(mxp_host);
    h.hdr.struct_size = 184;
    h.param_get = NULL;
    int64_t v = 0;
    cr_expect_eq(mxp_param_get_int(&h, &rec, "num_filter", &v), MXP_EUNSUPPORTED);
}

/* 1.2 appended add_stat: a 1.1 registrar (struct_size 64) has none, and
 * the helper then succeeds with a NULL cell that the bump helpers ignore;
 * a 1.2 registrar's slot is called. */
static int g_add_stat_calls;
static uint64_t g_cell[8] __attribute__((aligned(64)));
static int fake_add_stat(mxp_registrar *r, const mxp_stat_def *d, mxp_stat **out) {
    (void)r;
    (void)d;
    g_add_stat_calls++;
    *out = (mxp_stat *)(void *)g_cell;
    return MXP_OK;
}

Test(abi_layout, add_stat_only_when_the_host_has_it) {
    mxp_registrar r;
    memset(&r, 0, sizeof r);
    r.hdr = (mxp_header)MXP_HEADER(mxp_registrar);
    r.add_stat = fake_add_stat;
    mxp_stat_def d = {MXP_HEADER(mxp_stat_def), "x.calls", MXP_STAT_COUNT, 0, "calls", NULL};
    mxp_stat *s = (mxp_stat *)(void *)&d; /* must be overwritten */
    r.hdr.struct_size = 64; /* a 1.1 host */
    cr_expect_eq(mxp_registrar_add_stat(&r, &d, &s), MXP_OK);
    cr_expect_null(s);
    cr_expect_eq(g_add_stat_calls, 0, "a 1.1 registrar's memory past add_iter is not read");
    mxp_stat_add(s, 3); /* no-ops on NULL */
    mxp_stat_set(s, 3);
    cr_expect_eq(mxp_stat_get(s), 0);
    r.hdr.struct_size = sizeof r;
    cr_expect_eq(mxp_registrar_add_stat(&r, &d, &s), MXP_OK);
    cr_expect_eq(g_add_stat_calls, 1);
    cr_assert_eq((void *)s, (void *)g_cell);
    /* The value is the cell's first 8 bytes. */
    mxp_stat_add(s, 5);
    mxp_stat_add(s, 7);
    cr_expect_eq(g_cell[0], 12);
    cr_expect_eq(mxp_stat_get(s), 12);
    mxp_stat_set(s, 4);
    cr_expect_eq(g_cell[0], 4);
    cr_expect_eq(g_cell[1], 0, "only the value word is written");
    cr_expect_eq(mxp_registrar_add_stat(&r, &d, NULL), MXP_EINVAL);
}

Test(abi_layout, frozen_enum_numbers) {
    /* Status codes. */
    cr_expect_eq(MXP_OK, 0);          cr_expect_eq(MXP_EINVAL, -1);
    cr_expect_eq(MXP_ENOMEM, -2);     cr_expect_eq(MXP_ENOENT, -3);
    cr_expect_eq(MXP_EABI, -6);       cr_expect_eq(MXP_EINCOMPLETE, -16);
    cr_expect_eq(MXP_EPLUGIN, -14);   cr_expect_eq(MXP_ECANCELED, -20);
    /* dtypes are mshadow's type flags. */
    cr_expect_eq(MXP_DTYPE_F32, 0);   cr_expect_eq(MXP_DTYPE_F64, 1);
    cr_expect_eq(MXP_DTYPE_F16, 2);   cr_expect_eq(MXP_DTYPE_U8, 3);
    cr_expect_eq(MXP_DTYPE_I32, 4);   cr_expect_eq(MXP_DTYPE_I8, 5);
    cr_expect_eq(MXP_DTYPE_I64, 6);   cr_expect_eq(MXP_DTYPE_BF16, 12);
    cr_expect_eq(mxp_dtype_size(MXP_DTYPE_F16), 2);
    cr_expect_eq(mxp_dtype_size(MXP_DTYPE_I64), 8);
    /* Devices are MXNet's Context numbers. */
    cr_expect_eq(MXP_DEV_CPU, 1);     cr_expect_eq(MXP_DEV_GPU, 2);
    cr_expect_eq(MXP_DEV_CPU_PINNED, 3); cr_expect_eq(MXP_DEV_CPU_SHARED, 5);
    cr_expect_eq(MXP_DEV_FIRST_DYNAMIC, 16);
    /* OpReqType. */
    cr_expect_eq(MXP_REQ_NULL, 0);    cr_expect_eq(MXP_REQ_WRITE, 1);
    cr_expect_eq(MXP_REQ_INPLACE, 2); cr_expect_eq(MXP_REQ_ADD, 3);
    /* Param types and SimpleOp kinds. */
    cr_expect_eq(MXP_PARAM_INT, 1);   cr_expect_eq(MXP_PARAM_OPT_FLOAT, 9);
    cr_expect_eq(MXP_SIMPLE_UNARY, 1); cr_expect_eq(MXP_SIMPLE_SCALAR, 4);
    cr_expect_eq(MXP_GRAD_USES_INPUT, 3); cr_expect_eq(MXP_GRAD_ZERO, 4);
    /* Counter kinds and flags (1.2). */
    cr_expect_eq(MXP_STAT_COUNT, 1);  cr_expect_eq(MXP_STAT_BYTES, 2);
    cr_expect_eq(MXP_STAT_NANOS, 3);  cr_expect_eq(MXP_STAT_GAUGE, 1);
    cr_expect_str_eq(MXP_PLUGIN_ENTRY_NAME, "mxp_plugin_v1");
}
