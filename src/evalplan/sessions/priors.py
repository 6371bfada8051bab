"""Prior storage: the bucket prior of a (benchmark, metric, data version, reference set) is computed
once, stored in ``session_priors`` and reused (deserialized priors are kept in ``cache.priors``).

What the estimators derive from a prior (``evalplan.core.sequential.base.derived``: reference features,
calibration curves, ...) is stored with it (``session_priors.derived``) once a session computed it, so a session
on the same (data version, reference set) starts warm on every API worker and after a restart."""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import io
import json
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from evalplan.benchmarks.repository import item_ids_by_pk
from evalplan.core.sequential import BucketPrior
from evalplan.core.sequential.base import derived, store_derived
from evalplan.db.models import Benchmark, SessionPrior
from evalplan.kit.errors import NotFound
from evalplan.sessions import cache


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


#: dataclasses a stored derived value may be rebuilt as (module prefix); anything else is not restored
DERIVED_MODULES = ("evalplan.core.",)


def _encode(value: Any, arrays: list[np.ndarray]) -> Any:
    """A JSON spec of ``value`` (arrays go to ``arrays``), or raise TypeError for what is not stored."""
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            raise TypeError("object array")
        arrays.append(value)
        return {"a": len(arrays) - 1}
    if isinstance(value, (bool, np.bool_)):
        return {"b": bool(value)}
    if isinstance(value, (int, np.integer)):
        return {"i": int(value)}
    if isinstance(value, (float, np.floating)):
        return {"f": float(value)}
    if isinstance(value, (tuple, list)):
        return {"t": [_encode(v, arrays) for v in value]}
    if dataclasses.is_dataclass(value) and not isinstance(value, type) \
            and type(value).__module__.startswith(DERIVED_MODULES):
        return {"d": f"{type(value).__module__}:{type(value).__qualname__}",
                "fields": {f.name: _encode(getattr(value, f.name), arrays) for f in dataclasses.fields(value)}}
    raise TypeError(type(value).__name__)


def _decode(spec: Any, arrays: Any) -> Any:
    if "a" in spec:
        return arrays[f"a{spec['a']}"]
    for tag, kind in (("b", bool), ("i", int), ("f", float)):
        if tag in spec:
            return kind(spec[tag])
    if "t" in spec:
        return tuple(_decode(v, arrays) for v in spec["t"])
    module, _, name = str(spec["d"]).partition(":")
    if not module.startswith(DERIVED_MODULES):
        raise TypeError(module)
    cls = getattr(importlib.import_module(module), name)
    return cls(**{k: _decode(v, arrays) for k, v in spec["fields"].items()})


def pack_derived(values: dict[str, Any]) -> tuple[bytes, list[str]]:
    """The storable entries of a prior's derived cache as one npz blob (no pickle), and their keys."""
    arrays: list[np.ndarray] = []
    manifest: dict[str, Any] = {}
    for key, value in values.items():
        mark = len(arrays)
        try:
            manifest[key] = _encode(value, arrays)
        except TypeError:
            del arrays[mark:]
    buf = io.BytesIO()
    named: dict[str, Any] = {f"a{k}": a for k, a in enumerate(arrays)}
    named["manifest"] = np.array(json.dumps(manifest))
    np.savez(buf, **named)
    return buf.getvalue(), sorted(manifest)


def unpack_derived(data: bytes) -> dict[str, Any]:
    """What ``pack_derived`` stored (entries that cannot be rebuilt are left out: they are recomputed)."""
    out: dict[str, Any] = {}
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        manifest = json.loads(str(z["manifest"]))
        arrays = {name: z[name] for name in z.files if name != "manifest"}
    for key, spec in manifest.items():
        try:
            out[key] = _decode(spec, arrays)
        except (TypeError, AttributeError, ImportError, KeyError, ValueError):
            continue
    return out


def _restore_derived(prior: BucketPrior, data: bytes | None) -> None:
    stored: list[str] = []
    if data:
        for key, value in unpack_derived(data).items():
            store_derived(prior, key, value)
            stored.append(key)
    prior._persisted_keys = frozenset(stored)  # type: ignore[attr-defined]


def persist_derived(session: Session, entry: PriorEntry) -> None:
    """Store the prior's derived values when a session computed new ones (in the caller's transaction)."""
    derived(entry.prior, "")  # makes sure the cache exists
    values: dict[str, Any] = entry.prior._derived_cache  # type: ignore[attr-defined]
    if set(values) <= set(getattr(entry.prior, "_persisted_keys", frozenset())):
        return
    blob, keys = pack_derived(dict(values))
    if set(keys) <= set(getattr(entry.prior, "_persisted_keys", frozenset())):
        return
    session.execute(update(SessionPrior).where(SessionPrior.key == entry.key).values(derived=blob))
    entry.prior._persisted_keys = frozenset(keys)  # type: ignore[attr-defined]


def _entry_from_row(session: Session, row: SessionPrior) -> PriorEntry:
    item_pks = tuple(int(p) for p in row.item_pks)
    ids = item_ids_by_pk(session, item_pks)
    prior = BucketPrior.from_bytes(row.blob)
    _restore_derived(prior, row.derived)
    return _entry(row.key, prior, item_pks, tuple(ids.get(p, str(p)) for p in item_pks))


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
