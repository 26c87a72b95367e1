"""`kiln.lax` against `jax.lax` 0.10.2, case by case.

Each entry of `CASES` is an expression over NumPy inputs; `EXPECTED` holds what JAX 0.10.2
returned for it (dtype, weak type, shape and values, or the exception type and the first line
of its message), recorded with `/tmp/jaxenv/bin/python` by evaluating the same expressions with
`from jax import lax`. The cases cover weak Python scalars and rank-0/size-1 broadcasting in
binary ops, JAX's dtype errors, `dot_general` dimension numbers, gather/scatter in every mode,
dynamic slices (clamping, negative starts), sort/top_k orders (NaN, -0.0), `reduce`,
cumulative ops, conversions, iota, pad, select_n, clamp and the shape operations.
"""
import numpy as np
import pytest

from kiln import lax

nan, inf = float("nan"), float("inf")

SETUP = """
f = np.arange(6, dtype=np.float32).reshape(2, 3)
i = np.arange(6, dtype=np.int32).reshape(2, 3)
h = np.ones((2, 3), np.float16)
u8 = np.arange(6, dtype=np.uint8).reshape(2, 3)
b = np.array([[True, False, True], [False, False, True]])
x45 = np.arange(20, dtype=np.int32).reshape(4, 5)
GD, SD = lax.GatherDimensionNumbers, lax.ScatterDimensionNumbers
rows = GD(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,))
pts = GD(offset_dims=(), collapsed_slice_dims=(0, 1), start_index_map=(0, 1))
win = GD(offset_dims=(0, 2), collapsed_slice_dims=(), start_index_map=(1, 0))
srows = SD(update_window_dims=(1,), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))
spts = SD(update_window_dims=(), inserted_window_dims=(0, 1), scatter_dims_to_operand_dims=(0, 1))
swin = SD(update_window_dims=(0, 2), inserted_window_dims=(), scatter_dims_to_operand_dims=(1, 0))
ridx = np.array([[2], [0], [5], [-1]], np.int32)
pidx = np.array([[0, 0], [2, 3], [3, 0], [1, -1]], np.int32)
widx = np.array([[1, 0], [3, 2], [0, 1]], np.int32)
upd = np.repeat(np.arange(1, 5, dtype=np.float32)[:, None], 3, axis=1)
fl = np.array([np.nan, -np.nan, 0.0, -0.0, 1.0, -np.inf, np.inf, -1.0, 0.0, -0.0], np.float32)
CASES = [
  # binary ops: rank-0 broadcasting, size-1 broadcasting, weak Python scalars
  ("add_scalar_f", "lax.add(f, 1.0)"),
  ("add_scalar_i", "lax.add(i, 2)"),
  ("add_rank0_array", "lax.add(f, np.float32(2))"),
  ("add_weak_weak", "lax.add(2.0, 3.0)"),
  ("add_weak_int_weak", "lax.add(1, 2)"),
  ("mul_rank0_left", "lax.mul(np.float32(3), f)"),
  ("add_ones", "lax.add(f, np.ones((1, 3), np.float32))"),
  ("add_ones_both", "lax.add(np.ones((2, 1), np.float32), np.ones((1, 3), np.float32))"),
  ("add_f32_i32", "lax.add(f, i)"),
  ("add_i32_f", "lax.add(i, 1.0)"),
  ("add_u8_weak", "lax.add(u8, 3)"),
  ("add_f16_weak", "lax.add(h, 1.0)"),
  ("add_bool", "lax.add(b, b)"),
  ("add_rank_mismatch", "lax.add(f, np.ones(3, np.float32))"),
  ("add_shape_mismatch", "lax.add(np.ones(3, np.float32), np.ones(4, np.float32))"),
  ("mul_f_int", "lax.mul(f, 2)"),
  ("sub_weak_result", "lax.sub(np.float32(1), 1.0)"),
  ("div_i", "lax.div(np.array([7, -7, 7, -7, 5], np.int32), np.array([2, 2, -2, -2, 0], np.int32))"),
  ("rem_i", "lax.rem(np.array([7, -7, 7, -7, 5], np.int32), np.array([2, 2, -2, -2, 0], np.int32))"),
  ("max_bool", "lax.max(b, True)"),
  ("max_nan", "lax.max(np.array([np.nan, 1.0], np.float32), np.array([1.0, np.nan], np.float32))"),
  ("pow_f_i", "lax.pow(np.array([2.0, -2.0, 0.0], np.float32), np.array([3, -1, -2], np.int32))"),
  ("pow_i_i", "lax.pow(i, i)"),
  ("pow_f16_weak", "lax.pow(h, 2.0)"),
  ("shift_left_weak", "lax.shift_left(i, 1)"),
  ("shift_mixed", "lax.shift_left(i, u8)"),
  ("and_mixed", "lax.bitwise_and(i, u8)"),
  ("eq_mixed", "lax.eq(i, 1.0)"),
  ("lt_complex", "lax.lt(np.ones(2, np.complex64), np.ones(2, np.complex64))"),
  ("atan2_int", "lax.atan2(f, i)"),
  ("exp_int", "lax.exp(i)"),
  ("abs_signed", "lax.abs(np.array([-128, -1, 5], np.int8))"),
  ("sign_zero", "lax.sign(np.array([-0.0, 0.0, -3.0, np.nan], np.float32))"),
  ("round_away", "lax.round(np.array([0.5, 1.5, 2.5, -0.5, 0.49999997, -0.0], np.float32))"),
  ("round_even", "lax.round(np.array([0.5, 1.5, 2.5, -0.5], np.float32), lax.RoundingMethod.TO_NEAREST_EVEN)"),
  ("complex", "lax.complex(f, 1.0)"),
  ("complex_f16", "lax.complex(h, h)"),
  ("conj_float", "lax.conj(np.array([1.5], np.float32))"),
  ("real_float", "lax.real(f)"),
  ("integer_pow", "lax.integer_pow(np.array([2, 3, -2], np.int8), 7)"),
  ("integer_pow_neg", "lax.integer_pow(i, -2)"),
  ("integer_pow_f", "lax.integer_pow(np.array([2.0, 0.0], np.float32), -3)"),
  ("neg_i8", "lax.neg(np.array([-128, -1, 5], np.int8))"),
  ("not_i", "lax.bitwise_not(np.array([0, -1, 5], np.int8))"),
  ("population_count", "lax.population_count(np.array([0, -1, 127, -128], np.int8))"),
  ("clz", "lax.clz(np.array([0, 1, 2**31, 65535], np.uint32))"),
  # dot_general
  ("dot_matmul", "lax.dot_general(f, f, (((1,), (1,)), ((), ())))"),
  ("dot_batch", "lax.dot_general(np.arange(24, dtype=np.float32).reshape(2, 3, 4), np.arange(40, dtype=np.float32).reshape(2, 4, 5), (((2,), (1,)), ((0,), (0,))))"),
  ("dot_batch_last", "lax.dot_general(np.arange(24, dtype=np.int32).reshape(3, 4, 2), np.arange(30, dtype=np.int32).reshape(5, 3, 2), (((0,), (1,)), ((2,), (2,))))"),
  ("dot_two_contract", "lax.dot_general(np.arange(24, dtype=np.float32).reshape(2, 3, 4), np.arange(24, dtype=np.float32).reshape(4, 3, 2), (((1, 2), (1, 0)), ((), ())))"),
  ("dot_outer", "lax.dot_general(np.arange(3, dtype=np.float32), np.arange(2, dtype=np.float32), (((), ()), ((), ())))"),
  ("dot_mixed", "lax.dot_general(f, i, (((1,), (1,)), ((), ())))"),
  ("dot_bool", "lax.dot_general(b, b, (((1,), (1,)), ((), ())))"),
  ("dot_pref", "lax.dot_general(np.ones((2, 3), np.int8) * 100, np.ones((2, 3), np.int8), (((1,), (1,)), ((), ())), preferred_element_type=np.int32)"),
  ("dot_pref_f", "lax.dot_general(i, i, (((1,), (1,)), ((), ())), preferred_element_type=np.float32)"),
  ("dot_pref_narrow", "lax.dot_general(i, i, (((1,), (1,)), ((), ())), preferred_element_type=np.int8)"),
  ("atan2_complex", "lax.atan2(np.array([1 + 1j, 2 - 1j], np.complex64), np.array([1 + 0j, 0.5 + 2j], np.complex64))"),
  ("dot_err_shape", "lax.dot_general(f, np.ones((3, 2), np.float32), (((1,), (1,)), ((), ())))"),
  ("dot_err_range", "lax.dot_general(f, f, (((3,), (1,)), ((), ())))"),
  ("dot_err_batch", "lax.dot_general(f, f, (((1,), (1,)), ((0,), ())))"),
  ("dot_err_batch_shape", "lax.dot_general(f, np.ones((3, 3), np.float32), (((1,), (1,)), ((0,), (0,))))"),
  ("dot_err_same", "lax.dot_general(f, np.ones((2, 3), np.int8), (((1,), (1,)), ((), ())))") ,
  ("dot_err_disjoint", "lax.dot_general(f, f, (((0,), (0,)), ((0,), (0,))))"),
  ("dot", "lax.dot(f, np.ones((3, 2), np.float32))"),
  # gather / scatter
  ("gather_rows_default", "lax.gather(f.reshape(3, 2), ridx, lax.GatherDimensionNumbers((1,), (0,), (0,)), (1, 2))"),
  ("gather_rows_clip", "lax.gather(np.arange(12, dtype=np.float32).reshape(3, 4), ridx, rows, (1, 4), mode='clip')"),
  ("gather_rows_fill", "lax.gather(np.arange(12, dtype=np.float32).reshape(3, 4), ridx, rows, (1, 4), mode='fill')"),
  ("gather_rows_fill_value", "lax.gather(np.arange(12, dtype=np.float32).reshape(3, 4), ridx, rows, (1, 4), mode='fill', fill_value=-7)"),
  ("gather_rows_int_fill", "lax.gather(np.arange(12, dtype=np.int32).reshape(3, 4), ridx, rows, (1, 4), mode='fill')"),
  ("gather_rows_uint_fill", "lax.gather(np.arange(12, dtype=np.uint8).reshape(3, 4), ridx, rows, (1, 4), mode='fill')"),
  ("gather_rows_bool_fill", "lax.gather(np.arange(12).reshape(3, 4) > 3, ridx, rows, (1, 4), mode='fill')"),
  ("gather_points_clip", "lax.gather(np.arange(12, dtype=np.float32).reshape(3, 4), pidx, pts, (1, 1), mode='clip')"),
  ("gather_points_fill", "lax.gather(np.arange(12, dtype=np.float32).reshape(3, 4), pidx, pts, (1, 1), mode='fill')"),
  ("gather_windows_clip", "lax.gather(np.arange(12, dtype=np.float32).reshape(3, 4), widx, win, (2, 2), mode='clip')"),
  ("gather_windows_fill", "lax.gather(np.arange(12, dtype=np.float32).reshape(3, 4), widx, win, (2, 2), mode='fill')"),
  ("gather_batch2", "lax.gather(np.arange(12, dtype=np.float32).reshape(3, 4), np.array([[[0], [3]], [[1], [9]]], np.int32), GD((2,), (1,), (1,)), (3, 1), mode='fill')"),
  ("gather_empty", "lax.gather(np.arange(12, dtype=np.float32).reshape(3, 4), np.zeros((0, 1), np.int32), rows, (1, 4))"),
  ("gather_err_float_idx", "lax.gather(f, ridx.astype(np.float32), rows, (1, 3))"),
  ("gather_err_size", "lax.gather(f, ridx, rows, (1, 5))"),
  ("gather_err_collapse", "lax.gather(f, ridx, rows, (2, 3))"),
  ("gather_err_index_vector", "lax.gather(f, pidx, rows, (1, 3))"),
  ("gather_err_offset", "lax.gather(f, ridx, GD((1, 2), (0,), (0,)), (1, 3))"),
  ("scatter_rows_drop", "lax.scatter(np.zeros((3, 3), np.float32), np.array([[2], [0], [5], [-1]], np.int32), upd, srows)"),
  ("scatter_rows_clip", "lax.scatter(np.zeros((3, 3), np.float32), np.array([[2], [0], [5]], np.int32), upd[:3], srows, mode='clip')"),
  ("scatter_add_drop", "lax.scatter_add(np.zeros((3, 3), np.float32), np.array([[2], [0], [5], [0]], np.int32), upd, srows)"),
  ("scatter_add_clip", "lax.scatter_add(np.zeros((3, 3), np.float32), np.array([[2], [0], [5], [0]], np.int32), upd, srows, mode='clip')"),
  ("scatter_mul", "lax.scatter_mul(np.ones((3, 3), np.float32), np.array([[2], [0], [0], [1]], np.int32), upd, srows)"),
  ("scatter_min", "lax.scatter_min(np.full((3, 3), 2.5, np.float32), np.array([[2], [0], [0], [1]], np.int32), upd, srows)"),
  ("scatter_max_clip", "lax.scatter_max(np.full((3, 3), 2.5, np.float32), np.array([[2], [0], [9], [-4]], np.int32), upd, srows, mode='clip')"),
  ("scatter_add_points", "lax.scatter_add(np.arange(12, dtype=np.float32).reshape(3, 4), pidx, np.array([10, 20, 30, 40], np.float32), spts)"),
  ("scatter_add_points_clip", "lax.scatter_add(np.arange(12, dtype=np.float32).reshape(3, 4), pidx, np.array([10, 20, 30, 40], np.float32), spts, mode='clip')"),
  ("scatter_add_dup_int", "lax.scatter_add(np.zeros((3, 4), np.int32), np.array([[1, 1], [1, 1], [0, 0]], np.int32), np.array([5, 6, 7], np.int32), spts)"),
  ("scatter_windows_clip", "lax.scatter(np.zeros((3, 4), np.float32), widx, -np.ones((2, 3, 2), np.float32), swin, mode='clip')"),
  ("scatter_windows_drop", "lax.scatter(np.zeros((3, 4), np.float32), widx, -np.ones((2, 3, 2), np.float32), swin, mode='drop')"),
  ("scatter_err_dtype", "lax.scatter(np.zeros((3, 3), np.float32), ridx, upd.astype(np.int32), srows)"),
  ("scatter_err_rank", "lax.scatter_add(np.zeros((3, 3), np.float32), np.array([[1]], np.int32), np.float32(1), srows)"),
  ("scatter_err_batch", "lax.scatter(np.zeros((3, 3), np.float32), ridx, upd[:3], srows)"),
  ("scatter_err_window", "lax.scatter(np.zeros((3, 3), np.float32), ridx, np.ones((4, 5), np.float32), srows)"),
  # dynamic slices
  ("ds", "lax.dynamic_slice(x45, (1, 2), (2, 2))"),
  ("ds_clamp_high", "lax.dynamic_slice(x45, (3, 4), (2, 2))"),
  ("ds_negative", "lax.dynamic_slice(x45, (-1, -7), (2, 2))"),
  ("ds_array_starts", "lax.dynamic_slice(x45, np.array([2, 3], np.int32), (2, 2))"),
  ("ds_empty", "lax.dynamic_slice(x45, (np.int32(9), np.int32(1)), (0, 2))"),
  ("ds_err_types", "lax.dynamic_slice(x45, (np.int32(1), np.uint8(1)), (2, 2))"),
  ("ds_err_float", "lax.dynamic_slice(x45, (1.0, 1), (2, 2))"),
  ("ds_err_len", "lax.dynamic_slice(x45, (1,), (2, 2))"),
  ("ds_err_size", "lax.dynamic_slice(x45, (1, 1), (5, 2))"),
  ("ds_err_negative_size", "lax.dynamic_slice(x45, (1, 1), (2, -1))"),
  ("ds_in_dim", "lax.dynamic_slice_in_dim(x45, 3, 2, axis=1)"),
  ("ds_index_in_dim", "lax.dynamic_index_in_dim(x45, 9, axis=0, keepdims=False)"),
  ("dus", "lax.dynamic_update_slice(x45, np.full((2, 2), -1, np.int32), (1, 1))"),
  ("dus_clamp", "lax.dynamic_update_slice(x45, np.full((2, 2), -1, np.int32), (3, 4))"),
  ("dus_negative", "lax.dynamic_update_slice(x45, np.full((2, 2), -1, np.int32), (-5, -1))"),
  ("dus_in_dim_negative", "lax.dynamic_update_slice_in_dim(x45, np.zeros((4, 2), np.int32), -1, 1)"),
  ("dus_index_in_dim", "lax.dynamic_update_index_in_dim(x45, np.zeros(5, np.int32), 7, 0)"),
  ("dus_err_dtype", "lax.dynamic_update_slice(x45, np.full((2, 2), -1, np.float32), (0, 0))"),
  ("dus_err_size", "lax.dynamic_update_slice(x45, np.full((5, 2), -1, np.int32), (0, 0))"),
  ("dus_err_rank", "lax.dynamic_update_slice(x45, np.full((2,), -1, np.int32), (0, 0))"),
  ("dus_err_len", "lax.dynamic_update_slice(x45, np.full((2, 2), -1, np.int32), (0,))"),
  # sort and top_k
  ("sort_nan_zero", "lax.sort(fl)"),
  ("sort_nan_bits", "lax.bitcast_convert_type(lax.sort(np.array([np.nan, -np.nan, 0.0, -0.0, 1.0], np.float32)), np.uint32)"),
  ("sort_multi_1key", "lax.sort((np.array([2, 1, 2, 1, 0], np.int32), np.array([5.0, 4.0, 3.0, 2.0, 1.0], np.float32), np.arange(5, dtype=np.int32)), num_keys=1)"),
  ("sort_multi_2keys", "lax.sort((np.array([2, 1, 2, 1, 0], np.int32), np.array([5.0, 4.0, 3.0, 2.0, 1.0], np.float32), np.arange(5, dtype=np.int32)), num_keys=2)"),
  ("sort_dim0", "lax.sort(np.array([[3, 1, 2], [0, 5, -1]], np.int32), dimension=0)"),
  ("sort_bool", "lax.sort(np.array([True, False, True]))"),
  ("sort_complex", "lax.sort(np.array([1 + 2j, 1 + 1j, 0 + 5j], np.complex64))"),
  ("sort_key_val", "lax.sort_key_val(np.array([3.0, np.nan, 1.0, -0.0], np.float32), np.arange(4, dtype=np.int32))"),
  ("sort_err_shapes", "lax.sort((np.ones(3, np.float32), np.ones(4, np.float32)))"),
  ("sort_err_dim", "lax.sort(np.ones(3, np.float32), dimension=1)"),
  ("sort_err_keys", "lax.sort((np.ones(3, np.float32),), num_keys=2)"),
  ("sort_err_rank0", "lax.sort(np.float32(1))"),
  ("top_k", "lax.top_k(np.array([1, 5, np.nan, 5, -0.0, 0.0, 3], np.float32), 4)"),
  ("top_k_order", "lax.top_k(np.array([-0.0, 0.0, np.nan, -np.nan, -np.inf], np.float32), 5)"),
  ("top_k_int", "lax.top_k(np.array([[1, 5, 2], [7, 7, 0]], np.int32), 2)"),
  ("top_k_int8_extremes", "lax.top_k(np.array([-128, 127, 0], np.int8), 3)"),
  ("top_k_uint", "lax.top_k(np.array([1, 255, 0, 3], np.uint8), 2)"),
  ("top_k_bool", "lax.top_k(np.array([False, True, False, True]), 3)"),
  ("top_k_axis0", "lax.top_k(np.array([[1, 5, 2], [7, 7, 0]], np.int32), 1, axis=0)"),
  ("top_k_err_big", "lax.top_k(np.ones(3, np.float32), 4)"),
  ("top_k_err_negative", "lax.top_k(np.ones(3, np.float32), -1)"),
  ("top_k_err_rank0", "lax.top_k(np.float32(3), 1)"),
  # reductions
  ("reduce_add", "lax.reduce(np.arange(6, dtype=np.float32).reshape(2, 3), np.float32(0), lax.add, (0,))"),
  ("reduce_add_init", "lax.reduce(np.arange(6, dtype=np.float32).reshape(2, 3), np.float32(10), lax.add, (0, 1))"),
  ("reduce_max", "lax.reduce(np.array([[1, 7, 2], [3, 0, 4]], np.int32), np.int32(-2**31), lax.max, (1,))"),
  ("reduce_max_init", "lax.reduce(np.array([[1, 7, 2], [3, 0, 4]], np.int32), np.int32(5), lax.max, (1,))"),
  ("reduce_min_empty", "lax.reduce(np.ones((0, 2), np.float32), np.float32(7), lax.min, (0,))"),
  ("reduce_tuple", "lax.reduce((np.array([1, 2], np.float32), np.array([3, 4], np.int32)), (np.float32(0), np.int32(1)), lambda a, b: (lax.add(a[0], b[0]), lax.mul(a[1], b[1])), (0,))"),
  ("reduce_lambda", "lax.reduce(np.array([1.0, 2.0], np.float32), np.float32(0), lambda a, b: a + b, (0,))"),
  ("reduce_sum_axes", "lax.reduce_sum(np.arange(24, dtype=np.int32).reshape(2, 3, 4), (0, 2))"),
  ("reduce_sum_err_axis", "lax.reduce_sum(i, (2,))"),
  ("reduce_sum_err_dup", "lax.reduce_sum(i, (0, 0))"),
  ("reduce_sum_bool", "lax.reduce_sum(b, (0,))"),
  ("reduce_max_complex", "lax.reduce_max(np.array([1 + 2j, 1 + 3j, 0.5 + 9j], np.complex64), (0,))"),
  ("reduce_max_empty_int8", "lax.reduce_max(np.ones((0, 3), np.int8), (0,))"),
  ("reduce_and_int", "lax.reduce_and(np.array([6, 3], np.int32), (0,))"),
  ("reduce_or_int", "lax.reduce_or(np.array([6, 3], np.int32), (0,))"),
  ("reduce_xor_int", "lax.reduce_xor(np.array([6, 3], np.int32), (0,))"),
  ("reduce_and_empty_uint", "lax.reduce_and(np.ones((0,), np.uint8), (0,))"),
  ("reduce_and_float", "lax.reduce_and(np.ones(3, np.float32), (0,))"),
  ("argmax", "lax.argmax(np.array([[1, 5, 5], [7, 7, 2]], np.int32), 1, np.int32)"),
  ("argmax_nan", "lax.argmax(np.array([1, np.nan, 5, np.nan], np.float32), 0, np.int32)"),
  ("argmin_nan", "lax.argmin(np.array([1, np.nan, -5], np.float32), 0, np.int32)"),
  ("argmin_zeros", "lax.argmin(np.array([0.0, -0.0, -0.0], np.float32), 0, np.int32)"),
  ("argmax_bool", "lax.argmax(np.array([True, False, True]), 0, np.int32)"),
  ("argmax_uint8_index", "lax.argmax(i, 0, np.uint8)"),
  ("argmax_err_empty", "lax.argmax(np.ones((2, 0), np.float32), 1, np.int32)"),
  ("argmax_err_axis", "lax.argmax(i, 2, np.int32)"),
  ("argmax_err_index_dtype", "lax.argmax(i, 0, np.float32)"),
  # cumulative
  ("cumsum", "lax.cumsum(i, 1)"),
  ("cumsum_reverse", "lax.cumsum(i, 1, reverse=True)"),
  ("cumsum_axis0_reverse", "lax.cumsum(i, axis=0, reverse=True)"),
  ("cumprod_wrap", "lax.cumprod(np.array([2, 3, 4, 5], np.int8), 0)"),
  ("cummax_nan", "lax.cummax(np.array([1, np.nan, 5, 2], np.float32), 0)"),
  ("cummin_reverse", "lax.cummin(np.array([3, 1, 2], np.uint8), 0, reverse=True)"),
  ("cummax_complex", "lax.cummax(np.array([1 + 1j, 2 + 0j, 1 + 5j], np.complex64), 0)"),
  ("cumlogsumexp", "lax.cumlogsumexp(np.array([0, 0, 0], np.float32), 0)"),
  ("cumlogsumexp_reverse", "lax.cumlogsumexp(np.array([-np.inf, -np.inf, 1], np.float32), 0, reverse=True)"),
  ("cumsum_empty", "lax.cumsum(np.ones((0, 2), np.float32), 0)"),
  ("cumsum_err_bool", "lax.cumsum(b, 0)"),
  ("cumsum_err_axis", "lax.cumsum(i, 2)"),
  ("cumsum_err_rank0", "lax.cumsum(np.float32(3), 0)"),
  # conversions
  ("bitcast_same", "lax.bitcast_convert_type(np.array([1.0, -0.0], np.float32), np.int32)"),
  ("bitcast_narrow", "lax.bitcast_convert_type(np.array([1.0, 2.0], np.float32), np.uint8)"),
  ("bitcast_widen", "lax.bitcast_convert_type(np.array([[0, 0, 128, 63], [0, 0, 0, 64]], np.uint8), np.float32)"),
  ("bitcast_widen_f16", "lax.bitcast_convert_type(np.array([[1.0, 2.0]], np.float16), np.int32)"),
  ("bitcast_empty", "lax.bitcast_convert_type(np.zeros((0, 2), np.uint16), np.int32)"),
  ("bitcast_err_size", "lax.bitcast_convert_type(np.array([1, 2, 3], np.uint8), np.float32)"),
  ("bitcast_err_rank0", "lax.bitcast_convert_type(np.uint8(1), np.uint16)"),
  ("bitcast_err_bool", "lax.bitcast_convert_type(np.array([True]), np.uint8)"),
  ("bitcast_err_complex", "lax.bitcast_convert_type(np.array([1 + 2j], np.complex64), np.float32)"),
  ("convert_f32_i8", "lax.convert_element_type(np.array([np.nan, np.inf, -np.inf, 1e10, 2.7, -2.7, 127.9, -128.9, 300.0], np.float32), np.int8)"),
  ("convert_f32_u8", "lax.convert_element_type(np.array([np.nan, -1.0, 255.5, 256.0, 2.7], np.float32), np.uint8)"),
  ("convert_f32_i32", "lax.convert_element_type(np.array([np.nan, 2147483520.0, 3e9, -3e9], np.float32), np.int32)"),
  ("convert_f32_u32", "lax.convert_element_type(np.array([np.nan, -5.0, 5e9, 2147483520.0], np.float32), np.uint32)"),
  ("convert_f16_i32", "lax.convert_element_type(np.array([np.nan, np.inf, 65504, -3.5], np.float16), np.int32)"),
  ("convert_to_bool", "lax.convert_element_type(np.array([0.5, 0.0, np.nan, -0.0], np.float32), np.bool_)"),
  ("convert_c64_f32", "lax.convert_element_type(np.array([1 + 2j, -3 - 4j], np.complex64), np.float32)"),
  ("convert_c64_bool", "lax.convert_element_type(np.array([1 + 1j, 1j, 0j], np.complex64), np.bool_)"),
  ("convert_i32_i8", "lax.convert_element_type(np.array([300, -129, 255], np.int32), np.int8)"),
  ("convert_i32_f16", "lax.convert_element_type(np.array([70000, -70000, 2049], np.int32), np.float16)"),
  ("convert_f64_request", "lax.convert_element_type(np.array([1.5], np.float32), np.float64)"),
  ("convert_u32_f32", "lax.convert_element_type(np.array([4294967295], np.uint32), np.float32)"),
  # iota, pad, select_n, clamp
  ("iota", "lax.iota(np.int32, 4)"),
  ("iota_empty", "lax.iota(np.float32, 0)"),
  ("iota_f16", "lax.iota(np.float16, 3)"),
  ("iota_complex", "lax.iota(np.complex64, 3)"),
  ("iota_uint8_wrap", "lax.iota(np.uint8, 300)"),
  ("broadcasted_iota", "lax.broadcasted_iota(np.int8, (2, 3), 1)"),
  ("broadcasted_iota_dim0", "lax.broadcasted_iota(np.float32, (3, 2), 0)"),
  ("broadcasted_iota_empty", "lax.broadcasted_iota(np.int32, (2, 0, 3), 2)"),
  ("iota_err_dim", "lax.broadcasted_iota(np.int32, (2, 3), 2)"),
  ("iota_err_bool", "lax.iota(np.bool_, 3)"),
  ("iota_err_negative", "lax.iota(np.int32, -1)"),
  ("pad_interior", "lax.pad(i, np.int32(-1), ((1, 2, 1), (0, -1, 0)))"),
  ("pad_negative", "lax.pad(i, np.int32(-1), ((-1, -1, 2), (2, -2, 1)))"),
  ("pad_negative_interior", "lax.pad(i, np.int32(-1), ((0, 0, 0), (-4, 0, 2)))"),
  ("pad_empty", "lax.pad(np.ones((0, 2), np.int32), np.int32(7), ((1, 1, 3), (0, 0, 0)))"),
  ("pad_rank0", "lax.pad(np.float32(3), np.float32(0), ())"),
  ("pad_weak_value", "lax.pad(f, 0.0, ((1, 0, 0), (0, 1, 0)))"),
  ("pad_err_dtype", "lax.pad(h, 0.0, ((1, 1, 0), (0, 0, 0)))"),
  ("pad_err_value_shape", "lax.pad(f, np.zeros((1,), np.float32), ((1, 1, 0), (0, 0, 0)))"),
  ("pad_err_config", "lax.pad(f, np.float32(0), ((1, 1, 0),))"),
  ("pad_err_interior", "lax.pad(f, np.float32(0), ((1, 1, -1), (0, 0, 0)))"),
  ("pad_err_negative_size", "lax.pad(f, np.float32(0), ((-2, -2, 1), (0, 0, 0)))"),
  ("select_n_bool", "lax.select_n(b, f, f * 10)"),
  ("select_n_scalar_pred", "lax.select_n(True, f, f * 10)"),
  ("select_n_int", "lax.select_n(np.array([[0, 1, 2], [2, 1, 0]], np.int32), f, f * 10, f * 100)"),
  ("select_n_uint8", "lax.select_n(np.full((2, 3), 1, np.uint8), f, f * 2, f * 3)"),
  ("select_n_one_case", "lax.select_n(True, f)"),
  ("select", "lax.select(b, f, f * 10)"),
  ("select_n_err_none", "lax.select_n(True)"),
  ("select_n_err_shapes", "lax.select_n(True, f, np.ones(3, np.float32))"),
  ("select_n_err_pred_shape", "lax.select_n(np.ones(2, bool), np.ones(3, np.float32), np.ones(3, np.float32))"),
  ("select_n_err_pred_dtype", "lax.select_n(np.ones(3, np.float32), np.ones(3, np.float32), np.ones(3, np.float32))"),
  ("select_n_err_bool_cases", "lax.select_n(True, f, f, f)"),
  ("select_n_err_dtypes", "lax.select_n(np.ones(3, bool), np.ones(3, np.float32), np.ones(3, np.int32))"),
  ("clamp", "lax.clamp(np.float32(1), f, np.float32(4))"),
  ("clamp_weak", "lax.clamp(1.0, f, 4.0)"),
  ("clamp_arrays", "lax.clamp(f - 1, f, f + 1)"),
  ("clamp_inverted", "lax.clamp(np.int32(5), np.array([1, 7, 3], np.int32), np.int32(2))"),
  ("clamp_nan", "lax.clamp(np.float32(0), np.array([np.nan, -1, 2], np.float32), np.float32(1))"),
  ("clamp_bool", "lax.clamp(np.bool_(False), np.array([True, False]), np.bool_(True))"),
  ("clamp_err_dtype", "lax.clamp(0.0, h, 1.0)"),
  ("clamp_err_shape", "lax.clamp(np.zeros(2, np.float32), np.ones(3, np.float32), np.float32(1))"),
  # structural
  ("broadcast_in_dim", "lax.broadcast_in_dim(f, (2, 3, 4), (0, 1))"),
  ("broadcast_in_dim_ones", "lax.broadcast_in_dim(np.arange(3, dtype=np.float32).reshape(1, 3), (5, 2, 3), (1, 2))"),
  ("broadcast_in_dim_transposing", "lax.broadcast_in_dim(f, (3, 2), (1, 0))"),
  ("broadcast_in_dim_scalar", "lax.broadcast_in_dim(1.0, (2,), ())"),
  ("broadcast_in_dim_err_size", "lax.broadcast_in_dim(f, (2, 4), (0, 1))"),
  ("broadcast_in_dim_err_len", "lax.broadcast_in_dim(f, (2, 3), (0,))"),
  ("broadcast_in_dim_err_range", "lax.broadcast_in_dim(f, (2, 3), (0, 5))"),
  ("broadcast_in_dim_err_negative", "lax.broadcast_in_dim(f, (2, -3), (0, 1))"),
  ("broadcast", "lax.broadcast(f, (4,))"),
  ("reshape", "lax.reshape(i, (3, 2))"),
  ("reshape_dimensions", "lax.reshape(i, (3, 2), (1, 0))"),
  ("reshape_err_dimensions", "lax.reshape(i, (3, 2), (0, 0))"),
  ("reshape_err_negative", "lax.reshape(i, (-1, 2))"),
  ("transpose", "lax.transpose(np.arange(24, dtype=np.int32).reshape(2, 3, 4), (2, 0, 1))"),
  ("transpose_err", "lax.transpose(i, (0, 0))"),
  ("squeeze", "lax.squeeze(np.ones((1, 3, 1), np.float32), (0, 2))"),
  ("squeeze_negative", "lax.squeeze(np.ones((1, 3, 1), np.float32), (-1,))"),
  ("squeeze_err_size", "lax.squeeze(np.ones((1, 3, 1), np.float32), (1,))"),
  ("squeeze_err_range", "lax.squeeze(np.ones((1, 3, 1), np.float32), (3,))"),
  ("expand_dims", "lax.expand_dims(f, (0, 3))"),
  ("rev", "lax.rev(i, (0, 1))"),
  ("rev_err_range", "lax.rev(i, (2,))"),
  ("rev_err_dup", "lax.rev(i, (0, 0))"),
  ("slice", "lax.slice(i, (0, 1), (2, 3))"),
  ("slice_strides", "lax.slice(np.arange(20, dtype=np.int32).reshape(4, 5), (0, 1), (4, 5), (3, 2))"),
  ("slice_in_dim", "lax.slice_in_dim(x45, 1, None, 2, 1)"),
  ("slice_in_dim_negative", "lax.slice_in_dim(x45, -3, -1, 1, 0)"),
  ("index_in_dim", "lax.index_in_dim(x45, -1, 1, False)"),
  ("index_in_dim_err", "lax.index_in_dim(x45, 5, 1, False)"),
  ("concatenate", "lax.concatenate([i, i * 2], 1)"),
  ("concatenate_three", "lax.concatenate([i, i, np.zeros((1, 3), np.int32)], 0)"),
  ("concatenate_err_empty", "lax.concatenate([], 0)"),
  ("concatenate_err_dtype", "lax.concatenate([f, i], 0)"),
  ("concatenate_err_shape", "lax.concatenate([f, np.ones((2, 4), np.float32)], 0)"),
  ("concatenate_err_rank", "lax.concatenate([f, np.ones(3, np.float32)], 0)"),
  ("concatenate_err_dim", "lax.concatenate([i, i], 2)"),
  ("full", "lax.full((2, 2), 3.0)"),
  ("full_dtype", "lax.full((2,), 3, np.int8)"),
  ("full_like", "lax.full_like(i, 7)"),
]
"""

