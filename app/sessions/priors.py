"""Prior storage: the bucket prior of a (benchmark, metric, data version, reference set) is computed
once, stored in ``session_priors`` and reused (deserialized priors are kept in ``cache.priors``)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import numpy as np
from sqlalchemy import select
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


def prior_key(benchmark: Benchmark, metric: str, reference_ids: list[str]) -> str:
    material = json.dumps([benchmark.id, metric, int(benchmark.data_version or 0), sorted(reference_ids)])
    return hashlib.sha256(material.encode()).hexdigest()


def _entry_from_row(session: Session, row: SessionPrior) -> PriorEntry:
    item_pks = tuple(int(p) for p in row.item_pks)
    ids = dict(session.execute(select(Item.pk, Item.item_id).where(Item.pk.in_(item_pks))).all())
    return PriorEntry(row.key, BucketPrior.from_bytes(row.blob), item_pks,
                      tuple(ids.get(p, str(p)) for p in item_pks), {p: j for j, p in enumerate(item_pks)})


def load_prior(session: Session, key: str) -> PriorEntry:
    entry = cache.priors.get(key)
    if entry is None:
        row = session.get(SessionPrior, key)
        if row is None:
            raise NotFound(f"the prior {key!r} of this session is gone", [{"prior": key, "detail": "missing"}])
        entry = _entry_from_row(session, row)
        cache.priors.put(key, entry)
    return entry


def obtain_prior(session: Session, benchmark: Benchmark, metric: str, reference_ids: list[str],
                  reference: np.ndarray, item_pks: list[int], item_ids: list[str]) -> PriorEntry:
    """The stored prior of this reference set, or a new one computed and stored now."""
    key = prior_key(benchmark, metric, reference_ids)
    if session.scalars(select(SessionPrior.key).where(SessionPrior.key == key)).first() is not None:
        return load_prior(session, key)
    prior = BucketPrior.from_reference_scores(reference)
    row = SessionPrior(key=key, benchmark_id=benchmark.id, n_items=int(prior.n_items),
                       n_buckets=int(prior.n_buckets), item_pks=[int(p) for p in item_pks], blob=prior.to_bytes())
    try:
        with session.begin_nested():
            session.add(row)
    except IntegrityError:  # another request stored the same prior first: use theirs
        return load_prior(session, key)
    entry = PriorEntry(key, prior, tuple(item_pks), tuple(item_ids), {p: j for j, p in enumerate(item_pks)})
    cache.priors.put(key, entry)
    return entry
