"""Model weights -> a tree of ttnn tensors: TT-NN's ``ttnn.model_preprocessing``.

The implementation of :mod:`ttjax.model_preprocessing`, whose docstring says more.
"""

from __future__ import annotations

import contextlib
import inspect
import io
import logging
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import Any, cast

import jax
import numpy as np

from ttjax._src.core.enums import TILE_LAYOUT, DataType, Layout
from ttjax._src.core.errors import TTJaxError, UnsupportedDTypeError
from ttjax._src.core.host import is_torch as _is_torch
from ttjax._src.core.mesh import MeshDevice
from ttjax._src.core.tensor import Tensor
from ttjax._src.ttnn import convert as _convert

logger = logging.getLogger(__name__)

# ---------------------------------------------------------------------------------------------
# ParameterDict / ParameterList
# ---------------------------------------------------------------------------------------------


class ParameterDict(dict):
    """A dict of parameters with attribute access: ``parameters.dense_h_to_4h.weight``.

    It is a JAX pytree, so a ParameterDict can be passed to a jitted function.

    Examples:
        >>> p = ParameterDict(dense=ParameterDict(weight=w))
        >>> p.dense.weight is p["dense"]["weight"]
        True
    """

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(
                f"ParameterDict has no parameter {name!r}; it holds {list(self.keys())!r}."
            ) from None

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = value

    def __delattr__(self, name: str) -> None:
        try:
            del self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __repr__(self) -> str:
        file = io.StringIO()
        _repr_parameters(file, self)
        return file.getvalue()


class ParameterList(list):
    """A list of per-layer parameters (from ``nn.ModuleList`` / ``nnx.List``)."""

    __slots__ = ()

    def __contains__(self, index: object) -> bool:
        # TT-NN's semantics: ``i in parameters.layers`` asks whether layer i exists.
        return isinstance(index, int) and 0 <= index < len(self)

    def __repr__(self) -> str:
        file = io.StringIO()
        _repr_parameters(file, self)
        return file.getvalue()


def _host_tensor(value: Any, **kwargs: Any) -> Tensor:
    """``from_torch`` of a parameter that is never None."""
    return cast(Tensor, _convert.from_torch(value, **kwargs))


def _repr_parameters(file: io.StringIO, parameters: Any, indentation: str = "") -> None:
    nxt = indentation + "  "
    if isinstance(parameters, (ParameterDict, ParameterList)):
        is_dict = isinstance(parameters, ParameterDict)
        opening, closing = ("{", "}") if is_dict else ("[", "]")
        if not parameters:
            file.write(opening + closing)
            return
        file.write(opening + "\n")
        items = (
            list(parameters.items())
            if isinstance(parameters, dict)
            else list(enumerate(parameters))
        )
        for index, (key, value) in enumerate(items):
            file.write(nxt + (f"{key}: " if is_dict else ""))
            _repr_parameters(file, value, nxt)
            file.write(",\n" if index < len(items) - 1 else "\n")
        file.write(indentation + closing)
    elif isinstance(parameters, Tensor):
        file.write(
            f"ttnn.Tensor(shape={parameters.shape!r}, layout={parameters.layout!r}, "
            f"dtype={parameters.dtype!r})"
        )
    elif hasattr(parameters, "shape") and hasattr(parameters, "dtype"):
        file.write(
            f"{type(parameters).__name__}(shape={tuple(parameters.shape)}, dtype={parameters.dtype})"
        )
    else:
        file.write(repr(parameters))


jax.tree_util.register_pytree_with_keys(
    ParameterDict,
    lambda d: (tuple((jax.tree_util.DictKey(k), v) for k, v in d.items()), tuple(d.keys())),
    lambda keys, values: ParameterDict(zip(keys, values)),
    lambda d: (tuple(d.values()), tuple(d.keys())),
)
jax.tree_util.register_pytree_with_keys(
    ParameterList,
    lambda lst: (tuple((jax.tree_util.SequenceKey(i), v) for i, v in enumerate(lst)), None),
    lambda _, values: ParameterList(values),
    lambda lst: (tuple(lst), None),
)