EXPECTED = {
    'add_scalar_f': ('float32', False, (2, 3), [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]),
    'add_scalar_i': ('int32', False, (2, 3), [[2, 3, 4], [5, 6, 7]]),
    'add_rank0_array': ('float32', False, (2, 3), [[2.0, 3.0, 4.0], [5.0, 6.0, 7.0]]),
    'add_weak_weak': ('float32', True, (), 5.0),
    'add_weak_int_weak': ('int32', True, (), 3),
    'mul_rank0_left': ('float32', False, (2, 3), [[0.0, 3.0, 6.0], [9.0, 12.0, 15.0]]),
    'add_ones': ('float32', False, (2, 3), [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]),
    'add_ones_both': ('float32', False, (2, 3), [[2.0, 2.0, 2.0], [2.0, 2.0, 2.0]]),
    'add_f32_i32': ('raises', 'TypeError', 'lax.add requires arguments to have the same dtypes, got float32, int32. (Tip: jnp.add is a similar function that does automatic type promotion on inputs).'),
    'add_i32_f': ('raises', 'TypeError', 'lax.add requires arguments to have the same dtypes, got int32, float32. (Tip: jnp.add is a similar function that does automatic type promotion on inputs).'),
    'add_u8_weak': ('raises', 'TypeError', 'lax.add requires arguments to have the same dtypes, got uint8, int32. (Tip: jnp.add is a similar function that does automatic type promotion on inputs).'),
    'add_f16_weak': ('raises', 'TypeError', 'lax.add requires arguments to have the same dtypes, got float16, float32. (Tip: jnp.add is a similar function that does automatic type promotion on inputs).'),
    'add_bool': ('raises', 'TypeError', 'add does not accept dtype bool at position 0. Accepted dtypes at position 0 are subtypes of integer, floating, complexfloating.'),
    'add_rank_mismatch': ('raises', 'TypeError', 'add: arrays must have the same number of dimensions, got {1, 2}'),
    'add_shape_mismatch': ('raises', 'TypeError', 'add got incompatible shapes for broadcasting: (3,), (4,).'),
    'mul_f_int': ('raises', 'TypeError', 'lax.mul requires arguments to have the same dtypes, got float32, int32. (Tip: jnp.multiply is a similar function that does automatic type promotion on inputs).'),
    'sub_weak_result': ('float32', False, (), 0.0),
    'div_i': ('int32', False, (5,), [3, -3, -3, 3, -1]),
    'rem_i': ('int32', False, (5,), [1, -1, 1, -1, 5]),
    'max_bool': ('bool', False, (2, 3), [[True, True, True], [True, True, True]]),
    'max_nan': ('float32', False, (2,), [nan, nan]),
    'pow_f_i': ('float32', False, (3,), [8.0, -0.5, inf]),
    'pow_i_i': ('raises', 'TypeError', 'pow does not accept dtype int32 at position 0. Accepted dtypes at position 0 are subtypes of floating, complexfloating.'),
    'pow_f16_weak': ('raises', 'TypeError', 'the first argument to pow must have an inexact dtype (float or complex), and the second argument must have an inexact or integer dtype, and two inexact dtypes must match, but got float16 and float32 respectively.'),
    'shift_left_weak': ('int32', False, (2, 3), [[0, 2, 4], [6, 8, 10]]),
    'shift_mixed': ('raises', 'TypeError', 'lax.shift_left requires arguments to have the same dtypes, got int32, uint8. (Tip: jnp.left_shift is a similar function that does automatic type promotion on inputs).'),
    'and_mixed': ('raises', 'TypeError', 'lax.and requires arguments to have the same dtypes, got int32, uint8.'),
    'eq_mixed': ('raises', 'TypeError', 'lax.eq requires arguments to have the same dtypes, got int32, float32. (Tip: jnp.equal is a similar function that does automatic type promotion on inputs).'),
    'lt_complex': ('raises', 'TypeError', 'lt does not accept dtype complex64 at position 0. Accepted dtypes at position 0 are subtypes of integer, floating, bool.'),
    'atan2_int': ('raises', 'TypeError', 'atan2 does not accept dtype int32 at position 1. Accepted dtypes at position 1 are subtypes of floating, complexfloating.'),
    'exp_int': ('raises', 'TypeError', 'exp does not accept dtype int32. Accepted dtypes are subtypes of floating, complexfloating.'),
    'abs_signed': ('int8', False, (3,), [-128, 1, 5]),
    'sign_zero': ('float32', False, (4,), [-0.0, 0.0, -1.0, nan]),
    'round_away': ('float32', False, (6,), [1.0, 2.0, 3.0, -1.0, 0.0, -0.0]),
    'round_even': ('float32', False, (4,), [0.0, 2.0, 2.0, -0.0]),
    'complex': ('complex64', False, (2, 3), [[1j, (1+1j), (2+1j)], [(3+1j), (4+1j), (5+1j)]]),
    'complex_f16': ('raises', 'TypeError', 'complex does not accept dtype float16 at position 0. Accepted dtypes at position 0 are subtypes of float32, float64.'),
    'conj_float': ('complex64', False, (1,), [(1.5+0j)]),
    'real_float': ('raises', 'TypeError', 'real does not accept dtype float32. Accepted dtypes are subtypes of complexfloating.'),
    'integer_pow': ('int8', False, (3,), [-128, -117, -128]),
    'integer_pow_neg': ('raises', 'TypeError', 'Integers cannot be raised to negative powers, got integer_pow(int32[2,3], -2)'),
    'integer_pow_f': ('float32', False, (2,), [0.125, inf]),
    'neg_i8': ('int8', False, (3,), [-128, 1, -5]),
    'not_i': ('int8', False, (3,), [-1, 0, -6]),
    'population_count': ('int8', False, (4,), [0, 8, 7, 1]),
    'clz': ('uint32', False, (4,), [32, 31, 0, 16]),
    'dot_matmul': ('float32', False, (2, 2), [[5.0, 14.0], [14.0, 50.0]]),
    'dot_batch': ('float32', False, (2, 3, 5), [[[70.0, 76.0, 82.0, 88.0, 94.0], [190.0, 212.0, 234.0, 256.0, 278.0], [310.0, 348.0, 386.0, 424.0, 462.0]], [[1510.0, 1564.0, 1618.0, 1672.0, 1726.0], [1950.0, 2020.0, 2090.0, 2160.0, 2230.0], [2390.0, 2476.0, 2562.0, 2648.0, 2734.0]]]),
    'dot_batch_last': ('int32', False, (2, 4, 5), [[[80, 224, 368, 512, 656], [92, 272, 452, 632, 812], [104, 320, 536, 752, 968], [116, 368, 620, 872, 1124]], [[113, 275, 437, 599, 761], [131, 329, 527, 725, 923], [149, 383, 617, 851, 1085], [167, 437, 707, 977, 1247]]]),
    'dot_two_contract': ('float32', False, (2, 2), [[880.0, 946.0], [2464.0, 2674.0]]),
    'dot_outer': ('float32', False, (3, 2), [[0.0, 0.0], [0.0, 1.0], [0.0, 2.0]]),
    'dot_mixed': ('float32', False, (2, 2), [[5.0, 14.0], [14.0, 50.0]]),
    'dot_bool': ('bool', False, (2, 2), [[True, True], [True, True]]),
    'dot_pref': ('int32', False, (2, 2), [[300, 300], [300, 300]]),
    'dot_pref_f': ('float32', False, (2, 2), [[5.0, 14.0], [14.0, 50.0]]),
    'dot_pref_narrow': ('raises', 'TypeError', '`preferred_element_type` must not be narrower than the original type, got preferred_element_type of int8 for result type of int32.'),
    'atan2_complex': ('complex64', False, (2,), [(1.0172219276428223+0.40235933661460876j), (2.176809072494507-1.0726149082183838j)]),
    'dot_err_shape': ('raises', 'TypeError', 'dot_general requires contracting dimensions to have the same shape, got (3,) and (2,).'),
    'dot_err_range': ('raises', 'TypeError', 'dot_general requires lhs dimension numbers to be nonnegative and less than the number of axes of the lhs value, got lhs_batch of () and lhs_contracting of (3,) for lhs of rank 2'),
    'dot_err_batch': ('raises', 'TypeError', 'dot_general requires equal numbers of lhs_batch and rhs_batch dimensions, got lhs_batch (0,) and rhs_batch ().'),
    'dot_err_batch_shape': ('raises', 'TypeError', 'dot_general requires lhs batch dimensions and rhs batch dimensions to have the same shape, got (2,) and (3,).'),
    'dot_err_same': ('float32', False, (2, 2), [[3.0, 3.0], [12.0, 12.0]]),
    'dot_err_disjoint': ('raises', 'TypeError', 'dot_general requires lhs batch dimensions to be disjoint from contracting dimensions, got lhs_batch (0,) and lhs_contracting (0,).'),
    'dot': ('float32', False, (2, 2), [[3.0, 3.0], [12.0, 12.0]]),
    'gather_rows_default': ('float32', False, (4, 2), [[4.0, 5.0], [0.0, 1.0], [4.0, 5.0], [0.0, 1.0]]),
    'gather_rows_clip': ('float32', False, (4, 4), [[8.0, 9.0, 10.0, 11.0], [0.0, 1.0, 2.0, 3.0], [8.0, 9.0, 10.0, 11.0], [0.0, 1.0, 2.0, 3.0]]),
    'gather_rows_fill': ('float32', False, (4, 4), [[8.0, 9.0, 10.0, 11.0], [0.0, 1.0, 2.0, 3.0], [nan, nan, nan, nan], [nan, nan, nan, nan]]),
    'gather_rows_fill_value': ('float32', False, (4, 4), [[8.0, 9.0, 10.0, 11.0], [0.0, 1.0, 2.0, 3.0], [-7.0, -7.0, -7.0, -7.0], [-7.0, -7.0, -7.0, -7.0]]),
    'gather_rows_int_fill': ('int32', False, (4, 4), [[8, 9, 10, 11], [0, 1, 2, 3], [-2147483648, -2147483648, -2147483648, -2147483648], [-2147483648, -2147483648, -2147483648, -2147483648]]),
    'gather_rows_uint_fill': ('uint8', False, (4, 4), [[8, 9, 10, 11], [0, 1, 2, 3], [255, 255, 255, 255], [255, 255, 255, 255]]),
    'gather_rows_bool_fill': ('bool', False, (4, 4), [[True, True, True, True], [False, False, False, False], [True, True, True, True], [True, True, True, True]]),
    'gather_points_clip': ('float32', False, (4,), [0.0, 11.0, 8.0, 4.0]),
    'gather_points_fill': ('float32', False, (4,), [0.0, 11.0, nan, nan]),
    'gather_windows_clip': ('float32', False, (2, 3, 2), [[[1.0, 2.0], [6.0, 7.0], [4.0, 5.0]], [[5.0, 6.0], [10.0, 11.0], [8.0, 9.0]]]),
    'gather_windows_fill': ('float32', False, (2, 3, 2), [[[1.0, 2.0], [nan, nan], [4.0, 5.0]], [[5.0, 6.0], [nan, nan], [8.0, 9.0]]]),
    'gather_batch2': ('float32', False, (2, 2, 3), [[[0.0, 4.0, 8.0], [3.0, 7.0, 11.0]], [[1.0, 5.0, 9.0], [nan, nan, nan]]]),
    'gather_empty': ('float32', False, (0, 4), []),
    'gather_err_float_idx': ('raises', 'ValueError', 'indices must have an integer type'),
    'gather_err_size': ('raises', 'TypeError', 'Slice size at index 1 in gather op is out of range, must be within [0, 3 + 1), got 5.'),
    'gather_err_collapse': ('raises', 'TypeError', 'Gather op can only collapse slice dims with bound 1, but bound is 2 for index 0 at position 0.'),
    'gather_err_index_vector': ('raises', 'TypeError', 'Gather op has 1 elements in start_index_map and the bound of dimension index_vector_dim=1 of indices is 2. These two numbers must be equal.'),
    'gather_err_offset': ('raises', 'TypeError', 'All components of the offset index in a gather op must either be a offset dimension or explicitly collapsed/batching; got len(slice_sizes)=2, output_slice_sizes=(1, 2), collapsed_slice_dims=(0,), operand_batching_dims=().'),
    'scatter_rows_drop': ('float32', False, (3, 3), [[2.0, 2.0, 2.0], [0.0, 0.0, 0.0], [1.0, 1.0, 1.0]]),
    'scatter_rows_clip': ('float32', False, (3, 3), [[2.0, 2.0, 2.0], [0.0, 0.0, 0.0], [3.0, 3.0, 3.0]]),
    'scatter_add_drop': ('float32', False, (3, 3), [[6.0, 6.0, 6.0], [0.0, 0.0, 0.0], [1.0, 1.0, 1.0]]),
    'scatter_add_clip': ('float32', False, (3, 3), [[6.0, 6.0, 6.0], [0.0, 0.0, 0.0], [4.0, 4.0, 4.0]]),
    'scatter_mul': ('float32', False, (3, 3), [[6.0, 6.0, 6.0], [4.0, 4.0, 4.0], [1.0, 1.0, 1.0]]),
    'scatter_min': ('float32', False, (3, 3), [[2.0, 2.0, 2.0], [2.5, 2.5, 2.5], [1.0, 1.0, 1.0]]),
    'scatter_max_clip': ('float32', False, (3, 3), [[4.0, 4.0, 4.0], [2.5, 2.5, 2.5], [3.0, 3.0, 3.0]]),
    'scatter_add_points': ('float32', False, (3, 4), [[10.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0], [8.0, 9.0, 10.0, 31.0]]),
    'scatter_add_points_clip': ('float32', False, (3, 4), [[10.0, 1.0, 2.0, 3.0], [44.0, 5.0, 6.0, 7.0], [38.0, 9.0, 10.0, 31.0]]),
    'scatter_add_dup_int': ('int32', False, (3, 4), [[7, 0, 0, 0], [0, 11, 0, 0], [0, 0, 0, 0]]),
    'scatter_windows_clip': ('float32', False, (3, 4), [[0.0, -1.0, -1.0, 0.0], [-1.0, -1.0, -1.0, -1.0], [-1.0, -1.0, -1.0, -1.0]]),
    'scatter_windows_drop': ('float32', False, (3, 4), [[0.0, -1.0, -1.0, 0.0], [-1.0, -1.0, -1.0, 0.0], [-1.0, -1.0, 0.0, 0.0]]),
    'scatter_err_dtype': ('raises', 'TypeError', 'lax.scatter requires arguments to have the same dtypes, got float32, int32.'),
    'scatter_err_rank': ('raises', 'TypeError', 'Updates tensor must be of rank 2; got 0.'),
    'scatter_err_batch': ('raises', 'TypeError', 'Bounds of the scatter dimensions of updates must be the same as the bounds of the corresponding dimensions of scatter indices. For scatter dimension 0, updates bound is 3, indices bound is 4.'),
    'scatter_err_window': ('raises', 'TypeError', 'Bounds of the window dimensions of updates must not exceed the bounds of the corresponding dimensions of operand. For dimension 1, updates bound is 5, operand bound is 3.'),
    'ds': ('int32', False, (2, 2), [[7, 8], [12, 13]]),
    'ds_clamp_high': ('int32', False, (2, 2), [[13, 14], [18, 19]]),
    'ds_negative': ('int32', False, (2, 2), [[10, 11], [15, 16]]),
    'ds_array_starts': ('int32', False, (2, 2), [[13, 14], [18, 19]]),
    'ds_empty': ('int32', False, (0, 2), []),
    'ds_err_types': ('raises', 'TypeError', 'index arguments to dynamic_slice must be integers of the same type, got: int32, uint8'),
    'ds_err_float': ('raises', 'TypeError', 'index arguments to dynamic_slice must be integers of the same type, got: float32, int32'),
    'ds_err_len': ('raises', 'ValueError', 'Length of slice indices must match number of operand dimensions (1 vs (4, 5))'),
    'ds_err_size': ('raises', 'TypeError', 'slice slice_sizes must be less than or equal to operand shape, got slice_sizes (5, 2) for operand shape (4, 5).'),
    'ds_err_negative_size': ('raises', 'TypeError', 'slice slice_sizes must be greater than or equal to zero, got slice_sizes of (2, -1).'),
    'ds_in_dim': ('int32', False, (4, 2), [[3, 4], [8, 9], [13, 14], [18, 19]]),
    'ds_index_in_dim': ('int32', False, (5,), [15, 16, 17, 18, 19]),
    'dus': ('int32', False, (4, 5), [[0, 1, 2, 3, 4], [5, -1, -1, 8, 9], [10, -1, -1, 13, 14], [15, 16, 17, 18, 19]]),
    'dus_clamp': ('int32', False, (4, 5), [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9], [10, 11, 12, -1, -1], [15, 16, 17, -1, -1]]),
    'dus_negative': ('int32', False, (4, 5), [[0, 1, 2, -1, -1], [5, 6, 7, -1, -1], [10, 11, 12, 13, 14], [15, 16, 17, 18, 19]]),
    'dus_in_dim_negative': ('int32', False, (4, 5), [[0, 1, 2, 0, 0], [5, 6, 7, 0, 0], [10, 11, 12, 0, 0], [15, 16, 17, 0, 0]]),
    'dus_index_in_dim': ('int32', False, (4, 5), [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9], [10, 11, 12, 13, 14], [0, 0, 0, 0, 0]]),
    'dus_err_dtype': ('raises', 'TypeError', 'lax.dynamic_update_slice requires arguments to have the same dtypes, got int32, float32.'),
    'dus_err_size': ('raises', 'TypeError', 'dynamic_update_slice update shape must be smaller than operand shape, got update shape (5, 2) for operand shape (4, 5).'),
    'dus_err_rank': ('raises', 'TypeError', 'dynamic_update_slice update must have the same rank as operand, got update shape (2,) for operand shape (4, 5).'),
    'dus_err_len': ('raises', 'ValueError', 'Length of slice indices must match number of operand dimensions (1 vs (4, 5))'),
    'sort_nan_zero': ('float32', False, (10,), [-inf, -1.0, 0.0, -0.0, 0.0, -0.0, 1.0, inf, nan, nan]),
    'sort_nan_bits': ('uint32', False, (5,), [0, 2147483648, 1065353216, 2143289344, 4290772992]),
    'sort_multi_1key': ('seq', ('int32', False, (5,), [0, 1, 1, 2, 2]), ('float32', False, (5,), [1.0, 4.0, 2.0, 5.0, 3.0]), ('int32', False, (5,), [4, 1, 3, 0, 2])),
    'sort_multi_2keys': ('seq', ('int32', False, (5,), [0, 1, 1, 2, 2]), ('float32', False, (5,), [1.0, 2.0, 4.0, 3.0, 5.0]), ('int32', False, (5,), [4, 3, 1, 2, 0])),
    'sort_dim0': ('int32', False, (2, 3), [[0, 1, -1], [3, 5, 2]]),
    'sort_bool': ('bool', False, (3,), [False, True, True]),
    'sort_complex': ('complex64', False, (3,), [5j, (1+1j), (1+2j)]),
    'sort_key_val': ('seq', ('float32', False, (4,), [-0.0, 1.0, 3.0, nan]), ('int32', False, (4,), [3, 2, 0, 1])),
    'sort_err_shapes': ('raises', 'TypeError', 'Arguments to sort must have equal shapes, got: (3,) (4,)'),
    'sort_err_dim': ('raises', 'ValueError', 'axis 1 is out of bounds for array of dimension 1'),
    'sort_err_keys': ('raises', 'ValueError', 'num_keys=2 must be between 1 and len(operand)=1'),
    'sort_err_rank0': ('raises', 'ValueError', 'axis -1 is out of bounds for array of dimension 0'),
    'top_k': ('seq', ('float32', False, (4,), [nan, 5.0, 5.0, 3.0]), ('int32', False, (4,), [2, 1, 3, 6])),
    'top_k_order': ('seq', ('float32', False, (5,), [nan, 0.0, -0.0, -inf, nan]), ('int32', False, (5,), [2, 1, 0, 4, 3])),
    'top_k_int': ('seq', ('int32', False, (2, 2), [[5, 2], [7, 7]]), ('int32', False, (2, 2), [[1, 2], [0, 1]])),
    'top_k_int8_extremes': ('seq', ('int8', False, (3,), [127, 0, -128]), ('int32', False, (3,), [1, 2, 0])),
    'top_k_uint': ('seq', ('uint8', False, (2,), [255, 3]), ('int32', False, (2,), [1, 3])),
    'top_k_bool': ('seq', ('bool', False, (3,), [True, True, False]), ('int32', False, (3,), [1, 3, 0])),
    'top_k_axis0': ('seq', ('int32', False, (1, 3), [[7, 7, 2]]), ('int32', False, (1, 3), [[1, 1, 0]])),
    'top_k_err_big': ('raises', 'ValueError', 'k argument to top_k must be no larger than size along axis; got k=4 with shape=[3] and axis=0'),
    'top_k_err_negative': ('raises', 'ValueError', 'k argument to top_k must be nonnegative, got -1'),
    'top_k_err_rank0': ('raises', 'ValueError', 'axis -1 is out of bounds for array of dimension 0'),
    'reduce_add': ('float32', False, (3,), [3.0, 5.0, 7.0]),
    'reduce_add_init': ('float32', False, (), 25.0),
    'reduce_max': ('int32', False, (2,), [7, 4]),
    'reduce_max_init': ('int32', False, (2,), [7, 5]),
    'reduce_min_empty': ('float32', False, (2,), [7.0, 7.0]),
    'reduce_tuple': ('seq', ('float32', False, (), 3.0), ('int32', False, (), 12)),
    'reduce_lambda': ('float32', False, (), 3.0),
    'reduce_sum_axes': ('int32', False, (3,), [60, 92, 124]),
    'reduce_sum_err_axis': ('raises', 'ValueError', 'reduction axes (2,) contains out-of-bounds indices for int32[2,3].'),
    'reduce_sum_err_dup': ('raises', 'ValueError', "duplicate value in 'axes' of reduction: (0, 0)"),
    'reduce_sum_bool': ('raises', 'TypeError', 'reduce_sum does not accept dtype bool. Accepted dtypes are subtypes of number.'),
    'reduce_max_complex': ('complex64', False, (), (1+3j)),
    'reduce_max_empty_int8': ('int8', False, (3,), [-128, -128, -128]),
    'reduce_and_int': ('int32', False, (), 2),
    'reduce_or_int': ('int32', False, (), 7),
    'reduce_xor_int': ('int32', False, (), 5),
    'reduce_and_empty_uint': ('uint8', False, (), 255),
    'reduce_and_float': ('raises', 'TypeError', 'logical reduction requires operand dtype bool or int, got float32.'),
    'argmax': ('int32', False, (2,), [1, 0]),
    'argmax_nan': ('int32', False, (), 1),
    'argmin_nan': ('int32', False, (), 1),
    'argmin_zeros': ('int32', False, (), 0),
    'argmax_bool': ('int32', False, (), 0),
    'argmax_uint8_index': ('uint8', False, (3,), [1, 1, 1]),
    'argmax_err_empty': ('raises', 'ValueError', 'argmin and argmax require non-empty reduced dimension. operand.shape=(2, 0) axis=1'),
    'argmax_err_axis': ('raises', 'ValueError', 'Invalid axis 2 for operand shape (2, 3)'),
    'argmax_err_index_dtype': ('raises', 'TypeError', 'index_dtype must be an integer type, but got float32'),
    'cumsum': ('int32', False, (2, 3), [[0, 1, 3], [3, 7, 12]]),
    'cumsum_reverse': ('int32', False, (2, 3), [[3, 3, 2], [12, 9, 5]]),
    'cumsum_axis0_reverse': ('int32', False, (2, 3), [[3, 5, 7], [3, 4, 5]]),
    'cumprod_wrap': ('int8', False, (4,), [2, 6, 24, 120]),
    'cummax_nan': ('float32', False, (4,), [1.0, nan, nan, nan]),
    'cummin_reverse': ('uint8', False, (3,), [1, 1, 2]),
    'cummax_complex': ('complex64', False, (3,), [(1+1j), (2+0j), (2+0j)]),
    'cumlogsumexp': ('float32', False, (3,), [0.0, 0.6931471824645996, 1.0986123085021973]),
    'cumlogsumexp_reverse': ('float32', False, (3,), [1.0, 1.0, 1.0]),
    'cumsum_empty': ('float32', False, (0, 2), []),
    'cumsum_err_bool': ('raises', 'TypeError', 'cumsum does not accept dtype bool. Accepted dtypes are subtypes of number.'),
    'cumsum_err_axis': ('raises', 'ValueError', 'axis 2 is out of bounds for array of shape (2, 3)'),
    'cumsum_err_rank0': ('raises', 'ValueError', 'axis 0 is out of bounds for array of shape ()'),
    'bitcast_same': ('int32', False, (2,), [1065353216, -2147483648]),
    'bitcast_narrow': ('uint8', False, (2, 4), [[0, 0, 128, 63], [0, 0, 0, 64]]),
    'bitcast_widen': ('float32', False, (2,), [1.0, 2.0]),
    'bitcast_widen_f16': ('int32', False, (1,), [1073757184]),
    'bitcast_empty': ('int32', False, (0,), []),
    'bitcast_err_size': ('raises', 'ValueError', 'Attempting to convert array of shape (3,) from uint8 of size 8 bits to float32 of size 32, bits but 3 * 8 != 32'),
    'bitcast_err_rank0': ('raises', 'ValueError', 'Attempting to convert array of shape () from uint8 of size 8 bits to uint16 of size 16, bits but 1 * 8 != 16'),
    'bitcast_err_bool': ('raises', 'TypeError', "lax.bitcast_convert_type does not support bool or complex values unless the operand and destination types match. Got operand dtype=bool, new_dtype=dtype('uint8'). Consider using the arr.view() method instead."),
    'bitcast_err_complex': ('raises', 'TypeError', "lax.bitcast_convert_type does not support bool or complex values unless the operand and destination types match. Got operand dtype=complex64, new_dtype=dtype('float32'). Consider using the arr.view() method instead."),
    'convert_f32_i8': ('int8', False, (9,), [0, 127, -128, 127, 2, -2, 127, -128, 127]),
    'convert_f32_u8': ('uint8', False, (5,), [0, 0, 255, 255, 2]),
    'convert_f32_i32': ('int32', False, (4,), [0, 2147483520, 2147483647, -2147483648]),
    'convert_f32_u32': ('uint32', False, (4,), [0, 0, 4294967295, 2147483520]),
    'convert_f16_i32': ('int32', False, (4,), [0, 2147483647, 65504, -3]),
    'convert_to_bool': ('bool', False, (4,), [True, False, True, False]),
    'convert_c64_f32': ('float32', False, (2,), [1.0, -3.0]),
    'convert_c64_bool': ('bool', False, (3,), [True, False, False]),
    'convert_i32_i8': ('int8', False, (3,), [44, 127, -1]),
    'convert_i32_f16': ('float16', False, (3,), [inf, -inf, 2048.0]),
    'convert_f64_request': ('float32', False, (1,), [1.5]),
    'convert_u32_f32': ('float32', False, (1,), [4294967296.0]),
    'iota': ('int32', False, (4,), [0, 1, 2, 3]),
    'iota_empty': ('float32', False, (0,), []),
    'iota_f16': ('float16', False, (3,), [0.0, 1.0, 2.0]),
    'iota_complex': ('complex64', False, (3,), [0j, (1+0j), (2+0j)]),
    'iota_uint8_wrap': ('uint8', False, (300,), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95, 96, 97, 98, 99, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113, 114, 115, 116, 117, 118, 119, 120, 121, 122, 123, 124, 125, 126, 127, 128, 129, 130, 131, 132, 133, 134, 135, 136, 137, 138, 139, 140, 141, 142, 143, 144, 145, 146, 147, 148, 149, 150, 151, 152, 153, 154, 155, 156, 157, 158, 159, 160, 161, 162, 163, 164, 165, 166, 167, 168, 169, 170, 171, 172, 173, 174, 175, 176, 177, 178, 179, 180, 181, 182, 183, 184, 185, 186, 187, 188, 189, 190, 191, 192, 193, 194, 195, 196, 197, 198, 199, 200, 201, 202, 203, 204, 205, 206, 207, 208, 209, 210, 211, 212, 213, 214, 215, 216, 217, 218, 219, 220, 221, 222, 223, 224, 225, 226, 227, 228, 229, 230, 231, 232, 233, 234, 235, 236, 237, 238, 239, 240, 241, 242, 243, 244, 245, 246, 247, 248, 249, 250, 251, 252, 253, 254, 255, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43]),
    'broadcasted_iota': ('int8', False, (2, 3), [[0, 1, 2], [0, 1, 2]]),
    'broadcasted_iota_dim0': ('float32', False, (3, 2), [[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]]),
    'broadcasted_iota_empty': ('int32', False, (2, 0, 3), [[], []]),
    'iota_err_dim': ('raises', 'ValueError', 'iota dimension must be between 0 and len(shape), got dimension=2 for shape=(2, 3)'),
    'iota_err_bool': ('raises', 'TypeError', 'iota does not accept dtype bool. Accepted dtypes are subtypes of integer, floating, complexfloating.'),
    'iota_err_negative': ('raises', 'TypeError', 'iota shape must have every element be nonnegative, got (-1,).'),
    'pad_interior': ('int32', False, (6, 2), [[-1, -1], [0, 1], [-1, -1], [3, 4], [-1, -1], [-1, -1]]),
    'pad_negative': ('int32', False, (2, 5), [[-1, -1, -1, -1, -1], [-1, -1, -1, -1, -1]]),
    'pad_negative_interior': ('int32', False, (2, 3), [[-1, -1, 2], [-1, -1, 5]]),
    'pad_empty': ('int32', False, (2, 2), [[7, 7], [7, 7]]),
    'pad_rank0': ('float32', False, (), 3.0),
    'pad_weak_value': ('float32', False, (3, 4), [[0.0, 0.0, 0.0, 0.0], [0.0, 1.0, 2.0, 0.0], [3.0, 4.0, 5.0, 0.0]]),
    'pad_err_dtype': ('raises', 'TypeError', 'pad operand and padding_value must be same dtype: got float16 and float32.'),
    'pad_err_value_shape': ('raises', 'ValueError', 'padding_value must be a scalar; got np.shape(padding_value)=(1,)'),
    'pad_err_config': ('raises', 'ValueError', 'length of padding_config must equal the number of axes of operand, got padding_config ((1, 1, 0),) for operand shape (2, 3)'),
    'pad_err_interior': ('raises', 'ValueError', 'interior padding in padding_config must be nonnegative, got padding_config ((1, 1, -1), (0, 0, 0))'),
    'pad_err_negative_size': ('raises', 'ValueError', 'Dimension size after padding is not at least 0, got result shape (-1, 3), for padding_config ((-2, -2, 1), (0, 0, 0)) and operand shape (2, 3)'),
    'select_n_bool': ('float32', False, (2, 3), [[0.0, 1.0, 20.0], [3.0, 4.0, 50.0]]),
    'select_n_scalar_pred': ('float32', False, (2, 3), [[0.0, 10.0, 20.0], [30.0, 40.0, 50.0]]),
    'select_n_int': ('float32', False, (2, 3), [[0.0, 10.0, 200.0], [300.0, 40.0, 5.0]]),
    'select_n_uint8': ('float32', False, (2, 3), [[0.0, 2.0, 4.0], [6.0, 8.0, 10.0]]),
    'select_n_one_case': ('float32', False, (2, 3), [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]),
    'select': ('float32', False, (2, 3), [[0.0, 10.0, 2.0], [30.0, 40.0, 5.0]]),
    'select_n_err_none': ('raises', 'ValueError', 'select_n() must have at least one case'),
    'select_n_err_shapes': ('raises', 'TypeError', 'select cases must have the same shapes, got [(2, 3), (3,)].'),
    'select_n_err_pred_shape': ('raises', 'TypeError', 'select `which` must be scalar or have the same shape as cases, got `which` shape (2,) but case shape (3,).'),
    'select_n_err_pred_dtype': ('raises', 'TypeError', 'select `which` must be boolean or integer type, got float32.'),
    'select_n_err_bool_cases': ('raises', 'TypeError', 'select with boolean `which` cannot have > 2 cases.'),
    'select_n_err_dtypes': ('raises', 'TypeError', 'lax.select requires arguments to have the same dtypes, got float32, int32. (Tip: jnp.where is a similar function that does automatic type promotion on inputs).'),
    'clamp': ('float32', False, (2, 3), [[1.0, 1.0, 2.0], [3.0, 4.0, 4.0]]),
    'clamp_weak': ('float32', False, (2, 3), [[1.0, 1.0, 2.0], [3.0, 4.0, 4.0]]),
    'clamp_arrays': ('float32', False, (2, 3), [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]),
    'clamp_inverted': ('int32', False, (3,), [2, 2, 2]),
    'clamp_nan': ('float32', False, (3,), [nan, 0.0, 1.0]),
    'clamp_bool': ('bool', False, (2,), [True, False]),
    'clamp_err_dtype': ('raises', 'TypeError', 'lax.clamp requires arguments to have the same dtypes, got float32, float16, float32.'),
    'clamp_err_shape': ('raises', 'TypeError', 'clamp requires min.shape == operand.shape or min.shape == (), got min.shape=(2,), operand.shape=(3,).'),
    'broadcast_in_dim': ('float32', False, (2, 3, 4), [[[0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0], [2.0, 2.0, 2.0, 2.0]], [[3.0, 3.0, 3.0, 3.0], [4.0, 4.0, 4.0, 4.0], [5.0, 5.0, 5.0, 5.0]]]),
    'broadcast_in_dim_ones': ('float32', False, (5, 2, 3), [[[0.0, 1.0, 2.0], [0.0, 1.0, 2.0]], [[0.0, 1.0, 2.0], [0.0, 1.0, 2.0]], [[0.0, 1.0, 2.0], [0.0, 1.0, 2.0]], [[0.0, 1.0, 2.0], [0.0, 1.0, 2.0]], [[0.0, 1.0, 2.0], [0.0, 1.0, 2.0]]]),
    'broadcast_in_dim_transposing': ('float32', False, (3, 2), [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]),
    'broadcast_in_dim_scalar': ('float32', True, (2,), [1.0, 1.0]),
    'broadcast_in_dim_err_size': ('raises', 'TypeError', 'broadcast_in_dim operand dimension sizes must either be 1, or be equal to their corresponding dimensions in the target broadcast shape; got operand of shape (2, 3), target broadcast shape (2, 4), broadcast_dimensions (0, 1) '),
    'broadcast_in_dim_err_len': ('raises', 'TypeError', 'broadcast_in_dim broadcast_dimensions must have length equal to operand ndim; got broadcast_dimensions (0,) for operand ndim 2.'),
    'broadcast_in_dim_err_range': ('raises', 'TypeError', 'broadcast_in_dim broadcast_dimensions must be a subset of output dimensions, got (0, 5) for operand ndim 2 and shape (2, 3).'),
    'broadcast_in_dim_err_negative': ('raises', 'TypeError', 'broadcast_in_dim shape must have every element be nonnegative, got (2, -3).'),
    'broadcast': ('float32', False, (4, 2, 3), [[[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]], [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]], [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]], [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]]),
    'reshape': ('int32', False, (3, 2), [[0, 1], [2, 3], [4, 5]]),
    'reshape_dimensions': ('int32', False, (3, 2), [[0, 3], [1, 4], [2, 5]]),
    'reshape_err_dimensions': ('raises', 'TypeError', 'reshape dimensions must be a permutation of operand dimensions, got dimensions (0, 0) for shape (2, 3).'),
    'reshape_err_negative': ('raises', 'TypeError', 'reshape new_sizes must all be positive, got (-1, 2).'),
    'transpose': ('int32', False, (4, 2, 3), [[[0, 4, 8], [12, 16, 20]], [[1, 5, 9], [13, 17, 21]], [[2, 6, 10], [14, 18, 22]], [[3, 7, 11], [15, 19, 23]]]),
    'transpose_err': ('raises', 'TypeError', "transpose permutation isn't a permutation of operand dimensions, got permutation (0, 0) for operand shape (2, 3)."),
    'squeeze': ('float32', False, (3,), [1.0, 1.0, 1.0]),
    'squeeze_negative': ('float32', False, (1, 3), [[1.0, 1.0, 1.0]]),
    'squeeze_err_size': ('raises', 'ValueError', 'cannot select an axis to squeeze out which has size not equal to one, got shape=(1, 3, 1) and dimensions=(1,)'),
    'squeeze_err_range': ('raises', 'ValueError', 'axis 3 is out of bounds for array of dimension 3'),
    'expand_dims': ('float32', False, (1, 2, 3, 1), [[[[0.0], [1.0], [2.0]], [[3.0], [4.0], [5.0]]]]),
    'rev': ('int32', False, (2, 3), [[5, 4, 3], [2, 1, 0]]),
    'rev_err_range': ('raises', 'TypeError', 'rev dimensions must all be less than operand ndim, got dimensions (2,) for operand ndim 2.'),
    'rev_err_dup': ('raises', 'TypeError', 'rev dimensions must be unique, got (0, 0).'),
    'slice': ('int32', False, (2, 2), [[1, 2], [4, 5]]),
    'slice_strides': ('int32', False, (2, 2), [[1, 3], [16, 18]]),
    'slice_in_dim': ('int32', False, (4, 2), [[1, 3], [6, 8], [11, 13], [16, 18]]),
    'slice_in_dim_negative': ('int32', False, (2, 5), [[5, 6, 7, 8, 9], [10, 11, 12, 13, 14]]),
    'index_in_dim': ('int32', False, (4,), [4, 9, 14, 19]),
    'index_in_dim_err': ('raises', 'IndexError', 'index 5 is out of bounds for axis 1 with size 5'),
    'concatenate': ('int32', False, (2, 6), [[0, 1, 2, 0, 2, 4], [3, 4, 5, 6, 8, 10]]),
    'concatenate_three': ('int32', False, (5, 3), [[0, 1, 2], [3, 4, 5], [0, 1, 2], [3, 4, 5], [0, 0, 0]]),
    'concatenate_err_empty': ('raises', 'ValueError', 'concatenate requires a non-empty sequences of arrays'),
    'concatenate_err_dtype': ('raises', 'TypeError', 'lax.concatenate requires arguments to have the same dtypes, got float32, int32. (Tip: jnp.concatenate is a similar function that does automatic type promotion on inputs).'),
    'concatenate_err_shape': ('raises', 'TypeError', 'Cannot concatenate arrays with shapes that differ in dimensions other than the one being concatenated: concatenating along dimension 0 for shapes (2, 3), (2, 4).'),
    'concatenate_err_rank': ('raises', 'TypeError', 'Cannot concatenate arrays with different numbers of dimensions: got (2, 3), (3,).'),
    'concatenate_err_dim': ('raises', 'TypeError', 'concatenate dimension out of bounds: dimension 2 for shapes (2, 3), (2, 3).'),
    'full': ('float32', True, (2, 2), [[3.0, 3.0], [3.0, 3.0]]),
    'full_dtype': ('int8', False, (2,), [3, 3]),
    'full_like': ('int32', False, (2, 3), [[7, 7, 7], [7, 7, 7]]),
}


