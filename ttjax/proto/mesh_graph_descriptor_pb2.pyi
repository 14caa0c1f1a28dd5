from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GraphTopology(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    INVALID_TOPOLOGY: _ClassVar[GraphTopology]
    ALL_TO_ALL: _ClassVar[GraphTopology]
    RING: _ClassVar[GraphTopology]

class Policy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    INVALID_POLICY: _ClassVar[Policy]
    STRICT: _ClassVar[Policy]
    RELAXED: _ClassVar[Policy]

class Architecture(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    INVALID_ARCHITECTURE: _ClassVar[Architecture]
    WORMHOLE_B0: _ClassVar[Architecture]
    BLACKHOLE: _ClassVar[Architecture]
INVALID_TOPOLOGY: GraphTopology
ALL_TO_ALL: GraphTopology
RING: GraphTopology
INVALID_POLICY: Policy
STRICT: Policy
RELAXED: Policy
INVALID_ARCHITECTURE: Architecture
WORMHOLE_B0: Architecture
BLACKHOLE: Architecture

class MeshGraphDescriptor(_message.Message):
    __slots__ = ("mesh_descriptors", "graph_descriptors", "top_level_instance")
    MESH_DESCRIPTORS_FIELD_NUMBER: _ClassVar[int]
    GRAPH_DESCRIPTORS_FIELD_NUMBER: _ClassVar[int]
    TOP_LEVEL_INSTANCE_FIELD_NUMBER: _ClassVar[int]
    mesh_descriptors: _containers.RepeatedCompositeFieldContainer[MeshDescriptor]
    graph_descriptors: _containers.RepeatedCompositeFieldContainer[GraphDescriptor]
    top_level_instance: NodeRef
    def __init__(self, mesh_descriptors: _Optional[_Iterable[_Union[MeshDescriptor, _Mapping]]] = ..., graph_descriptors: _Optional[_Iterable[_Union[GraphDescriptor, _Mapping]]] = ..., top_level_instance: _Optional[_Union[NodeRef, _Mapping]] = ...) -> None: ...

class MeshDescriptor(_message.Message):
    __slots__ = ("name", "arch", "device_topology", "channels", "host_topology", "express_connections")
    class ExpressConnection(_message.Message):
        __slots__ = ("src", "dst")
        SRC_FIELD_NUMBER: _ClassVar[int]
        DST_FIELD_NUMBER: _ClassVar[int]
        src: int
        dst: int
        def __init__(self, src: _Optional[int] = ..., dst: _Optional[int] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    ARCH_FIELD_NUMBER: _ClassVar[int]
    DEVICE_TOPOLOGY_FIELD_NUMBER: _ClassVar[int]
    CHANNELS_FIELD_NUMBER: _ClassVar[int]
    HOST_TOPOLOGY_FIELD_NUMBER: _ClassVar[int]
    EXPRESS_CONNECTIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    arch: Architecture
    device_topology: TorusTopology
    channels: Channels
    host_topology: MeshTopology
    express_connections: _containers.RepeatedCompositeFieldContainer[MeshDescriptor.ExpressConnection]
    def __init__(self, name: _Optional[str] = ..., arch: _Optional[_Union[Architecture, str]] = ..., device_topology: _Optional[_Union[TorusTopology, _Mapping]] = ..., channels: _Optional[_Union[Channels, _Mapping]] = ..., host_topology: _Optional[_Union[MeshTopology, _Mapping]] = ..., express_connections: _Optional[_Iterable[_Union[MeshDescriptor.ExpressConnection, _Mapping]]] = ...) -> None: ...

class GraphDescriptor(_message.Message):
    __slots__ = ("name", "type", "instances", "channels", "graph_topology", "connections")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    INSTANCES_FIELD_NUMBER: _ClassVar[int]
    CHANNELS_FIELD_NUMBER: _ClassVar[int]
    GRAPH_TOPOLOGY_FIELD_NUMBER: _ClassVar[int]
    CONNECTIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    type: str
    instances: _containers.RepeatedCompositeFieldContainer[NodeRef]
    channels: Channels
    graph_topology: GraphTopology
    connections: _containers.RepeatedCompositeFieldContainer[Connection]
    def __init__(self, name: _Optional[str] = ..., type: _Optional[str] = ..., instances: _Optional[_Iterable[_Union[NodeRef, _Mapping]]] = ..., channels: _Optional[_Union[Channels, _Mapping]] = ..., graph_topology: _Optional[_Union[GraphTopology, str]] = ..., connections: _Optional[_Iterable[_Union[Connection, _Mapping]]] = ...) -> None: ...

class NodeRef(_message.Message):
    __slots__ = ("mesh", "graph")
    MESH_FIELD_NUMBER: _ClassVar[int]
    GRAPH_FIELD_NUMBER: _ClassVar[int]
    mesh: MeshRef
    graph: GraphRef
    def __init__(self, mesh: _Optional[_Union[MeshRef, _Mapping]] = ..., graph: _Optional[_Union[GraphRef, _Mapping]] = ...) -> None: ...

class GraphRef(_message.Message):
    __slots__ = ("graph_descriptor", "graph_id", "mesh", "graph")
    GRAPH_DESCRIPTOR_FIELD_NUMBER: _ClassVar[int]
    GRAPH_ID_FIELD_NUMBER: _ClassVar[int]
    MESH_FIELD_NUMBER: _ClassVar[int]
    GRAPH_FIELD_NUMBER: _ClassVar[int]
    graph_descriptor: str
    graph_id: int
    mesh: MeshRef
    graph: GraphRef
    def __init__(self, graph_descriptor: _Optional[str] = ..., graph_id: _Optional[int] = ..., mesh: _Optional[_Union[MeshRef, _Mapping]] = ..., graph: _Optional[_Union[GraphRef, _Mapping]] = ...) -> None: ...

class MeshRef(_message.Message):
    __slots__ = ("mesh_descriptor", "mesh_id", "device_id")
    MESH_DESCRIPTOR_FIELD_NUMBER: _ClassVar[int]
    MESH_ID_FIELD_NUMBER: _ClassVar[int]
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    mesh_descriptor: str
    mesh_id: int
    device_id: int
    def __init__(self, mesh_descriptor: _Optional[str] = ..., mesh_id: _Optional[int] = ..., device_id: _Optional[int] = ...) -> None: ...

class MeshTopology(_message.Message):
    __slots__ = ("dims",)
    DIMS_FIELD_NUMBER: _ClassVar[int]
    dims: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, dims: _Optional[_Iterable[int]] = ...) -> None: ...

class TorusTopology(_message.Message):
    __slots__ = ("dims", "dim_types", "types")
    class Type(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        INVALID_TYPE: _ClassVar[TorusTopology.Type]
        LINE: _ClassVar[TorusTopology.Type]
        RING: _ClassVar[TorusTopology.Type]
    INVALID_TYPE: TorusTopology.Type
    LINE: TorusTopology.Type
    RING: TorusTopology.Type
    DIMS_FIELD_NUMBER: _ClassVar[int]
    DIM_TYPES_FIELD_NUMBER: _ClassVar[int]
    TYPES_FIELD_NUMBER: _ClassVar[int]
    dims: _containers.RepeatedScalarFieldContainer[int]
    dim_types: _containers.RepeatedScalarFieldContainer[TorusTopology.Type]
    types: _containers.RepeatedScalarFieldContainer[TorusTopology.Type]
    def __init__(self, dims: _Optional[_Iterable[int]] = ..., dim_types: _Optional[_Iterable[_Union[TorusTopology.Type, str]]] = ..., types: _Optional[_Iterable[_Union[TorusTopology.Type, str]]] = ...) -> None: ...

class Channels(_message.Message):
    __slots__ = ("count", "policy")
    COUNT_FIELD_NUMBER: _ClassVar[int]
    POLICY_FIELD_NUMBER: _ClassVar[int]
    count: int
    policy: Policy
    def __init__(self, count: _Optional[int] = ..., policy: _Optional[_Union[Policy, str]] = ...) -> None: ...

class Connection(_message.Message):
    __slots__ = ("nodes", "channels", "directional")
    NODES_FIELD_NUMBER: _ClassVar[int]
    CHANNELS_FIELD_NUMBER: _ClassVar[int]
    DIRECTIONAL_FIELD_NUMBER: _ClassVar[int]
    nodes: _containers.RepeatedCompositeFieldContainer[NodeRef]
    channels: Channels
    directional: bool
    def __init__(self, nodes: _Optional[_Iterable[_Union[NodeRef, _Mapping]]] = ..., channels: _Optional[_Union[Channels, _Mapping]] = ..., directional: _Optional[bool] = ...) -> None: ...