def make_parameter_dict(dictionary: Mapping[Any, Any]) -> ParameterDict:
    """``dictionary`` as a ParameterDict, nested dicts included (TT-NN's helper)."""
    if isinstance(dictionary, ParameterDict):
        return dictionary
    out = ParameterDict()
    for key, value in dictionary.items():
        if isinstance(value, Mapping) and not isinstance(value, ParameterDict):
            value = make_parameter_dict(value)
        out[key] = value
    return out


# ---------------------------------------------------------------------------------------------
# Per-parameter preprocessors (TT-NN names; usable inside a custom_preprocessor)
# ---------------------------------------------------------------------------------------------


def _value(x: Any) -> Any:
    """The array inside an ``nnx.Variable`` (Param), else ``x``."""
    nnx = _nnx()
    if nnx is not None and isinstance(x, nnx.Variable):
        return _variable_value(x)
    return x


def _transposed(weight: Any) -> Any:
    weight = _value(weight)
    if _is_torch(weight):
        return weight.T.contiguous()
    return np.ascontiguousarray(np.asarray(weight).T)


def _row(x: Any) -> Any:
    x = _value(x)
    return x.reshape((1, -1)) if _is_torch(x) else np.asarray(x).reshape((1, -1))


def preprocess_linear_weight(
    weight: Any, *, dtype: DataType, layout: Layout = TILE_LAYOUT, weights_mesh_mapper: Any = None
) -> Tensor:
    """A torch-layout ``[out, in]`` linear weight as TT-NN's ``[in, out]`` tensor, laid over a
    mesh by ``weights_mesh_mapper`` when one is given (a host tensor, as TT-NN makes it).

    >>> w = preprocess_linear_weight(torch_linear.weight, dtype=ttnn.bfloat16)
    """
    return _host_tensor(
        _transposed(weight), dtype=dtype, layout=layout, mesh_mapper=weights_mesh_mapper
    )


def preprocess_linear_bias(
    bias: Any, *, dtype: DataType, layout: Layout = TILE_LAYOUT, weights_mesh_mapper: Any = None
) -> Tensor:
    """A ``[out]`` bias as TT-NN's ``[1, out]`` tensor (over a mesh by ``weights_mesh_mapper``)."""
    return _host_tensor(_row(bias), dtype=dtype, layout=layout, mesh_mapper=weights_mesh_mapper)


def preprocess_layernorm_parameter(
    parameter: Any, *, dtype: DataType, layout: Layout = TILE_LAYOUT
) -> Tensor:
    """A LayerNorm weight (scale) or bias as a ``[1, features]`` tensor."""
    return _host_tensor(_row(parameter), dtype=dtype, layout=layout)


def fold_batch_norm2d_into_conv2d(conv: Any, bn: Any) -> tuple[Any, Any]:
    """TT-NN's ``fold_batch_norm2d_into_conv2d``: the (weight, bias) of a torch ``Conv2d``
    followed by an eval-mode ``BatchNorm2d``, as one conv (each output channel scaled by
    ``gamma / sqrt(running_var + eps)``, the bias shifted to match). torch tensors in and out.

    >>> conv, bn = torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4).eval()
    >>> w, b = ttnn.model_preprocessing.fold_batch_norm2d_into_conv2d(conv, bn)
    >>> tuple(w.shape), tuple(b.shape)
    ((4, 3, 3, 3), (4,))
    """
    if not bn.track_running_stats:
        raise TTJaxError(
            "fold_batch_norm2d_into_conv2d: BatchNorm2d must have track_running_stats=True to "
            "be folded into Conv2d\nfix: build the BatchNorm2d with track_running_stats=True "
            "(its running statistics are what the fold uses)."
        )
    scale = bn.weight / (bn.running_var + bn.eps).sqrt()
    weight = conv.weight * scale.reshape(-1, 1, 1, 1)
    base = -bn.running_mean if conv.bias is None else conv.bias - bn.running_mean
    return weight, base * scale + bn.bias


def preprocess_embedding_weight(weight: Any, *, dtype: DataType) -> Tensor:
    """An embedding table ``[vocab, features]``, converted as is (ROW_MAJOR layout)."""
    return _host_tensor(_value(weight), dtype=dtype)


# TT-NN's table for parameters no default preprocessor handles (torch_dtype_to_ttnn_dtype).
_GENERIC_DTYPES = {
    "uint8": DataType.UINT8,
    "int16": DataType.UINT16,
    "int32": DataType.INT32,
    "int64": DataType.UINT32,
    "bfloat16": DataType.BFLOAT16,
    "float16": DataType.BFLOAT16,
    "float32": DataType.BFLOAT16,
    "float64": DataType.BFLOAT16,
}


