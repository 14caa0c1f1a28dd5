"""TTML's (tt-train's) names on ttjax: configs, parallelism context, training, pipelines."""
