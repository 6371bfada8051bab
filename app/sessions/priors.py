"""Prior storage: the bucket prior of a (benchmark, metric, data version, reference set) is computed
once, stored in ``session_priors`` and reused (deserialized priors are kept in ``cache.priors``)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import numpy as np
from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.core.sequential import BucketPrior
from app.db.models import Benchmark, Item, SessionPrior
from app.kit.errors import NotFound
from app.sessions import cache


@dataclass(frozen=True)
class PriorEntry:
    """A deserialized prior with its item order: column j is item ``item_ids[j]`` (pk ``item_pks[j]``)."""

    key: str
    prior: BucketPrior
    item_pks: tuple[int, ...]
    item_ids: tuple[str, ...]
    index_of_pk: dict[int, int]
    pk_of_id: dict[str, int]  # item id -> pk of the prior's items


def _entry(key: str, prior: BucketPrior, item_pks: tuple[int, ...], item_ids: tuple[str, ...]) -> PriorEntry:
    return PriorEntry(key, prior, item_pks, item_ids, {p: j for j, p in enumerate(item_pks)},
                      dict(zip(item_ids, item_pks)))


def prior_key(benchmark: Benchmark, metric: str, reference_ids: list[str]) -> str:
    material = json.dumps([benchmark.id, metric, int(benchmark.data_version or 0), sorted(reference_ids)])
    return hashlib.sha256(material.encode()).hexdigest()


def _entry_from_row(session: Session, row: SessionPrior) -> PriorEntry:
    item_pks = tuple(int(p) for p in row.item_pks)
    ids = dict(session.execute(select(Item.pk, Item.item_id).where(Item.pk.in_(item_pks))).all())
    return _entry(row.key, BucketPrior.from_bytes(row.blob), item_pks, tuple(ids.get(p, str(p)) for p in item_pks))


def load_prior(session: Session, key: str) -> PriorEntry:
    entry = cache.priors.get(key)
    if entry is None:
        row = session.get(SessionPrior, key)
        if row is None:
            raise NotFound(f"the prior {key!r} of this session is gone", [{"prior": key, "detail": "missing"}])
        entry = _entry_from_row(session, row)
        cache.priors.put(key, entry)
    return entry


def _store_levels(session: Session, entry: PriorEntry) -> None:
    """Compute the level histogram of a stored prior that has none yet, and store it with it (once)."""
    if entry.prior.has_level_hist:
        return
    _ = entry.prior.level_hist  # computed on first access
    session.execute(update(SessionPrior).where(SessionPrior.key == entry.key).values(blob=entry.prior.to_bytes()))


def obtain_prior(session: Session, benchmark: Benchmark, metric: str, reference_ids: list[str],
                  reference: np.ndarray, item_pks: list[int], item_ids: list[str], *,
                  levels: bool = False) -> PriorEntry:
    """The stored prior of this reference set, or a new one computed and stored now.

    ``levels``: the session's method reads BayesAME's level histogram (``BucketPrior.level_hist``,
    O(B^2 K_r): 12,000 items x 400 references take minutes). It is computed and stored only then; the
    item-level methods (the default ``refgp_v3`` among them) never need it."""
    key = prior_key(benchmark, metric, reference_ids)
    if session.scalars(select(SessionPrior.key).where(SessionPrior.key == key)).first() is not None:
        entry = load_prior(session, key)
        if levels:
            _store_levels(session, entry)
        return entry
    prior = BucketPrior.from_reference_scores(reference)
    if levels:
        _ = prior.level_hist  # computed on first access, stored below
    row = SessionPrior(key=key, benchmark_id=benchmark.id, n_items=int(prior.n_items),
                       n_buckets=int(prior.n_buckets), item_pks=[int(p) for p in item_pks], blob=prior.to_bytes())
    try:
        with session.begin_nested():
            session.add(row)
    except IntegrityError:  # another request stored the same prior first: use theirs
        return load_prior(session, key)
    entry = _entry(key, prior, tuple(item_pks), tuple(item_ids))
    cache.priors.put(key, entry)
    return entry