def _check(got, want, label):
    if want[0] == "seq":
        assert isinstance(got, (tuple, list)) and len(got) == len(want) - 1, label
        for g, w in zip(got, want[1:]):
            _check(g, w, label)
        return
    dtype, weak, shape, values = want
    value = np.asarray(got)
    assert (str(value.dtype), bool(getattr(got, "weak_type", False)), value.shape) == \
        (dtype, weak, shape), label
    expected = np.array(values, dtype=dtype).reshape(shape)
    if value.dtype.kind in "fc":
        np.testing.assert_allclose(value, expected, rtol=2e-6, atol=0, err_msg=label)
        real = np.real(value) if value.dtype.kind == "c" else value
        exp_real = np.real(expected) if value.dtype.kind == "c" else expected
        assert np.array_equal(np.signbit(real) & ~np.isnan(real),
                              np.signbit(exp_real) & ~np.isnan(exp_real)), f"{label}: sign of zero"
    else:
        np.testing.assert_array_equal(value, expected, err_msg=label)


NS = {"np": np, "lax": lax}
exec(compile(SETUP, "<lax cases>", "exec"), NS)


def test_cases_are_all_recorded():
    assert [label for label, _ in NS["CASES"]] == list(EXPECTED)


@pytest.mark.parametrize("label,expr", NS["CASES"], ids=[c[0] for c in NS["CASES"]])
def test_matches_jax(label, expr):
    want = EXPECTED[label]
    if want[0] == "raises":
        _, exc_name, message = want
        with pytest.raises(Exception) as info:
            eval(expr, NS)
        assert type(info.value).__name__ == exc_name, (label, info.value)
        assert str(info.value).split("\n")[0].rstrip() == message.rstrip(), label
    else:
        _check(eval(expr, NS), want, label)