def _generic(parameter: Any) -> Tensor:
    parameter = _value(parameter)
    if _is_torch(parameter):
        dtype_name = str(parameter.dtype).removeprefix("torch.")
    else:
        dtype_name = np.dtype(getattr(parameter, "dtype", np.asarray(parameter).dtype)).name
    dtype = _GENERIC_DTYPES.get(dtype_name)
    if dtype is None:
        raise UnsupportedDTypeError(
            f"dtype {dtype_name} has no TT-NN DataType (known: {sorted(_GENERIC_DTYPES)}).\n"
            "fix: convert it in a custom_preprocessor, or skip it with convert_to_ttnn."
        )
    return _host_tensor(parameter, dtype=dtype)


# ---------------------------------------------------------------------------------------------
# Walking a model: one adapter per kind of node (torch module, NNX module, list, dict of arrays)
# ---------------------------------------------------------------------------------------------


def _nnx() -> Any:
    """``flax.nnx`` when already imported (a model of it exists only then), else None."""
    if "flax.nnx" not in sys.modules:
        return None
    from flax import nnx

    return nnx


def _torch_module(x: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.nn.Module)


def _nnx_node(x: Any) -> bool:
    nnx = _nnx()
    # nnx.Pytree (flax >= 0.12) is the base of Module, List, Dict and Rngs; older: nnx.Object.
    return nnx is not None and isinstance(x, getattr(nnx, "Pytree", None) or nnx.Object)


def _nnx_collections(nnx: Any) -> tuple[type, ...]:
    """NNX's list/dict modules (flax >= 0.12), whose children are their items."""
    return tuple(c for c in (getattr(nnx, "List", None), getattr(nnx, "Dict", None)) if c)


def _variable_value(v: Any) -> Any:
    # get_value() on flax >= 0.12 (where .value is deprecated), .value before.
    return v.get_value() if hasattr(type(v), "get_value") else v.value


def _is_list(node: Any) -> bool:
    if isinstance(node, (list, tuple)):
        return True
    if _torch_module(node):
        import torch

        return isinstance(node, torch.nn.ModuleList)
    nnx = _nnx()
    list_type = getattr(nnx, "List", None) if nnx is not None else None
    return list_type is not None and isinstance(node, list_type)


def _is_container(x: Any) -> bool:
    """True for anything the walk descends into (modules, lists, dicts)."""
    return _torch_module(x) or _nnx_node(x) or isinstance(x, (list, tuple, Mapping))


def _holds_params(x: Any) -> bool:
    """Whether a plain list/dict found on an NNX module holds modules or Params (worth a walk)."""
    nnx = _nnx()
    if nnx is not None and (isinstance(x, nnx.Param) or _nnx_node(x)):
        return True
    if isinstance(x, Mapping):
        return any(_holds_params(v) for v in x.values())
    if isinstance(x, (list, tuple)):
        return any(_holds_params(v) for v in x)
    return False


def _children(node: Any) -> list[tuple[Any, Any]]:
    """Sub-nodes the walk descends into, as ``(name, node)`` in definition order."""
    if _torch_module(node):
        return [(int(k) if k.isdigit() else k, c) for k, c in node.named_children()]
    if _nnx_node(node):
        nnx = _nnx()
        if isinstance(node, _nnx_collections(nnx)):
            return [(k, c) for k, c in nnx.iter_children(node) if _holds_params(c)]
        return [
            (k, v)
            for k, v in vars(node).items()
            if not k.startswith("_pytree__")
            and not isinstance(v, nnx.Variable)
            and _holds_params(v)
        ]
    if isinstance(node, (list, tuple)):
        return list(enumerate(node))
    if isinstance(node, Mapping):
        return [(k, v) for k, v in node.items() if _is_container(v)]
    return []


