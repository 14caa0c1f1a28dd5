"""``ttjax-run`` (TT-NN's ``tt-run``) and the multi-process runtime on ``jax.distributed``."""