# ------------------------------------------------------------- properties against NumPy

from hypothesis import given, settings, strategies as st  # noqa: E402
import hypothesis.extra.numpy as hnp  # noqa: E402

SETTINGS = settings(max_examples=25, deadline=None)
DTYPES = [np.int8, np.int32, np.uint8, np.float16, np.float32]


@st.composite
def _broadcastable_pair(draw):
    """Two shapes lax accepts: equal ranks with size-1 axes, or one of them rank 0."""
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=3))
    other = tuple(draw(st.sampled_from([d, 1])) for d in shape)
    a, b = draw(st.permutations([shape, draw(st.sampled_from([other, ()]))]))
    dtype = draw(st.sampled_from(DTYPES))
    elements = st.integers(-5, 5) if np.dtype(dtype).kind == "i" else st.integers(0, 9)
    return (draw(hnp.arrays(dtype, a, elements=elements)),
            draw(hnp.arrays(dtype, b, elements=elements)))


@SETTINGS
@given(pair=_broadcastable_pair(), op=st.sampled_from(["add", "sub", "mul", "max", "min"]))
def test_binary_ops_broadcast_rank0_and_unit_axes(pair, op):
    x, y = pair
    out = getattr(lax, op)(x, y)
    ref = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "max": np.maximum,
           "min": np.minimum}[op](x, y)
    assert out.dtype == x.dtype and not out.weak_type
    np.testing.assert_array_equal(np.asarray(out), ref)


