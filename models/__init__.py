"""Models written with ttjax ops, each next to a single-device reference."""
