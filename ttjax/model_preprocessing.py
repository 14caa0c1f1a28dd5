"""Model weights -> a tree of ttnn tensors: TT-NN's ``ttnn.model_preprocessing``.

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