@SETTINGS
@given(x=hnp.arrays(np.float32, hnp.array_shapes(min_dims=0, max_dims=2, max_side=3),
                    elements=st.floats(-10, 10, width=32)),
       scalar=st.floats(-10, 10, width=32))
def test_weak_python_scalar_keeps_the_array_dtype(x, scalar):
    out = lax.mul(x, scalar)
    assert out.dtype == np.float32 and not out.weak_type
    np.testing.assert_array_equal(np.asarray(out), x * np.float32(scalar))
    assert lax.mul(scalar, scalar).weak_type


@SETTINGS
@given(x=hnp.arrays(np.int32, hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=4),
                    elements=st.integers(-9, 9)),
       data=st.data())
def test_dynamic_slice_clamps_like_numpy_reference(x, data):
    sizes = [data.draw(st.integers(0, d)) for d in x.shape]
    starts = [data.draw(st.integers(-2 * d - 2, 2 * d + 2)) for d in x.shape]
    out = lax.dynamic_slice(x, starts, sizes)
    # JAX: negative starts count from the end, then the window is clamped into range.
    fixed = [min(max(s + d if s < 0 else s, 0), d - z) for s, z, d in zip(starts, sizes,
                                                                         x.shape)]
    ref = x[tuple(slice(s, s + z) for s, z in zip(fixed, sizes))]
    np.testing.assert_array_equal(np.asarray(out), ref)
    upd = np.full(sizes, -1, np.int32)
    out = lax.dynamic_update_slice(x, upd, starts)
    ref = x.copy()
    ref[tuple(slice(s, s + z) for s, z in zip(fixed, sizes))] = upd
    np.testing.assert_array_equal(np.asarray(out), ref)


