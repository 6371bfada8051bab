"""Cross-model representation learning (paper 003, §2.2, eqs. 1-2).

Per source model ``m`` an independent linear projection ``Proj_m`` (``d_m -> proj_dim``), a
source-agnostic MLP ``f_theta`` (``proj_dim -> hidden -> d_z``) and a linear classifier
``g_phi`` (``d_z -> 1`` logit, shared by all sources) are trained jointly with cross-entropy to
predict each source's correctness ``y_{m,i}`` (eq. 2). The items are split 70/10/20 into
train/validation/test (§2.2); training uses the train items, early stopping the validation
loss, and ``test_auc_`` is measured on the test items. The aligned embeddings
``z_{m,i} = f_theta(Proj_m(h_{m,i}))`` (eq. 1) are returned for *every* item.

What the paper fixes: ``d_z = 32``, the architecture above (linear ``Proj_m`` -> shared MLP ->
linear classifier), cross-entropy, the 70/10/20 item split. What it does NOT give (checked:
§2.2, §3.1 "Implementation Details", appendices): optimizer, learning rate, weight decay,
epochs, patience, batch size, MLP width/depth, ``Proj_m`` output width, input normalization.
Our defaults (AdamW as requested by the project; all documented, none from the paper):

=================  =========  ======================================================
parameter          default    note
=================  =========  ======================================================
``proj_dim``       128        ``Proj_m`` output width (the d_m x proj_dim matmuls are
                              nearly all of the training cost: 128 keeps the §2.2
                              "progressive compression" 4096 -> 128 -> 64 -> 32 and a
                              12,000-item, 10-source fit within ~10 CPU minutes)
``hidden``         64         one hidden ReLU layer in ``f_theta``
``epochs``         100        maximum; early stopping usually ends sooner
``lr``             1e-3       AdamW
``weight_decay``   1e-2       AdamW (torch default)
``patience``       10         epochs without a new best validation loss
``batch_size``     256        *items* per step; each step uses those items for all sources
``standardize``    True       per-feature z-scoring of each source's states (train-item
                              statistics); real LLM states have outlier dimensions
=================  =========  ======================================================

Binary cross-entropy on one logit is the two-class cross-entropy of eq. 2 with a
reparametrized linear classifier. The loss is the mean over the (source, item) pairs of a
batch (eq. 2's sum up to a constant factor). The weights of the epoch with the lowest
validation loss are restored at the end.

Memory: states stay as given (float16 is fine); each step converts only the batch rows to
float32 on the device. Determinism: on CPU, a fit is bit-for-bit reproducible for a given seed
and thread count (seeded split and shuffling, ``torch.manual_seed`` inside a forked RNG so the
caller's global RNG is untouched, ``torch.use_deterministic_algorithms(True)`` during the fit,
float32). On CUDA the same is attempted (warn-only) but not guaranteed.
"""

from __future__ import annotations

import io
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from sklearn.metrics import roc_auc_score
from torch import nn

TRAIN_FRACTION = 0.7
VAL_FRACTION = 0.1
_EVAL_CHUNK = 4096


