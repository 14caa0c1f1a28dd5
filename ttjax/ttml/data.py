"""Training text with no download: the Python documentation that ships with the interpreter.

``pydoc_data.topics`` holds ~465k characters of English reference text. It is tokenised by
characters or by a byte-level BPE trained here with Hugging Face ``tokenizers`` (cached on disk,
keyed by the text and vocabulary size), split 90/10 into train and validation, and served as
random windows chosen by ``(seed, step)`` so a resumed run sees exactly the same batches.

>>> data = load_dataset("bpe", vocab_size=512)
>>> tokens = data.batch(step=0, accum=1, batch=16, seq=64, seed=5489)   # [1, 16, 65]
>>> data.unigram_loss()                                                  # the baseline to beat
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ttjax.errors import ConfigError
from ttjax.ttml.config import read_text
from ttjax.ttml.errors import TrainingConfigError

TOKENIZERS = ("char", "bpe")
BYTE_TOKENS = 256  # a byte-level BPE starts from the 256 bytes; each token above is one merge


def load_corpus(path: str | os.PathLike[str] | None = None) -> str:
    """The text at ``path``, or (empty/None) every topic of the stdlib's ``pydoc_data``.

    A missing, unreadable, non-UTF-8 or empty file raises, naming it (``data_path``)."""
    if path:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(
                f"data_path {str(p)!r} is not a file.\nfix: point data_path at a UTF-8 text file, "
                "or leave it empty for the Python documentation text."
            )
        return read_text(p, "data_path", "a UTF-8 text file (or leave data_path empty)")
    from pydoc_data.topics import topics

    return "\n\n".join(topics[k] for k in sorted(topics))


@dataclass(frozen=True)
class CharTokenizer:
    """One token per distinct character of the corpus (sorted), like nanoGPT's shakespeare_char."""

    chars: str

    @classmethod
    def train(cls, text: str) -> CharTokenizer:
        return cls("".join(sorted(set(text))))

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> np.ndarray:
        index = {c: i for i, c in enumerate(self.chars)}
        return np.fromiter((index[c] for c in text), np.int32, len(text))

    def decode(self, ids: Any) -> str:
        return "".join(self.chars[int(i)] for i in ids)

    def __repr__(self) -> str:
        return f"CharTokenizer(vocab_size={self.vocab_size})"


@dataclass(frozen=True)
class BPETokenizer:
    """A byte-level BPE (GPT-2's scheme) trained on the corpus with ``tokenizers``."""

    tokenizer: Any = field(repr=False)
    path: str

    @classmethod
    def train(cls, text: str, vocab_size: int, cache_dir: str | None = None) -> BPETokenizer:
        from tokenizers import ByteLevelBPETokenizer, Tokenizer

        digest = hashlib.sha256(f"{vocab_size}\0{text}".encode()).hexdigest()[:16]
        folder = Path(cache_dir or os.environ.get("TTJAX_CACHE_DIR") or tempfile.gettempdir())
        path = folder / "ttjax-tokenizers" / f"bpe-{vocab_size}-{digest}.json"
        if path.is_file():
            return cls(Tokenizer.from_file(str(path)), str(path))
        tok = ByteLevelBPETokenizer()
        tok.train_from_iterator([text], vocab_size=vocab_size, min_frequency=2, show_progress=False)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tok.save(str(tmp))
        os.replace(tmp, path)  # atomic: a concurrent reader never sees half a file
        return cls(Tokenizer.from_file(str(path)), str(path))

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> BPETokenizer:
        """A Hugging Face ``tokenizer.json`` (what TTML's ``BPETokenizer`` reads)."""
        from tokenizers import Tokenizer

        text = read_text(Path(path), "tokenizer_path", "a Hugging Face tokenizer.json")
        try:
            return cls(Tokenizer.from_str(text), str(path))
        except Exception as e:  # tokenizers raises its own Exception type for any bad JSON
            raise TrainingConfigError(
                f"tokenizer_path {str(path)!r} is not a Hugging Face tokenizer file: "
                f"{str(e).splitlines()[0][:200]}.\nfix: point tokenizer_path at a tokenizer.json "
                "(or remove it to train a BPE on the corpus)."
            ) from None

    @property
    def vocab_size(self) -> int:
        return int(self.tokenizer.get_vocab_size())

    def encode(self, text: str) -> np.ndarray:
        return np.asarray(self.tokenizer.encode(text).ids, np.int32)

    def decode(self, ids: Any) -> str:
        return str(self.tokenizer.decode([int(i) for i in ids]))


