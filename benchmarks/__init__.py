"""ttjax benchmarks: every figure is a ratio of two variants measured side by side in one run."""