@SETTINGS
@given(x=hnp.arrays(np.int32, hnp.array_shapes(min_dims=1, max_dims=2, min_side=0, max_side=5),
                    elements=st.integers(-3, 3)),
       data=st.data())
def test_top_k_is_a_stable_descending_sort(x, data):
    k = data.draw(st.integers(0, x.shape[-1]))
    vals, idx = lax.top_k(x, k)
    order = np.argsort(-x.astype(np.int64), axis=-1, kind="stable")[..., :k]
    np.testing.assert_array_equal(np.asarray(idx), order)
    np.testing.assert_array_equal(np.asarray(vals), np.take_along_axis(x, order, -1))


@SETTINGS
@given(x=hnp.arrays(np.int32, hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=4),
                    elements=st.integers(-4, 4)),
       data=st.data(), op=st.sampled_from(["cumsum", "cumprod", "cummax", "cummin"]))
def test_cumulative_ops_with_reverse(x, data, op):
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    reverse = data.draw(st.booleans())
    out = getattr(lax, op)(x, axis=axis, reverse=reverse)
    ufunc = {"cumsum": np.add, "cumprod": np.multiply, "cummax": np.maximum,
             "cummin": np.minimum}[op]
    src = np.flip(x, axis) if reverse else x
    ref = ufunc.accumulate(src, axis=axis, dtype=np.int32)
    np.testing.assert_array_equal(np.asarray(out), np.flip(ref, axis) if reverse else ref)


def test_select_n_broadcasts_rank0_cases_as_a_kiln_extension():
    # JAX 0.10.2 rejects this ("select cases must have the same shapes, got [(2, 3), ()]");
    # kiln's elementwise primitives, select_n included, broadcast rank-0 operands.
    f = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = lax.select_n(f > 2, f, np.float32(-1))
    np.testing.assert_array_equal(np.asarray(out), np.where(f > 2, -1, f))
    out = lax.select_n(np.array([[0, 1, 2], [2, 1, 0]], np.int32), np.float32(7), f, f * 10)
    np.testing.assert_array_equal(np.asarray(out), [[7, 1, 20], [30, 4, 7]])