@dataclass(frozen=True)
class TokenDataset:
    """Train and validation token streams plus the tokenizer that made them."""

    train: np.ndarray = field(repr=False)
    val: np.ndarray = field(repr=False)
    tokenizer: Any

    @property
    def vocab_size(self) -> int:
        return int(self.tokenizer.vocab_size)

    def check_windows(self, seq: int, source: str) -> None:
        """Raise unless both splits hold a window of ``seq + 1`` tokens (``source``: the text's
        name for the message, e.g. the ``data_path``)."""
        short = min(len(self.train), len(self.val))
        if short <= seq + 1:
            raise TrainingConfigError(
                f"{source} is too short: its {'training' if len(self.train) <= seq + 1 else 'validation'}"
                f" split has {short} tokens, and a window of max_sequence_length {seq} needs "
                f"{seq + 2}.\nfix: use a longer text (about {20 * (seq + 2)} tokens or more), or a "
                "smaller max_sequence_length."
            )

    def batch(self, step: int, accum: int, batch: int, seq: int, seed: int) -> np.ndarray:
        """``[accum, batch, seq + 1]`` random training windows; the same for the same (seed, step)."""
        rng = np.random.default_rng([seed, step])
        starts = rng.integers(0, len(self.train) - seq - 1, size=(accum, batch))
        return self.train[starts[..., None] + np.arange(seq + 1)]

    def val_batches(self, n: int, batch: int, seq: int) -> np.ndarray:
        """``[n, batch, seq + 1]`` validation windows spread evenly over the validation text."""
        count = n * batch
        starts = np.linspace(0, len(self.val) - seq - 1, count).astype(np.int64)
        return self.val[starts[:, None] + np.arange(seq + 1)].reshape(n, batch, seq + 1)

    def unigram_loss(self) -> float:
        """Validation cross-entropy (nats/token) of the train unigram distribution (add-one)."""
        counts = np.bincount(self.train, minlength=self.vocab_size) + 1.0
        logp = np.log(counts / counts.sum())
        return float(-logp[self.val].mean())


def load_dataset(
    tokenizer_type: str = "char",
    *,
    vocab_size: int | None = 512,
    data_path: str | None = None,
    val_fraction: float = 0.1,
    cache_dir: str | None = None,
    tokenizer_path: str | os.PathLike[str] | None = None,
) -> TokenDataset:
    """Tokenise the corpus (``"char"`` or ``"bpe"`` of ``vocab_size``) and split off validation.

    ``vocab_size`` bounds the token ids for both tokenizers: the characters of the text must fit
    in it, and a BPE needs more than the 256 byte tokens (else it would learn no merge). None:
    no bound (the caller sizes the model from the tokenizer, as TTML does; a BPE then has 512).
    ``tokenizer_path`` (BPE only): a ``tokenizer.json`` to read instead of training one.
    """
    if tokenizer_type not in TOKENIZERS:
        raise ConfigError(
            f"Unknown tokenizer type: {tokenizer_type!r}.\nfix: tokenizer_type one of {TOKENIZERS}."
        )
    if tokenizer_type == "bpe" and vocab_size is not None and vocab_size <= BYTE_TOKENS:
        raise TrainingConfigError(
            f"vocab_size = {vocab_size} is too small for tokenizer_type 'bpe': a byte-level BPE "
            f"starts from {BYTE_TOKENS} byte tokens, so it would learn no merge.\nfix: set "
            f"transformer_config.vocab_size >= {BYTE_TOKENS + 1} (e.g. 512), or tokenizer_type: char."
        )
    text = load_corpus(data_path)
    if tokenizer_type == "char":
        tok: Any = CharTokenizer.train(text)
        if vocab_size is not None and tok.vocab_size > vocab_size:
            raise TrainingConfigError(
                f"vocab_size = {vocab_size} is smaller than the {tok.vocab_size} distinct "
                f"characters of the text (tokenizer_type 'char').\nfix: set "
                f"transformer_config.vocab_size >= {tok.vocab_size} (e.g. "
                f"{-(-tok.vocab_size // 64) * 64}), or tokenizer_type: bpe."
            )
    elif tokenizer_path is not None:
        tok = BPETokenizer.from_file(tokenizer_path)
        if vocab_size is not None and tok.vocab_size > vocab_size:
            raise TrainingConfigError(
                f"the tokenizer {str(tokenizer_path)!r} has {tok.vocab_size} tokens, more than "
                f"vocab_size = {vocab_size}.\nfix: set transformer_config.vocab_size >= "
                f"{tok.vocab_size}, or leave it out."
            )
    else:
        target = 512 if vocab_size is None else vocab_size
        tok = BPETokenizer.train(text, target, cache_dir)
        if tok.vocab_size > target:  # `tokenizers` keeps to the target; checked, not assumed
            raise TrainingConfigError(
                f"the BPE trained for vocab_size = {target} has {tok.vocab_size} tokens.\n"
                f"fix: set transformer_config.vocab_size >= {tok.vocab_size}."
            )
    ids = tok.encode(text)
    cut = int(len(ids) * (1.0 - val_fraction))
    return TokenDataset(ids[:cut], ids[cut:], tok)


__all__ = [
    "BPETokenizer",
    "CharTokenizer",
    "TokenDataset",
    "load_corpus",
    "load_dataset",
]
