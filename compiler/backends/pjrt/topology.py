"""Compiling for a device topology without its devices (TPUs, through libtpu).

`compile_for(table, name, code, options)` asks a plug-in for the topology `name` (for libtpu
"v5e:2x2", "v4:2x2x1", ...: `PJRT_TopologyDescription_Create`, no device needed), compiles
the StableHLO module `code` (MLIR bytes) for it with `PJRT_Compile` (`options(ids)`: the
serialized CompileOptionsProto for the topology's device ids, in the topology's order, which
puts the module's replicas or partitions on the first of them) and returns a `ForTopology`:
the plug-in's serialization of the executable (`PJRT_Executable_Serialize`; what
`PJRT_Executable_DeserializeAndLoad` loads on a machine with that topology), the topology's
platform name and version, the kinds and ids of its devices. Every
PJRT object made here is destroyed before it returns; a plug-in error (an unknown topology, a
module it cannot compile) is a PjrtError with its message.
"""
import ctypes as C
from typing import NamedTuple

from . import api, compile_cache


class ForTopology(NamedTuple):
    topology: str
    platform: str
    platform_version: str
    device_kinds: tuple
    serialized: bytes
    device_ids: tuple


def compile_for(table, name, code, options):
    """`code` compiled for the topology `name` of the plug-in `table` (see above)."""
    encoded = name.encode()
    topology = table.call("TopologyDescription_Create", api.args(
        api.TopologyCreate, topology_name=encoded, topology_name_size=len(encoded))).topology
    try:
        platform = table.string("TopologyDescription_PlatformName", api.TopologyString,
                                topology=topology)
        version = table.string("TopologyDescription_PlatformVersion", api.TopologyString,
                               topology=topology)
        listed = table.call("TopologyDescription_GetDeviceDescriptions", api.args(
            api.TopologyDevices, topology=topology))
        described = [listed.descriptions[i] for i in range(listed.num_descriptions)]
        kinds = tuple(table.string("DeviceDescription_Kind", api.DescriptionString,
                                   device_description=d) for d in described)
        ids = tuple(table.call("DeviceDescription_Id", api.args(
            api.DescriptionInt, device_description=d)).value for d in described)
        options = options(ids)
        text = C.create_string_buffer(code, len(code))
        program = api.args(api.Program, code=C.addressof(text), code_size=len(code),
                           format=b"mlir", format_size=4)
        executable = table.call("Compile", api.args(
            api.Compile, topology=topology, program=C.pointer(program),
            compile_options=C.cast(C.c_char_p(options), C.c_void_p),
            compile_options_size=len(options))).executable
        try:
            serialized = compile_cache.serialize_executable(table, executable)
        finally:
            table.call("Executable_Destroy", api.args(api.Executable, executable=executable))
    finally:
        table.call("TopologyDescription_Destroy", api.args(api.Topology, topology=topology))
    return ForTopology(name, platform, version, kinds, serialized, ids)