class _AlignNet(nn.Module):
    """``Proj_m`` (per source) -> ``f_theta`` (shared MLP) -> ``g_phi`` (shared linear head)."""

    def __init__(self, widths: Sequence[int], proj_dim: int, hidden: int, d_z: int) -> None:
        super().__init__()
        self.proj = nn.ModuleList([nn.Linear(int(w), proj_dim) for w in widths])
        self.mlp = nn.Sequential(nn.Linear(proj_dim, hidden), nn.ReLU(), nn.Linear(hidden, d_z))
        self.head = nn.Linear(d_z, 1)

    def embed(self, m: int, h: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.mlp(self.proj[m](h))
        return out

    def forward(self, m: int, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        z = self.embed(m, h)
        return z, self.head(z).squeeze(-1)


def _resolve_device(device: str | torch.device | None) -> torch.device:
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(device)


def split_items(n_items: int, seed: int) -> dict[str, np.ndarray]:
    """Seeded random 70/10/20 train/val/test item split (§2.2). Index arrays are sorted."""
    if n_items < 10:
        raise ValueError("need at least 10 items for a 70/10/20 split")
    perm = np.random.default_rng(seed).permutation(n_items)
    n_tr = int(round(TRAIN_FRACTION * n_items))
    n_va = max(1, int(round(VAL_FRACTION * n_items)))
    return {
        "train": np.sort(perm[:n_tr]),
        "val": np.sort(perm[n_tr : n_tr + n_va]),
        "test": np.sort(perm[n_tr + n_va :]),
    }


class AlignmentTrainer:
    """Train the §2.2 alignment network and expose the aligned embeddings ``z_{m,i}``.

    Learned attributes (after :meth:`fit`): ``embeddings_`` (list of ``N x d_z`` float32
    arrays, one per source), ``test_auc_`` (pooled over sources on the 20% test items),
    ``test_auc_per_source_``, ``val_loss_`` (per-epoch validation loss history),
    ``train_loss_`` (per-epoch mean train loss), ``best_epoch_`` (0-based), ``n_epochs_``,
    ``stopped_early_``, ``stop_reason_`` ("early_stopping" | "max_epochs" | "time_limit"),
    ``split_`` (dict of index arrays "train"/"val"/"test"), ``widths_``, ``device_``,
    ``model_``, ``fit_seconds_``.
    """

    _mu: list[torch.Tensor] | None  # per-source standardization (``standardize``), else None
    _inv_sd: list[torch.Tensor] | None

    def __init__(
        self,
        d_z: int = 32,
        hidden: int = 64,
        epochs: int = 100,
        lr: float = 1e-3,
        weight_decay: float = 1e-2,
        patience: int = 10,
        batch_size: int = 256,
        seed: int = 0,
        device: str | None = None,
        proj_dim: int = 128,
        standardize: bool = True,
        time_limit_s: float | None = None,
    ) -> None:
        self.d_z = d_z
        self.hidden = hidden
        self.epochs = epochs
        self.lr = lr
        self.weight_decay = weight_decay
        self.patience = patience
        self.batch_size = batch_size
        self.seed = seed
        self.device = device
        self.proj_dim = proj_dim
        self.standardize = standardize
        self.time_limit_s = time_limit_s

    # ------------------------------------------------------------------ helpers
    def _config(self) -> dict[str, Any]:
        return {
            "d_z": int(self.d_z), "hidden": int(self.hidden), "epochs": int(self.epochs),
            "lr": float(self.lr), "weight_decay": float(self.weight_decay),
            "patience": int(self.patience), "batch_size": int(self.batch_size),
            "seed": int(self.seed), "proj_dim": int(self.proj_dim),
            "standardize": bool(self.standardize),
        }

    def _check_params(self) -> None:
        for name in ("d_z", "hidden", "epochs", "patience", "batch_size", "proj_dim"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1")
        if not self.lr > 0 or self.weight_decay < 0:
            raise ValueError("lr must be > 0 and weight_decay >= 0")

    def _batch(self, states: Sequence[np.ndarray], m: int, idx: np.ndarray) -> torch.Tensor:
        # numpy's float16 -> float32 cast is ~4x faster than torch's on CPU
        x = torch.from_numpy(np.asarray(states[m][idx], dtype=np.float32)).to(self.device_)
        if self._mu is not None and self._inv_sd is not None:
            x = (x - self._mu[m]) * self._inv_sd[m]
        return x

    def _stats(self, states: Sequence[np.ndarray], rows: np.ndarray) -> None:
        """Per-feature mean and 1/std of each source over ``rows``, in row chunks (float64)."""
        self._mu, self._inv_sd = [], []
        for h in states:
            s = np.zeros(h.shape[1])
            s2 = np.zeros(h.shape[1])
            for a in range(0, len(rows), _EVAL_CHUNK):
                blk = h[rows[a : a + _EVAL_CHUNK]].astype(np.float64)
                s += blk.sum(0)
                s2 += (blk * blk).sum(0)
            mu = s / len(rows)
            sd = np.sqrt(np.maximum(s2 / len(rows) - mu * mu, 0.0))
            inv = np.where(sd > 1e-6, 1.0 / np.maximum(sd, 1e-6), 1.0)
            self._mu.append(torch.tensor(mu, dtype=torch.float32, device=self.device_))
            self._inv_sd.append(torch.tensor(inv, dtype=torch.float32, device=self.device_))

    def _validate(self, states: Sequence[np.ndarray], correctness: np.ndarray) -> np.ndarray:
        if len(states) < 1:
            raise ValueError("need at least one source model")
        y = np.asarray(correctness, dtype=np.float32)
        if y.ndim != 2 or y.shape[0] != len(states):
            raise ValueError("correctness must be (n_sources x n_items)")
        n = y.shape[1]
        for m, h in enumerate(states):
            if h.ndim != 2 or h.shape[0] != n:
                raise ValueError(f"states[{m}] must be (n_items x d_m) with n_items={n}")
        if not np.isin(y, (0.0, 1.0)).all():
            raise ValueError("correctness must be 0/1")
        return y

    @torch.no_grad()
    def _logits_and_embeddings(
        self, states: Sequence[np.ndarray], rows: np.ndarray | None, want_z: bool
    ) -> tuple[list[np.ndarray], list[np.ndarray]]:
        self.model_.eval()
        n = states[0].shape[0]
        rows = np.arange(n) if rows is None else rows
        logits, embs = [], []
        for m in range(len(states)):
            lg, zs = [], []
            for a in range(0, len(rows), _EVAL_CHUNK):
                z, out = self.model_(m, self._batch(states, m, rows[a : a + _EVAL_CHUNK]))
                lg.append(out.float().cpu().numpy())
                if want_z:
                    zs.append(z.float().cpu().numpy())
            logits.append(np.concatenate(lg) if lg else np.zeros(0, np.float32))
            if want_z:
                embs.append(np.concatenate(zs).astype(np.float32))
        return logits, embs

    def _val_loss(self, states: Sequence[np.ndarray], y: np.ndarray, rows: np.ndarray) -> float:
        logits, _ = self._logits_and_embeddings(states, rows, want_z=False)
        lg = torch.from_numpy(np.concatenate(logits))
        tgt = torch.from_numpy(np.concatenate([y[m, rows] for m in range(len(states))]))
        return float(nn.functional.binary_cross_entropy_with_logits(lg, tgt))

    # ---------------------------------------------------------------------- fit
    def fit(
        self,
        states: list[np.ndarray],
        correctness: np.ndarray,
        progress: Callable[[float], None] | None = None,
    ) -> AlignmentTrainer:
        """Train on ``states`` (one ``N x d_m`` array per source, any float dtype) and
        ``correctness`` (``M x N`` 0/1). ``progress`` gets the fraction of ``epochs`` done
        after every epoch and 1.0 at the end; an exception it raises aborts the fit."""
        self._check_params()
        y = self._validate(states, correctness)
        self.device_ = _resolve_device(self.device)
        self.widths_ = [int(h.shape[1]) for h in states]
        self.split_ = split_items(y.shape[1], self.seed)
        tr, va, te = self.split_["train"], self.split_["val"], self.split_["test"]
        rng = np.random.default_rng(self.seed + 1)
        t0 = time.perf_counter()

        prev_det = torch.are_deterministic_algorithms_enabled()
        prev_warn = torch.is_deterministic_algorithms_warn_only_enabled()
        devices = [self.device_.index or 0] if self.device_.type == "cuda" else []
        torch.use_deterministic_algorithms(True, warn_only=True)
        try:
            with torch.random.fork_rng(devices=devices):
                torch.manual_seed(self.seed)
                self.model_ = _AlignNet(self.widths_, self.proj_dim, self.hidden, self.d_z)
                self.model_.to(self.device_, dtype=torch.float32)
                self._mu = self._inv_sd = None
                if self.standardize:
                    self._stats(states, tr)
                opt = torch.optim.AdamW(
                    self.model_.parameters(), lr=self.lr, weight_decay=self.weight_decay
                )
                y_dev = torch.from_numpy(y).to(self.device_)
                best = math.inf
                best_state: dict[str, torch.Tensor] | None = None
                bad = 0
                self.val_loss_, self.train_loss_ = [], []
                self.best_epoch_, self.stop_reason_ = -1, "max_epochs"
                n_src = len(states)
                for epoch in range(int(self.epochs)):
                    self.model_.train()
                    order = rng.permutation(tr)
                    tot, cnt = 0.0, 0
                    for a in range(0, len(order), int(self.batch_size)):
                        idx = np.sort(order[a : a + int(self.batch_size)])
                        idx_t = torch.from_numpy(idx).to(self.device_)
                        loss: Any = 0.0
                        for m in range(n_src):
                            _, out = self.model_(m, self._batch(states, m, idx))
                            loss = loss + nn.functional.binary_cross_entropy_with_logits(
                                out, y_dev[m].index_select(0, idx_t)
                            )
                        loss = loss / n_src
                        opt.zero_grad(set_to_none=True)
                        loss.backward()
                        opt.step()
                        tot += float(loss.detach()) * len(idx)
                        cnt += len(idx)
                    self.train_loss_.append(tot / max(cnt, 1))
                    vl = self._val_loss(states, y, va)
                    self.val_loss_.append(vl)
                    if vl < best:
                        best, bad, self.best_epoch_ = vl, 0, epoch
                        best_state = {
                            k: v.detach().clone() for k, v in self.model_.state_dict().items()
                        }
                    else:
                        bad += 1
                    if progress is not None:
                        progress(min(1.0, (epoch + 1) / int(self.epochs)))
                    if bad >= int(self.patience):
                        self.stop_reason_ = "early_stopping"
                        break
                    if (self.time_limit_s is not None
                            and time.perf_counter() - t0 > self.time_limit_s
                            and epoch + 1 < int(self.epochs)):
                        self.stop_reason_ = "time_limit"
                        break
                if best_state is not None:
                    self.model_.load_state_dict(best_state)
                self.n_epochs_ = len(self.val_loss_)
                self.stopped_early_ = self.stop_reason_ == "early_stopping"

                logits, self.embeddings_ = self._logits_and_embeddings(states, None, True)
        finally:
            torch.use_deterministic_algorithms(prev_det, warn_only=prev_warn)

        self.test_auc_per_source_ = []
        for m in range(len(states)):
            yt = y[m, te]
            self.test_auc_per_source_.append(
                float(roc_auc_score(yt, logits[m][te])) if 0 < yt.sum() < len(yt) else math.nan
            )
        yt_all = np.concatenate([y[m, te] for m in range(len(states))])
        lt_all = np.concatenate([logits[m][te] for m in range(len(states))])
        self.test_auc_ = (
            float(roc_auc_score(yt_all, lt_all)) if 0 < yt_all.sum() < len(yt_all) else math.nan
        )
        self.fit_seconds_ = time.perf_counter() - t0
        if progress is not None:
            progress(1.0)
        return self

    # ------------------------------------------------------- reuse a trained model
    def transform(self, states: list[np.ndarray]) -> list[np.ndarray]:
        """Aligned embeddings ``z_{m,i}`` (eq. 1) of new items for the *same* sources, in the
        same order and widths as at fit time."""
        if not hasattr(self, "model_"):
            raise RuntimeError("not fitted")
        if [int(h.shape[1]) for h in states] != self.widths_:
            raise ValueError(f"expected widths {self.widths_}")
        return self._logits_and_embeddings(states, None, True)[1]

    def predict_proba(self, states: list[np.ndarray]) -> np.ndarray:
        """``M x N`` predicted probabilities of correctness from ``g_phi``."""
        if not hasattr(self, "model_"):
            raise RuntimeError("not fitted")
        logits, _ = self._logits_and_embeddings(states, None, False)
        return np.asarray(1.0 / (1.0 + np.exp(-np.stack(logits))))

    def state_dict_bytes(self) -> bytes:
        """The trained network, its config, widths and standardization, via ``torch.save``."""
        if not hasattr(self, "model_"):
            raise RuntimeError("not fitted")
        payload = {
            "config": self._config(),
            "widths": list(self.widths_),
            "model": {k: v.detach().cpu() for k, v in self.model_.state_dict().items()},
            "mu": None if self._mu is None else [t.cpu() for t in self._mu],
            "inv_sd": None if self._inv_sd is None else [t.cpu() for t in self._inv_sd],
        }
        buf = io.BytesIO()
        torch.save(payload, buf)
        return buf.getvalue()

    @classmethod
    def from_state_bytes(cls, data: bytes, device: str | None = None) -> AlignmentTrainer:
        """Rebuild a trained trainer from :meth:`state_dict_bytes` (for :meth:`transform`,
        :meth:`predict_proba`); fit-time attributes such as ``embeddings_`` are not restored."""
        payload = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
        cfg = payload["config"]
        obj = cls(**{k: cfg[k] for k in cfg}, device=device)
        obj.device_ = _resolve_device(device)
        obj.widths_ = [int(w) for w in payload["widths"]]
        obj.model_ = _AlignNet(obj.widths_, obj.proj_dim, obj.hidden, obj.d_z)
        obj.model_.load_state_dict(payload["model"])
        obj.model_.to(obj.device_, dtype=torch.float32).eval()
        obj._mu = None if payload["mu"] is None else [t.to(obj.device_) for t in payload["mu"]]
        obj._inv_sd = (
            None if payload["inv_sd"] is None else [t.to(obj.device_) for t in payload["inv_sd"]]
        )
        return obj
