"""Model weights -> a tree of ttnn tensors: TT-NN's ``ttnn.model_preprocessing``.

:func:`preprocess_model_parameters` walks a model (a torch ``nn.Module``, a Flax NNX module, or
a nested dict of Flax linen params) and converts every parameter with ``ttnn.from_torch``, the
way TT-NN stores weights: a linear weight becomes ``[in, out]`` (torch's ``weight.T``) in
bfloat16 TILE layout, its bias ``[1, out]``. The mapper comes from the surrounding
``ttnn.distribute`` block, so one call replicates or shards a whole model:

>>> with ttnn.distribute(ttnn.ShardTensorToMesh(mesh, dim=-1)):       # tensor parallel
...     parameters = ttnn.model_preprocessing.preprocess_model_parameters(
...         initialize_model=lambda: torch_mlp, device=mesh)
>>> parameters.dense_h_to_4h.weight.shape                          # [in, out / devices]
Shape([32, 16])

torch is imported only when a torch model is given, so ttjax works without it.

Public names only; the implementation is :mod:`ttjax._src.ttnn.model_preprocessing`.
"""

from ttjax._src.core.reexport import publish as _publish
from ttjax._src.ttnn.model_preprocessing import (
    ParameterDict as ParameterDict,
    ParameterList as ParameterList,
    fold_batch_norm2d_into_conv2d as fold_batch_norm2d_into_conv2d,
    make_parameter_dict as make_parameter_dict,
    move_to_device as move_to_device,
    preprocess_embedding_weight as preprocess_embedding_weight,
    preprocess_layernorm_parameter as preprocess_layernorm_parameter,
    preprocess_linear_bias as preprocess_linear_bias,
    preprocess_linear_weight as preprocess_linear_weight,
    preprocess_model as preprocess_model,
    preprocess_model_parameters as preprocess_model_parameters,
)

_publish(globals(), "ttjax._src.ttnn.model_preprocessing")
