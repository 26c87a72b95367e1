"""`kiln.experimental.mesh_utils`: JAX's helpers that lay devices out in the array of a `Mesh`.

`create_device_mesh(mesh_shape, devices=None)` puts `devices` (default `kiln.devices()`) in
order into an object array of shape `mesh_shape`; their number must be the shape's product. JAX
reorders TPU devices along their physical interconnect first; kiln's devices (CPU, CUDA, PJRT)
have no physical topology kiln knows, so their order is kept, as JAX keeps the order of CPU and
GPU devices (`contiguous_submeshes` and `allow_split_physical_axes`, which concern TPU
topologies, are accepted and change nothing).

`create_hybrid_device_mesh(mesh_shape, dcn_mesh_shape, devices=None, process_is_granule=...)`
groups the devices into granules (their `slice_index`, or their `process_index` with
`process_is_granule=True`; kiln's devices have no `slice_index`, as JAX's CPU devices have
none), lays each granule out as `create_device_mesh(mesh_shape)` and places those blocks on the
`dcn_mesh_shape` grid: the result has shape `mesh_shape * dcn_mesh_shape`, granule g's block at
the g-th position of that grid in row-major order. Errors are JAX's `ValueError`s.
"""
import collections

import numpy as np

__all__ = ["create_device_mesh", "create_hybrid_device_mesh"]


def _all_devices():
    from ..devices import devices
    return devices()


def create_device_mesh(mesh_shape, devices=None, *, contiguous_submeshes=False,
                       allow_split_physical_axes=False):
    """An object array of shape `mesh_shape` holding `devices` (default: all) in order."""
    devices = list(_all_devices() if devices is None else devices)
    shape = tuple(int(n) for n in mesh_shape)
    if int(np.prod(shape, dtype=np.int64)) != len(devices):
        raise ValueError(f"Number of devices {len(devices)} must equal the product of "
                         f"mesh_shape {mesh_shape}")
    laid_out = np.empty(len(devices), dtype=object)
    laid_out[:] = devices
    return laid_out.reshape(shape)


def create_hybrid_device_mesh(mesh_shape, dcn_mesh_shape, devices=None, *,
                              process_is_granule=False, should_sort_granules_by_key=True,
                              allow_split_physical_axes=False):
    """A mesh of granule blocks: shape `mesh_shape * dcn_mesh_shape` (module docstring)."""
    devices = list(_all_devices() if devices is None else devices)
    key = "process_index" if process_is_granule else "slice_index"
    if not hasattr(devices[0], key):
        raise ValueError(f"Device {devices[0]} does not have attribute {key}. See "
                         f"`process_is_granule` option.")
    by_granule = collections.defaultdict(list)
    for device in devices:
        by_granule[getattr(device, key)].append(device)
    keys = sorted(by_granule) if should_sort_granules_by_key else list(by_granule)
    outer = tuple(int(n) for n in dcn_mesh_shape)
    inner = tuple(int(n) for n in mesh_shape)
    if int(np.prod(outer, dtype=np.int64)) != len(keys):
        raise ValueError(f"Number of slices {len(keys)} must equal the product of "
                         f"dcn_mesh_shape {dcn_mesh_shape}")
    blocks = [create_device_mesh(inner, by_granule[k],
                                 allow_split_physical_axes=allow_split_physical_axes)
              for k in keys]
    if len(outer) != len(inner):
        raise ValueError(f"mesh_shape {mesh_shape} and dcn_mesh_shape {dcn_mesh_shape} must "
                         f"have the same number of axes")
    mesh = np.empty(tuple(i * o for i, o in zip(inner, outer)), dtype=object)
    for position, block in zip(np.ndindex(*outer), blocks):
        mesh[tuple(slice(p * n, (p + 1) * n) for p, n in zip(position, inner))] = block
    return mesh