def _params(node: Any) -> list[tuple[Any, Any]]:
    """The node's own parameters (not its children's), as ``(name, array)``."""
    if _torch_module(node):
        return [(k, p) for k, p in node.named_parameters(recurse=False)]
    if _nnx_node(node):
        nnx = _nnx()
        if isinstance(node, _nnx_collections(nnx)):
            items: Iterator[tuple[Any, Any]] = iter(nnx.iter_children(node))
        else:
            items = ((k, v) for k, v in vars(node).items() if not k.startswith("_pytree__"))
        # Only Params, as TT-NN converts only torch parameters (never buffers / batch stats).
        return [(k, _variable_value(v)) for k, v in items if isinstance(v, nnx.Param)]
    if isinstance(node, Mapping):
        nnx = _nnx()
        out = []
        for k, v in node.items():
            if v is None or _is_container(v):
                continue
            if nnx is not None and isinstance(v, nnx.Variable):
                if not isinstance(v, nnx.Param):
                    continue
                v = _variable_value(v)
            out.append((k, v))
        return out
    return []


def _ndim(x: Any) -> int:
    return len(getattr(x, "shape", np.shape(x)))


def _layer_kind(node: Any, params: dict[Any, Any]) -> str | None:
    """``"linear"``, ``"norm"``, ``"embedding"`` or None (no default preprocessing)."""
    if _torch_module(node):
        import torch

        if isinstance(node, torch.nn.Linear):
            return "linear"
        if isinstance(node, torch.nn.LayerNorm):
            return "norm"
        if isinstance(node, torch.nn.Embedding):
            return "embedding"
        return None
    if _nnx_node(node):
        nnx = _nnx()
        if isinstance(node, nnx.Linear):
            return "linear"
        if isinstance(node, (nnx.LayerNorm, nnx.RMSNorm)):
            return "norm"
        if isinstance(node, nnx.Embed):
            return "embedding"
        return None
    # A dict of linen params: recognise the layer by its parameter names and ranks.
    keys = set(params)
    if "kernel" in keys and keys <= {"kernel", "bias"} and _ndim(params["kernel"]) == 2:
        return "linear"
    if keys == {"embedding"} and _ndim(params["embedding"]) == 2:
        return "embedding"
    if (
        "scale" in keys
        and keys <= {"scale", "bias"}
        and all(_ndim(v) == 1 for v in params.values())
    ):
        return "norm"
    return None


def _default_preprocessor(
    node: Any, params: dict[Any, Any], dtype: DataType = DataType.BFLOAT16
) -> dict[str, Tensor] | None:
    """TT-NN's default_preprocessor, for torch, NNX and linen layers alike."""
    kind = _layer_kind(node, params)
    out: dict[str, Tensor] = {}
    torch_layout = _torch_module(node)
    if kind == "linear":
        w = params["weight"] if torch_layout else params["kernel"]
        # torch stores [out, in]; Flax's kernel is already TT-NN's [in, out].
        out["weight"] = (
            preprocess_linear_weight(w, dtype=dtype)
            if torch_layout
            else _host_tensor(_value(w), dtype=dtype, layout=TILE_LAYOUT)
        )
        if params.get("bias") is not None:
            out["bias"] = preprocess_linear_bias(params["bias"], dtype=dtype)
    elif kind == "norm":
        scale = params.get("weight") if torch_layout else params.get("scale")
        if scale is not None:
            out["weight"] = preprocess_layernorm_parameter(scale, dtype=dtype)
        if params.get("bias") is not None:
            out["bias"] = preprocess_layernorm_parameter(params["bias"], dtype=dtype)
    elif kind == "embedding":
        table = params["weight"] if torch_layout else params["embedding"]
        out["weight"] = preprocess_embedding_weight(table, dtype=dtype)
    return out or None


def _unconverted(node: Any, params: dict[Any, Any]) -> dict[Any, Any]:
    """What TT-NN keeps when ``convert_to_ttnn`` says no: the source arrays, linear weights as
    ``[in, out]``."""
    if _torch_module(node) and _layer_kind(node, params) == "linear":
        out = {"weight": params["weight"].T.contiguous()}
        if params.get("bias") is not None:
            out["bias"] = params["bias"]
        return out
    return dict(params)


