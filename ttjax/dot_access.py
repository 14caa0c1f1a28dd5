"""``ttnn.dot_access``: a dict whose keys read as attributes (model configs such as BERT's and
ViT's ``DotAccessDict(dict(**config.to_dict(), core_grid=...))``).

>>> from ttjax.dot_access import make_dot_access_dict
>>> make_dot_access_dict({"a": {"b": 1}}).a.b
1

Public names only; the implementation is :mod:`ttjax._src.ttnn.dot_access`.
"""

from ttjax._src.core.reexport import publish as _publish
from ttjax._src.ttnn.dot_access import (
    DotAccessDict as DotAccessDict,
    make_dot_access_dict as make_dot_access_dict,
)

_publish(globals(), "ttjax._src.ttnn.dot_access")
