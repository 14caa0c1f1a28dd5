"""ttjax's implementation, one sub-package per layer; not a public API (import ``ttjax``).

``core`` (vocabulary, mesh, tensor, dispatch, plan) < ``ttnn`` (TT-NN's ops, collectives, host
conversion, trace) < ``tools`` (inspect, cost, visualize) and ``launch`` (``ttjax-run``). Each
public module of ``ttjax`` re-exports one module here; docs/architecture.md has the table.
"""
