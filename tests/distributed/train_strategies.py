"""NanoGPT's training CLI run once per config, in one process: ``python train_strategies.py
DIR NAME...`` runs ``python -m models.nanogpt.train --config DIR/NAME/config.yaml --out
DIR/NAME/out`` for each NAME in turn (what ``test_train_cli_multiprocess.py`` starts on every
rank, so the ranks pay for one start and one join of the job)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # run as a script by ttjax-run: this checkout's ttjax

from models.nanogpt.train import cli  # noqa: E402


def main(argv: list[str]) -> int:
    folder, names = Path(argv[0]), argv[1:]
    for name in names:
        print(f"strategy {name}", flush=True)
        code = cli(
            ["--config", str(folder / name / "config.yaml"), "--out", str(folder / name / "out")]
        )
        if code:
            return code
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
