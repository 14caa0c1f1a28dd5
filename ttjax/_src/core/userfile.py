"""Reading a file the user named: one ttjax error, naming the file and the fix, for each way it
can be wrong before it is parsed (missing, unreadable, not UTF-8, empty).

>>> from ttjax.errors import ConfigError
>>> _ = Path("run.yaml").write_bytes(b"project: caf\\xe9\\n")
>>> read_user_text(Path("run.yaml"), "config file", "a YAML training config", ConfigError)
Traceback (most recent call last):
ttjax.errors.ConfigError: run.yaml:1: config file is not UTF-8 text (byte 0xe9 at offset 12).
fix: save run.yaml as UTF-8 (a YAML training config).
"""

from __future__ import annotations

from pathlib import Path

from ttjax._src.core.errors import TTJaxError


def read_user_text(path: Path, what: str, example: str, error: type[TTJaxError]) -> str:
    """The UTF-8 text of ``path``; a missing, unreadable, non-UTF-8 or empty file raises ``error``.

    ``what`` names the file's role ("config file", "rank-binding file", ...) and ``example`` says
    what it must hold; the message gives the line and byte offset of the first non-UTF-8 byte.
    """
    if not path.is_file():
        raise error(
            f"{what} {str(path)!r} does not exist (or is not a file).\nfix: pass the path of "
            f"{example}."
        )
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise error(
            f"{what} {str(path)!r} cannot be read: {e.strerror or e}.\nfix: check its permissions."
        ) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise error(
            f"{path}:{line}: {what} is not UTF-8 text (byte {raw[e.start]:#04x} at offset "
            f"{e.start}).\nfix: save {path.name} as UTF-8 ({example})."
        ) from None
    if not text.strip():
        raise error(f"{what} {str(path)!r} is empty.\nfix: write {example} into it.")
    return text


__all__ = ["read_user_text"]
