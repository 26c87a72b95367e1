"""A StableHLO module compiled as one replica (or one partition) per device: what `pmap`
(replicas) and sharded `jit` and `shard_map` (partitions) run on PJRT devices.

`ReplicatedExecutable(client, mlir_text, in_avals, out_avals, devices)` compiles a module
whose `mhlo.num_replicas` is `len(devices)` (its collectives name replicas 0 .. n-1 in
`replica_groups`) with compile options that put replica i on `devices[i]`
(client.compile_options). `executable(argument_lists)` takes one list of inputs per device
(Buffers of that device, or host arrays, passed as zero-copy buffers for the call), checks
each against `in_avals`, runs every replica in one `PJRT_LoadedExecutable_Execute` with
`num_devices` argument lists and returns one list of Buffers per device. With host inputs it
awaits every device's completion event first (the host memory is lent for the call only; an
execution's error is raised after all are awaited); with Buffers only it returns once the
execution is enqueued, and the results' ready events carry an execution's error, as
client.Executable's do.

With `partitioned=True` the module has `mhlo.num_partitions` = `len(devices)` and sharding
attributes on its arguments and results; XLA's SPMD partitioner splits it, partition i on
`devices[i]`, and `in_avals`/`out_avals` are then each device's blocks (the shapes the
partitioned program takes and gives); `shardy=True` compiles it with the Shardy partitioner,
for a module whose shardings are Shardy's (`sdy.sharding`). An output aval given as None is a
result whose sharding XLA chooses (the module gives it none; allow_spmd_sharding_propagation_
to_output): after the compile its block's aval is the one the plug-in reports and `chosen`
holds XLA's tiling of every result (shardings.output_shardings; None where the plug-in does
not say, and then `out_avals` too where it does not report its results).

`serialized` (bytes of `serialize()`, `PJRT_Executable_Serialize`) loads the plug-in's
executable instead of compiling the module (`PJRT_Executable_DeserializeAndLoad`, with the
compile options the module would be compiled with; `propagate`, one bool per result, marks
the results whose shardings XLA chose when it compiled them, their blocks given in
`out_avals`).
"""
import ctypes as C
import sys

from . import api, compile_cache
from .client import (Buffer, _results, avals_of, check_inputs, check_results,
                     close_executable, compile_options)
from .shardings import output_shardings


class ReplicatedExecutable:
    """A module compiled with one replica per device of `devices` (module docstring)."""

    def __init__(self, client, mlir_text, in_avals, out_avals, devices, partitioned=False,
                 shardy=False, serialized=None, propagate=None):
        self.client = client
        self.devices = [client.device(d) for d in devices]
        self.in_avals = avals_of(in_avals)
        self.propagate = [a is None for a in out_avals] if propagate is None else propagate
        options = compile_options(*(d.id for d in self.devices), partitioned=partitioned,
                                  shardy=shardy, propagate=self.propagate)
        if serialized is None:
            self.handle, self._serialized = compile_cache.compile(client, mlir_text.encode(),
                                                                  options)
        else:
            self.handle = compile_cache.load(client, serialized, options)
            self._serialized = serialized
        self._options = api.args(api.ExecuteOptions)
        self.chosen = None
        try:
            if None in out_avals:   # the blocks XLA chose, as the plug-in reports them
                table = client.api
                produced = _results(table, self.handle) or [None] * len(out_avals)
                out_avals = [p if a is None else avals_of([a])[0]
                             for a, p in zip(out_avals, produced)]
                self.chosen = output_shardings(table, self.handle, len(out_avals))
                self.out_avals = None if None in out_avals else out_avals
            else:
                self.out_avals = avals_of(out_avals)
            if self.out_avals is not None:
                check_results(client.api, self.handle, self.out_avals)
        except Exception:
            self.close()
            raise

    def serialize(self):
        """The plug-in's serialization of this executable (bytes): the ones it was loaded from
        where the disk cache or `serialized` gave it (compile_cache.compile says why)."""
        if not self.handle:
            raise RuntimeError("this PJRT executable has been closed")
        if self._serialized is None:
            self._serialized = compile_cache.serialize_loaded(self.client.api, self.handle)
        return self._serialized

    def __call__(self, argument_lists):
        """Run replica i on `argument_lists[i]`; one list of Buffers per device, finished."""
        if not self.handle:
            raise RuntimeError("this PJRT executable has been closed")
        if len(argument_lists) != len(self.devices):
            raise TypeError(f"the executable runs {len(self.devices)} replicas, got "
                            f"{len(argument_lists)} argument lists")
        checked = [check_inputs(inputs, self.in_avals, self.client, device)
                   for inputs, device in zip(argument_lists, self.devices)]
        temporary = []
        try:
            rows = []
            for inputs, device in zip(checked, self.devices):
                row = []
                for x in inputs:
                    if not isinstance(x, Buffer):
                        x = self.client.put(x, device, zero_copy=True)
                        temporary.append(x)
                    row.append(x)
                rows.append(row)
            return self._run(rows, wait=bool(temporary))
        finally:
            for b in temporary:
                b.delete()

    def _run(self, rows, wait):
        n, num_args, num_outs = len(rows), len(self.in_avals), len(self.out_avals)
        arguments = [(C.c_void_p * max(1, num_args))(*[b._handle() for b in row])
                     for row in rows]
        outputs = [(C.c_void_p * max(1, num_outs))() for _ in rows]
        argument_lists = (C.c_void_p * n)(*map(C.addressof, arguments))
        output_lists = (C.c_void_p * n)(*map(C.addressof, outputs))
        events = (C.c_void_p * n)()
        table = self.client.api
        table.call("LoadedExecutable_Execute", api.args(
            api.Execute, executable=self.handle, options=C.pointer(self._options),
            argument_lists=C.addressof(argument_lists), num_devices=n, num_args=num_args,
            output_lists=C.addressof(output_lists),
            device_complete_events=events if wait else None))
        results = [[Buffer(self.client, handle, device, shape, dtype)
                    for handle, (shape, dtype) in zip(out[:num_outs], self.out_avals)]
                   for out, device in zip(outputs, self.devices)]
        if not wait:
            return results
        failed = None
        for event in events:
            try:
                self.client.wait(event)
            except api.PjrtError as error:
                failed = failed or error
        if failed is not None:
            raise failed
        return results

    # Read through the class, as client.Executable's: module globals may be None by then.
    _finalizing = staticmethod(sys.is_finalizing)

    def close(self):
        if not self._finalizing():
            close_executable(self)

    __del__ = close
