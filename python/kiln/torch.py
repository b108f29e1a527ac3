"""PyTorch over kiln: an IterableDataset that splits a version's split
across distributed ranks and DataLoader workers without overlap or loss,
and a DataLoader whose state_dict() / load_state_dict() resume an epoch
exactly at the batch after the last one the training loop received.

    ds = kiln.torch.IterableDataset("orders@v3", seed=17, shuffle_buffer=10000,
                                    decode=json.loads, manifest=..., store=...)
    loader = kiln.torch.DataLoader(ds, batch_size=256, num_workers=4)
    for epoch in range(start_epoch, epochs):
        ds.set_epoch(epoch)
        for batch in loader:
            ...
            checkpoint({"model": ..., "data": loader.state_dict()})

Each of R ranks with W workers reads as one of R*W kiln readers (virtual
rank rank*W + worker slot): the rule of kiln cat --rank/--world-size, so
every record of the split is read once per epoch. docs/READING.md has the
details.
"""

import itertools
import os

import torch
import torch.utils.data as tud

import kiln

__all__ = ["IterableDataset", "DataLoader"]


def _distributed():
    """(rank, world_size) from torch.distributed when it is initialised,
    else $RANK and $WORLD_SIZE (torchrun's), else (0, 1)."""
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))


class IterableDataset(tud.IterableDataset):
    """The records of one split of one version, for this rank.

    The version is resolved once, here: every worker (and every epoch)
    reads the same commit even when a branch moves meanwhile; give every
    rank a tag (orders@v3) or a commit so that all ranks agree. Records are
    bytes, or decode(bytes). seed=None reads shards in hash order; a seed
    shuffles shards by seed and epoch (set_epoch), and shuffle_buffer=N
    records through a buffer of N records in each worker.
    """

    def __init__(self, spec, split="train", *, manifest=None, store=None, cache=None, seed=None,
                 shuffle_buffer=0, decode=None, rank=None, world_size=None, epoch=0):
        super().__init__()
        spec, self.manifest, self.store = kiln.locate(spec, manifest, store, cache)
        with kiln.Version(spec, self.manifest, None) as v:  # no store: nothing to fork
            self.dataset, self.commit = v.dataset, v.commit
            total = v.stats["splits"][split]["records"] if split in kiln.SPLITS else 0
        if rank is None or world_size is None:
            rank, world_size = _distributed()
        if world_size < 1 or not 0 <= rank < world_size:
            raise kiln.InvalidError(-1, "rank %d of world_size %d" % (rank, world_size))
        self.split, self.seed, self.shuffle_buffer, self.decode = split, seed, shuffle_buffer, decode
        self.rank, self.world_size, self.epoch = rank, world_size, epoch
        self.records_in_split = total
        # set by kiln.torch.DataLoader
        self._tagged = False
        self._resume = {}
        self._first_slot = 0
        self._live = None
        self._batching = None  # (batch_size, drop_last, collate): whole batches from each worker

    def set_epoch(self, epoch):
        """The epoch the next iteration reads (its shard and record order)."""
        self.epoch = epoch

    def __iter__(self):
        info = tud.get_worker_info()
        workers, wid = (info.num_workers, info.id) if info else (1, 0)
        slot = (wid + self._first_slot) % workers
        version = kiln.Version("%s@%s" % (self.dataset, self.commit), self.manifest, self.store)
        records = version.records(self.split, self.rank * workers + slot, self.world_size * workers,
                                  self.seed, self.epoch, self.shuffle_buffer, self.decode)
        state = self._resume.get(slot)
        if state is not None:
            records.load_state_dict(state)
        if self._batching is not None:
            yield from self._batches(slot, records, *self._batching)
            return
        # kept after the last record: the collate of the last batch asks where
        # the reader stands (the records close with the next iteration)
        self._live = (slot, records)
        yield from records

    @staticmethod
    def _batches(slot, records, size, drop_last, collate):
        """kiln.torch.DataLoader's batches, made here (in the worker): the
        batch_size records torch's fetcher would take one next() at a time
        (islice takes exactly them, in C), collated, with where the reader
        stands after them; a short last batch unless drop_last, as torch."""
        it = iter(records)
        while True:
            samples = list(itertools.islice(it, size))
            if not samples or (drop_last and len(samples) < size):
                return
            yield _Batch(collate(samples), slot, records.state_dict())


class _Batch:
    """A collated batch with where its worker stood after it."""
    __slots__ = ("data", "slot", "state")

    def __init__(self, data, slot, state):
        self.data, self.slot, self.state = data, slot, state


