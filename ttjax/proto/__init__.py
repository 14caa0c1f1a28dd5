"""The MGD 2.0 schema (``mesh_graph_descriptor.proto``) and its protoc-generated Python module."""
