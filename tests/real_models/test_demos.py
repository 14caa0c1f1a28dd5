"""tt-metal's other multi-device LLM demos (deepseek_v3, gpt_oss, qwen25_vl), their own test
files unchanged, on the mesh each demo opens (``tests.real_models.demos``). Slow (minutes each);
they need a full tt-metal checkout and the transformers version the demo pins, and skip saying
so otherwise. A case that stops today must stop with the error recorded for it (strict: a pass,
or another error, fails), as the strict xfails of test_tt_transformers.py do."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.real_models import demos


@pytest.mark.slow
@pytest.mark.parametrize(
    "case", demos.CASES, ids=[f"{c.demo}-{c.module.split(',')[0]}-{c.mesh}" for c in demos.CASES]
)
def test_demo_module(ttnn_bound: Any, case: demos.Case, tmp_path: Path) -> None:
    why = demos.missing(case)
    if why:
        pytest.skip(why)
    result = demos.run(case, tmp_path)
    if case.stops is None:
        assert result.passed, result.error or result.log[-3000:]
        assert result.pcc is None or result.pcc >= case.bar, result.pcc
    else:
        assert not result.passed and case.stops in result.error, result.error or result.log[-3000:]