class _Collate:
    """The user's collate_fn, then the worker's cursor state after the
    batch's last record (the fetcher has handed out exactly the batch)."""

    def __init__(self, dataset, collate):
        self.dataset, self.collate = dataset, collate

    def __call__(self, samples):
        info = tud.get_worker_info()
        ds = info.dataset if info else self.dataset
        slot, records = ds._live
        return _Batch(self.collate(samples), slot, records.state_dict())


def _batch_as_is(batch):
    """The collate_fn of a kiln.torch.DataLoader whose dataset makes whole
    batches: each item is a collated _Batch already."""
    return batch


class DataLoader(tud.DataLoader):
    """torch.utils.data.DataLoader over a kiln.torch.IterableDataset, with
    state_dict() / load_state_dict().

    state_dict() says, for each worker, exactly which records the batches
    delivered so far held; after load_state_dict() the next iteration
    yields exactly the batches the original would have yielded next (same
    records, same order, same batch boundaries), then the epoch ends. The
    state is a small JSON-serialisable dict. It is refused (kiln.InvalidError
    naming the field) by a loader of another version, split, seed, shuffle
    buffer, rank, world size or number of workers: changing the world size
    or the workers mid-epoch would reassign shards, so finish the epoch (or
    start the next one fresh) with the new layout.
    """

    def __init__(self, dataset, *args, **kwargs):
        if not isinstance(dataset, IterableDataset):
            raise TypeError("kiln.torch.DataLoader reads a kiln.torch.IterableDataset")
        if kwargs.get("persistent_workers"):
            raise ValueError("kiln.torch.DataLoader: persistent_workers would keep the first "
                             "epoch's workers (their epoch and resume point); leave it off")
        super().__init__(dataset, *args, **kwargs)
        # With a batch_size, each worker's dataset makes whole batches (same
        # records, order, boundaries, collate_fn and states as torch's
        # fetcher taking one record at a time, without a Python-level next()
        # per record, nor a sampler index per record in the main process);
        # torch then hands each batch on as one item. Needs torch's
        # _auto_collation and _index_sampler (1.13 has them), else the
        # records go one at a time as before.
        self._kiln_batching = None
        if self.batch_size is not None and all(
                isinstance(getattr(tud.DataLoader, a, None), property)
                for a in ("_auto_collation", "_index_sampler")):
            self._kiln_batching = (self.batch_size, self.drop_last, self.collate_fn)
            self.collate_fn = _batch_as_is
        else:
            self.collate_fn = _Collate(dataset, self.collate_fn)
        self._pending = None  # a state loaded for the next iteration
        self._reset(None)

    @property
    def _auto_collation(self):
        return getattr(self, "_kiln_batching", None) is None and self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def _reset(self, state):
        workers = max(1, self.num_workers)
        if state is None:
            self._states = [None] * workers
            self._batches = 0
            self._next_slot = 0
        else:
            self._states = list(state["workers"])
            self._batches = state["batches"]
            self._next_slot = state["next_slot"]

    def __iter__(self):
        ds = self.dataset
        state, self._pending = self._pending, None
        self._reset(state)
        ds._tagged = True
        ds._resume = {i: s for i, s in enumerate(self._states) if s is not None}
        ds._first_slot = self._next_slot
        ds._batching = self._kiln_batching
        try:
            for batch in super().__iter__():
                self._states[batch.slot] = batch.state
                self._batches += 1
                self._next_slot = (batch.slot + 1) % len(self._states)
                yield batch.data
        finally:
            ds._resume, ds._first_slot, ds._batching = {}, 0, None

    def _identity(self):
        ds = self.dataset
        return {"commit": ds.commit, "split": ds.split, "seed": ds.seed,
                "shuffle_buffer": ds.shuffle_buffer, "rank": ds.rank,
                "world_size": ds.world_size, "num_workers": max(1, self.num_workers)}

    def state_dict(self):
        d = {"kiln_loader": 1}
        d.update(self._identity())
        d.update({"epoch": self.dataset.epoch, "batches": self._batches,
                  "next_slot": self._next_slot, "workers": list(self._states)})
        return d

    def load_state_dict(self, state):
        """Resume from state at the next iteration (and set the dataset's epoch to its)."""
        if not isinstance(state, dict) or state.get("kiln_loader") != 1:
            raise kiln.InvalidError(-1, "not a kiln.torch.DataLoader state")
        for key, mine in self._identity().items():
            if state.get(key) != mine:
                raise kiln.InvalidError(-1, "kiln.torch.DataLoader state: %s is %r, this loader's is "
                                        "%r" % (key, state.get(key), mine))
        if len(state.get("workers", ())) != max(1, self.num_workers):
            raise kiln.InvalidError(-1, "kiln.torch.DataLoader state: workers do not match num_workers")
        self.dataset.set_epoch(state["epoch"])
        self._pending = state
        self._reset(state)