def _call_custom(
    custom_preprocessor: Callable[..., Any], node: Any, name: str, convert_to_ttnn: Any
) -> Any:
    try:
        signature = inspect.signature(custom_preprocessor)
    except (TypeError, ValueError):  # builtins and some C callables have no signature
        return custom_preprocessor(node, name)
    names = list(signature.parameters)
    has_varargs = any(p.kind is p.VAR_POSITIONAL for p in signature.parameters.values())
    if len(names) < 2 and not has_varargs:
        raise TTJaxError(
            f"custom_preprocessor {custom_preprocessor!r} takes {names}; it must take at least two "
            "parameters: model and name.\nfix: def custom_preprocessor(model, name): ..."
        )
    extra = [
        n
        for n in names[2:]
        if signature.parameters[n].kind
        not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    ]
    for arg in extra:
        if arg not in {"ttnn_module_args", "convert_to_ttnn"}:
            raise TTJaxError(
                f"custom_preprocessor has an unsupported parameter {arg!r}.\n"
                "fix: take (model, name) plus optionally ttnn_module_args and convert_to_ttnn."
            )
    kwargs: dict[str, Any] = {}
    if "ttnn_module_args" in extra:
        kwargs["ttnn_module_args"] = None  # ttjax infers no module args (TT-NN: conv settings)
    if "convert_to_ttnn" in extra:
        kwargs["convert_to_ttnn"] = convert_to_ttnn
    return custom_preprocessor(node, name, **kwargs)


@contextlib.contextmanager
def _naming(name: str) -> Iterator[None]:
    """Prefix a ttjax error raised while converting a parameter with that parameter's name."""
    try:
        yield
    except TTJaxError as e:
        if getattr(e, "_ttjax_named", False):
            raise
        err = type(e)(f"preprocess_model_parameters, converting {name or 'the model'!r}: {e}")
        err._ttjax_named = True  # type: ignore[attr-defined]
        raise err from e


def _join(name: str, child: Any) -> str:
    return f"{name}.{child}" if name else str(child)


def _convert_model(
    node: Any,
    *,
    name: str,
    convert_to_ttnn: Callable[[Any, str], bool],
    custom_preprocessor: Callable[..., Any] | None,
    dtype: DataType = DataType.BFLOAT16,
) -> ParameterDict | ParameterList:
    """TT-NN's convert_torch_model_to_ttnn_model, over every supported kind of node."""
    walk: dict[str, Any] = dict(
        convert_to_ttnn=convert_to_ttnn, custom_preprocessor=custom_preprocessor, dtype=dtype
    )
    if _is_list(node):
        return ParameterList(
            _convert_model(child, name=_join(name, i), **walk) for i, child in _children(node)
        )
    if custom_preprocessor is not None:
        custom = _call_custom(custom_preprocessor, node, name, convert_to_ttnn)
        if custom:
            return make_parameter_dict(custom)

    children = _children(node)
    params = dict(_params(node))
    parameters = ParameterDict()
    if convert_to_ttnn(node, name):
        with _naming(name):
            default = _default_preprocessor(node, params, dtype)
        if default:
            if len(default) != len(children) + len(params):
                raise TTJaxError(
                    f"preprocess_model_parameters: {name or 'the model'} "
                    f"({type(node).__name__}) has parameters {sorted(map(str, params))} and "
                    f"children {[str(k) for k, _ in children]}, but the default preprocessor "
                    f"converted only {sorted(default)}.\n"
                    "fix: convert this module in a custom_preprocessor."
                )
            return make_parameter_dict(default)
        for pname, p in params.items():
            with _naming(_join(name, pname)):
                parameters[pname] = _generic(p)
    else:
        parameters.update(_unconverted(node, params))

    for child_name, child in children:
        sub = _convert_model(child, name=_join(name, child_name), **walk)
        if sub:
            parameters[child_name] = sub
    return parameters


def move_to_device(obj: Any, device: MeshDevice) -> Any:
    """Move every ttnn tensor in a ParameterDict/ParameterList (in place) onto ``device``."""
    if isinstance(obj, ParameterDict):
        for key, value in list(obj.items()):
            obj[key] = move_to_device(value, device)
        return obj
    if isinstance(obj, ParameterList):
        for i, value in enumerate(obj):
            obj[i] = move_to_device(value, device)
        return obj
    if isinstance(obj, Tensor):
        return _convert.to_device(obj, device)
    return obj


def _always(model: Any, name: str) -> bool:
    return True


