"""Tokenizers: a byte-level fallback for random-weight demos, or a checkpoint's ``tokenizer.json``.

Both expose ``encode(text, bos=False) -> list[int]``, ``decode(ids) -> str``, ``bos_id``,
``eos_id``, ``pad_id`` and ``vocab_size``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol


class Tokenizer(Protocol):
    bos_id: int | None
    eos_id: int | None
    pad_id: int | None
    vocab_size: int

    def encode(self, text: str, bos: bool = False) -> list[int]: ...

    def decode(self, ids: Any) -> str: ...


class ByteTokenizer:
    """UTF-8 bytes as ids ``3..258``, after ``pad=0``, ``bos=1``, ``eos=2``.

    ``decode`` drops the special ids and maps any id ``>= 259`` (which a model with a larger vocab
    can emit) to byte ``(id - 3) % 256``, so every generated id shows up as one byte; invalid
    UTF-8 is replaced with U+FFFD.
    """

    pad_id, bos_id, eos_id = 0, 1, 2
    offset = 3

    def __init__(self, vocab_size: int = 259):
        if vocab_size < 256 + self.offset:
            raise ValueError(f"ByteTokenizer needs vocab_size >= 259; got {vocab_size}")
        self.vocab_size = vocab_size

    def encode(self, text: str, bos: bool = False) -> list[int]:
        ids = [b + self.offset for b in text.encode("utf-8")]
        return [self.bos_id, *ids] if bos else ids

    def decode(self, ids: Any) -> str:
        data = bytes((int(i) - self.offset) % 256 for i in ids if int(i) >= self.offset)
        return data.decode("utf-8", errors="replace")


class HFTokenizer:
    """A Hugging Face ``tokenizer.json`` through the ``tokenizers`` package."""

    def __init__(self, path: str | Path, bos_id: int | None = None, eos_id: int | None = None):
        from tokenizers import Tokenizer as _Tokenizer

        self._tok = _Tokenizer.from_file(str(path))
        self.vocab_size = self._tok.get_vocab_size()
        self.bos_id, self.eos_id = bos_id, eos_id
        self.pad_id = self._tok.padding["pad_id"] if self._tok.padding else None

    def encode(self, text: str, bos: bool = False) -> list[int]:
        ids = self._tok.encode(text, add_special_tokens=False).ids
        return [self.bos_id, *ids] if bos and self.bos_id is not None else ids

    def decode(self, ids: Any) -> str:
        return self._tok.decode([int(i) for i in ids], skip_special_tokens=True)


def _first(value: Any) -> int | None:
    if isinstance(value, list):
        return int(value[0]) if value else None
    return None if value is None else int(value)


def load_tokenizer(path: str | Path | None, vocab_size: int) -> Tokenizer:
    """The checkpoint folder's ``tokenizer.json`` if there is one and ``tokenizers`` imports;
    otherwise a ``ByteTokenizer(vocab_size)``.

    ``bos_id``/``eos_id`` of a Hugging Face tokenizer come from the folder's ``config.json`` (the
    first one when it lists several).
    """
    folder = Path(path) if path is not None else None
    if folder is not None and (folder / "tokenizer.json").exists():
        try:
            import tokenizers  # noqa: F401
        except ImportError:
            pass
        else:
            cfg_file = folder / "config.json"
            cfg = json.loads(cfg_file.read_text()) if cfg_file.exists() else {}
            return HFTokenizer(
                folder / "tokenizer.json",
                bos_id=_first(cfg.get("bos_token_id")),
                eos_id=_first(cfg.get("eos_token_id")),
            )
    return ByteTokenizer(vocab_size)
