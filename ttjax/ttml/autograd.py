"""TTML's ``ttml.autograd``: the process-wide ``AutoContext`` owning the device, seed and parallelism.

The call order is TTML's: (optionally) ``enable_fabric(n)``, then ``open_device([rows, cols])``,
then ``initialize_parallelism_context(DistributedConfig(...))``.

>>> ctx = AutoContext.get_instance()
>>> ctx.open_device([2, 4])            # checked against the mesh graph descriptor
>>> ctx.initialize_parallelism_context(DistributedConfig(enable_ddp=True, enable_tp=True))
>>> pc = ctx.get_parallelism_context(); pc.get_ddp_size(), pc.get_tp_size()
(2, 4)
>>> ctx.close_device()

Opening checks ``mesh_shape`` against the descriptor's ``device_topology`` (rule in
``ttjax.ttml.mgd``) before any device is touched, so a refused open leaves nothing open. A mesh of
one device needs no fabric and opens without a descriptor, unless ``enable_fabric`` chose one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

import jax
import numpy as np

import ttjax
from ttjax.errors import MeshShapeError
from ttjax.plan import ParallelDims
from ttjax.ttml.context import DistributedConfig, ParallelismContext
from ttjax.ttml.errors import AutoContextError, ParallelismContextError
from ttjax.ttml.mgd import MeshGraphDescriptor, fitting_meshes, select_mesh_graph_descriptor

#: TTML's default seed (``std::mt19937``'s default, 5489).
DEFAULT_SEED = 5489


def _mesh_shape(mesh_shape: Any) -> tuple[int, ...]:
    if mesh_shape is None:
        return (1, 1)
    dims = list(mesh_shape) if isinstance(mesh_shape, (list, tuple, ttjax.MeshShape)) else None
    ok = (
        dims is not None
        and len(dims) in (2, 3)
        and all(
            isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d > 0 for d in dims
        )
    )
    if not ok:
        raise AutoContextError(
            f"mesh_shape must be a list/tuple of 2 integers: [rows, cols] (got {mesh_shape!r}; "
            "ttjax also takes 3, [ddp, tp, pp]).\nfix: e.g. open_device([2, 4])."
        )
    return tuple(int(d) for d in dims)  # type: ignore[union-attr]


class AutoContext:
    """The singleton of TTML's ``ttml.autograd.AutoContext``; get it with :meth:`get_instance`."""

    _instance: ClassVar[AutoContext | None] = None

    def __init__(self) -> None:
        self._device: ttjax.MeshDevice | None = None
        self._mgd: MeshGraphDescriptor | None = None
        self._parallelism: ParallelismContext | None = None
        self._seed = DEFAULT_SEED
        self._key: jax.Array | None = None

    @staticmethod
    def get_instance() -> AutoContext:
        """The process-wide AutoContext."""
        if AutoContext._instance is None:
            AutoContext._instance = AutoContext()
        return AutoContext._instance

    def __repr__(self) -> str:
        dev = "closed" if self._device is None else f"{list(self._device.shape)}"
        mgd = None if self._mgd is None else self._mgd.path
        return (
            f"AutoContext(device={dev}, seed={self._seed}, mgd={mgd!r}, "
            f"parallelism={self._parallelism!r})"
        )

    # -- fabric and device ----------------------------------------------------------------------

    def enable_fabric(self, num_devices: int) -> MeshGraphDescriptor:
        """Choose and load the mesh graph descriptor for ``num_devices`` (before ``open_device``)."""
        if self._device is not None:
            raise AutoContextError(
                "enable_fabric was called after the device was created.\n"
                "fix: call enable_fabric(n) before open_device, or close_device() first."
            )
        self._mgd = select_mesh_graph_descriptor(num_devices)
        return self._mgd

    def get_mesh_graph_descriptor(self) -> MeshGraphDescriptor | None:
        """The descriptor in use (None before ``enable_fabric`` / a multi-device open)."""
        return self._mgd

    def open_device(
        self, mesh_shape: Any = None, device_ids: Sequence[int] | None = None
    ) -> ttjax.MeshDevice:
        """Open the training mesh (default ``[1, 1]``); TTML's ``open_device(mesh_shape, device_ids)``.

        Without ``enable_fabric``, a multi-device mesh picks its descriptor by device count. The
        shape is checked against the descriptor before any device opens.
        """
        if self._device is not None:
            raise AutoContextError(
                f"open_device was called after the device was created (open: "
                f"{list(self._device.shape)}).\nfix: call close_device() first."
            )
        shape = _mesh_shape(mesh_shape)
        have = ttjax.get_num_devices()
        if math.prod(shape) > have:
            raise MeshShapeError(
                f"mesh_shape {list(shape)} needs {math.prod(shape)} devices, and {have} exist here "
                f"({jax.default_backend()}). Meshes that fit, with a default descriptor: "
                f"{fitting_meshes(have)}.\nfix: set device_config.mesh_shape (or --mesh-shape) "
                f"to one of them; on the CPU, TTJAX_NUM_DEVICES={math.prod(shape)} gives more "
                "virtual devices."
            )
        mgd = self._mgd
        if mgd is None and math.prod(shape) > 1:
            mgd = select_mesh_graph_descriptor(math.prod(shape))
        if mgd is not None:
            mgd.check_mesh_shape(shape)
        ids = [int(i) for i in device_ids] if device_ids else []
        self._device = ttjax.open_mesh_device(ttjax.MeshShape(shape), physical_device_ids=ids)
        self._mgd = mgd
        return self._device

    def get_device(self) -> ttjax.MeshDevice:
        """The open training mesh."""
        if self._device is None:
            raise AutoContextError(
                "The device is not open.\nfix: call AutoContext.get_instance().open_device([rows, cols])."
            )
        return self._device

    def is_device_open(self) -> bool:
        return self._device is not None

    def close_device(self) -> None:
        """Close the mesh, disable the fabric and drop the parallelism context (which needs the mesh)."""
        if self._device is not None:
            ttjax.close_mesh_device(self._device)
        self._device = None
        self._mgd = None
        self._parallelism = None

    # -- parallelism ----------------------------------------------------------------------------

    def initialize_parallelism_context(
        self, config: DistributedConfig | ParallelDims
    ) -> ParallelismContext:
        """Assign DDP, TP, PP to mesh axes 0, 1, 2 (see ``ttjax.ttml.context``); once per device.

        ttjax also takes the plan itself (a ``ParallelDims`` of the open mesh's shape, such as
        ``load_config(...).device.dims``, checked when the config was read), so a run makes its
        plan once.
        """
        if self._parallelism is not None:
            raise ParallelismContextError(
                "ParallelismContext is already initialized.\n"
                f"fix: initialize it once per open device (now {self._parallelism!r}); "
                "close_device() drops it."
            )
        if not isinstance(config, (DistributedConfig, ParallelDims)):
            raise ParallelismContextError(
                f"initialize_parallelism_context takes a DistributedConfig, got {config!r}.\n"
                "fix: initialize_parallelism_context(DistributedConfig(enable_ddp=True))."
            )
        if self._device is None:
            raise ParallelismContextError(
                "initialize_parallelism_context needs an open device.\n"
                "fix: call open_device([rows, cols]) first."
            )
        self._parallelism = ParallelismContext.create(self._device, config)
        return self._parallelism

    def get_parallelism_context(self) -> ParallelismContext:
        if self._parallelism is None:
            raise ParallelismContextError(
                "ParallelismContext is not initialized.\n"
                "fix: call AutoContext.get_instance().initialize_parallelism_context("
                "DistributedConfig(...)) after open_device."
            )
        return self._parallelism

    def is_parallelism_context_initialized(self) -> bool:
        return self._parallelism is not None

    # -- seed and graph -------------------------------------------------------------------------

    def set_seed(self, seed: int) -> None:
        """Seed parameter initialisation and dropout; the same seed gives the same values on any mesh."""
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise AutoContextError(f"seed {seed!r} must be an int >= 0.\nfix: e.g. set_seed(5489).")
        self._seed = int(seed)
        self._key = None

    def get_seed(self) -> int:
        return self._seed

    def get_rng_key(self) -> jax.Array:
        """The root ``jax.random.PRNGKey`` of the current seed (the same on every call)."""
        return jax.random.PRNGKey(self._seed)

    def next_rng_key(self) -> jax.Array:
        """A fresh key split off the context's stream (TTML's generator), reset by ``set_seed``."""
        if self._key is None:
            self._key = self.get_rng_key()
        self._key, sub = jax.random.split(self._key)
        return sub

    def reset_graph(self) -> None:
        """No-op: JAX differentiates functions, so there is no autograd tape to clear."""

    def reset(self) -> None:
        """ttjax addition for tests and notebooks: close the device and restore the default seed."""
        self.close_device()
        self._seed = DEFAULT_SEED
        self._key = None


def ctx() -> AutoContext:
    """TTML C++'s ``ttml::autograd::ctx()``: the AutoContext singleton."""
    return AutoContext.get_instance()


__all__ = ["DEFAULT_SEED", "AutoContext", "ctx"]