def preprocess_model_parameters(
    *,
    initialize_model: Callable[[], Any] | None = None,
    model_name: str | None = None,
    version: str | None = None,
    device: MeshDevice | None = None,
    custom_preprocessor: Callable[..., Any] | None = None,
    convert_to_ttnn: Callable[[Any, str], bool] | None = None,
    prefix: str = "",
    run_model: Callable[..., Any] | None = None,
    reader_patterns_cache: dict[Any, Any] | None = None,
    dtype: DataType = DataType.BFLOAT16,
) -> ParameterDict:
    """Convert a model's parameters into a ParameterDict of ttnn tensors, as TT-NN does.

    ``initialize_model()`` returns a torch ``nn.Module`` (put in eval mode), a Flax NNX module,
    or a nested dict of Flax linen params (``{"dense": {"kernel": ..., "bias": ...}}``; a
    lone top-level ``"params"`` key is unwrapped). Linear weights become ``[in, out]`` and
    biases ``[1, out]`` in bfloat16 TILE; LayerNorm weight/bias ``[1, features]`` TILE (Flax
    LayerNorm/RMSNorm ``scale`` becomes ``weight``); embedding tables stay as they are
    (ROW_MAJOR, Flax ``embedding`` becomes ``weight``); other parameters keep their shape and
    name in ROW_MAJOR. Only parameters are converted (NNX ``Param``s), never buffers or batch
    statistics. ``custom_preprocessor(model, name)`` runs first on every module and wins when it
    returns a non-empty dict; ``convert_to_ttnn(model, name)`` False keeps a module's arrays
    unconverted. Tensors use the mapper of the surrounding ``ttnn.distribute`` block and are
    moved to ``device`` when given. ``model_name``/``version`` (TT-NN's weight cache),
    ``run_model`` and ``reader_patterns_cache`` (conv settings) are accepted and unused.
    ``dtype`` (a ttjax extension; TT-NN always uses bfloat16) sets the dtype of the linear, norm
    and embedding parameters, e.g. ``ttnn.float32`` for an exact comparison.

    >>> with ttnn.distribute(ttnn.ReplicateTensorToMesh(mesh)):
    ...     p = preprocess_model_parameters(initialize_model=lambda: model, device=mesh)
    >>> y = ttnn.linear(x, p.dense_h_to_4h.weight, bias=p.dense_h_to_4h.bias)
    """
    if initialize_model is None:
        raise TTJaxError(
            f"preprocess_model_parameters needs initialize_model (model_name={model_name!r}); "
            "ttjax keeps no cache of converted weights.\n"
            "fix: pass initialize_model=lambda: model."
        )
    if device is not None and not isinstance(device, MeshDevice):
        raise TTJaxError(
            f"preprocess_model_parameters: device={device!r} is not a MeshDevice.\n"
            "fix: pass the mesh from ttnn.open_mesh_device(...) (or ttnn.open_device(0))."
        )
    model = initialize_model()
    if _torch_module(model) and model.training:
        logger.info("Putting the model in eval mode")
        model.eval()
    if isinstance(model, Mapping) and not _nnx_node(model) and set(model) == {"params"}:
        model = model["params"]
    if not (_torch_module(model) or _nnx_node(model) or isinstance(model, Mapping)):
        raise TTJaxError(
            f"preprocess_model_parameters: initialize_model() returned a {type(model).__name__}; "
            "expected a torch nn.Module, a Flax NNX module or a dict of Flax linen params.\n"
            "fix: return the model itself, e.g. initialize_model=lambda: model."
        )
    parameters = _convert_model(
        model,
        name=prefix if prefix is not None else "",
        convert_to_ttnn=convert_to_ttnn or _always,
        custom_preprocessor=custom_preprocessor,
        dtype=dtype,
    )
    if isinstance(parameters, ParameterList):  # a bare ModuleList / nnx.List as the model
        parameters = ParameterDict(enumerate(parameters))
    parameters = make_parameter_dict(parameters)
    if device is not None:
        parameters = move_to_device(parameters, device)
    return parameters


preprocess_model = preprocess_model_parameters


__all__ = [
    "ParameterDict",
    "ParameterList",
    "fold_batch_norm2d_into_conv2d",
    "make_parameter_dict",
    "move_to_device",
    "preprocess_embedding_weight",
    "preprocess_layernorm_parameter",
    "preprocess_linear_bias",
    "preprocess_linear_weight",
    "preprocess_model",
    "preprocess_model_parameters",
]
