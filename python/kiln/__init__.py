"""Read kiln dataset versions from Python.

    import json, kiln
    v = kiln.open("orders@v3", manifest="/srv/kiln/manifest.git", store="s3://datasets/kiln")
    for order in v.records("train", seed=17, epoch=2, shuffle_buffer=10000, decode=json.loads):
        ...

A binding of libkiln (ctypes): naming a version, assigning shards to
workers, verifying every shard's BLAKE2b-256 before any of its records is
yielded, and the position a reader can be restored to are libkiln's C code,
the same code `kiln cat` runs. docs/READING.md ("Python and PyTorch") has
the guarantees; kiln.torch has the PyTorch dataset, Version.to_pandas a
pandas DataFrame and Version.dicts the records as dicts.
"""

import collections
import ctypes
import itertools
import json
import operator
import os
import struct
import weakref

from ._version import __version__
from ._lib import (SPLITS, DEFINITION_FIELDS, CURSOR_OPTIONS_VERSION, CursorOptions, Definition, Error,
                   InvalidError, NotFoundError, REPORT, RetryError, Shard, Stats, Trust, check, lib, text)

__all__ = ["open", "locate", "Version", "Records", "ShardInfo", "Error", "InvalidError", "NotFoundError",
           "RetryError", "SPLITS", "__version__"]

_SIGNATURE_NAMES = {0: "none", 1: "tampered", 2: "good"}


def _split_index(split):
    try:
        return SPLITS.index(split)
    except ValueError:
        raise InvalidError(-1, "split %r: one of %s" % (split, ", ".join(SPLITS))) from None


# One shard: hash, bytes (compressed), raw_bytes (JSON Lines), records, key, url.
ShardInfo = collections.namedtuple("ShardInfo", "hash bytes raw_bytes records key url")


def _resolve_cache(spec, cache):
    """A cache node's directory: its fetched manifest, its shards as a
    file store, and the commit its view of spec's ref shows (what the node
    has on disk), when it has one."""
    dataset, _, ref = spec.partition("@")
    link = os.path.join(cache, "views", dataset, ref or "main")
    if os.path.islink(link):
        commit = os.path.basename(os.readlink(link))
        if os.path.exists(os.path.join(cache, "views", dataset, commit, "ready")):
            spec = "%s@%s" % (dataset, commit)
    return spec, os.path.join(cache, "manifest.git"), "file://" + os.path.abspath(cache)


def locate(spec, manifest=None, store=None, cache=None):
    """(spec, manifest, store) as open() reads them: the defaults from
    $KILN_MANIFEST and $KILN_STORE, a cache directory's manifest, store and
    pinned commit."""
    if cache is not None:
        spec, cache_manifest, cache_store = _resolve_cache(spec, cache)
        manifest = manifest or cache_manifest
        store = store or cache_store
    manifest = manifest or os.environ.get("KILN_MANIFEST")
    if store is None:
        store = os.environ.get("KILN_STORE")
    if not manifest:
        raise InvalidError(-1, "kiln.open(%r): no manifest (manifest= or $KILN_MANIFEST)" % spec)
    return spec, manifest, store


def open(spec, manifest=None, store=None, cache=None):  # pylint: disable=redefined-builtin
    """The version `spec` ("orders", "orders@main", "orders@v3", "orders@<commit>").

    manifest: the bare manifest repository (default $KILN_MANIFEST).
    store: where the shards are: file://DIR, s3://BUCKET/PREFIX (credentials
    and region from AWS_* as kiln reads them), http://NODE:PORT (a cache
    node; its token from $KILN_CACHE_TOKEN) (default $KILN_STORE). None:
    listing and metadata only.
    cache: a cache node's directory read in place (a job on the node's
    machine): manifest DIR/manifest.git and store file://DIR unless given,
    and a ref the node pins is read at the commit its view shows.
    """
    return Version(*locate(spec, manifest, store, cache))


class Version:
    """One dataset version: a commit of the manifest repository, and the
    store that holds its shards. Not shared between processes or threads:
    open it where it is read (kiln.torch does so in each DataLoader worker)."""

    def __init__(self, spec, manifest, store=None):
        self._r = ctypes.c_void_p()
        self._pid = os.getpid()
        check(lib.kiln_reader_open(ctypes.byref(self._r), os.fsencode(manifest), spec.encode(),
                                   os.fsencode(store) if store else None, None))
        self.manifest = manifest
        self.store = store
        self.dataset = text(lib.kiln_reader_dataset(self._r))
        self.commit = text(lib.kiln_reader_commit(self._r))
        self.ref = text(lib.kiln_reader_ref(self._r))
        self._trust = None
        self._records = weakref.WeakSet()  # open Records, closed with the version

    def _handle(self):
        if not self._r:
            raise InvalidError(-1, "%s@%s: the version is closed" % (self.dataset, self.commit[:12]))
        if os.getpid() != self._pid:
            raise InvalidError(-1, "%s@%s: opened in process %d, used in %d: open the version "
                               "in each process" % (self.dataset, self.commit[:12], self._pid,
                                                    os.getpid()))
        return self._r

    def close(self):
        """Closes the version and its Records (their read-ahead stops); a
        Records used afterwards raises InvalidError. Leaving a `with` block
        closes too."""
        for records in list(getattr(self, "_records", ())):
            records.close()
        if self._r and os.getpid() == self._pid:
            lib.kiln_reader_close(self._r)
        self._r = ctypes.c_void_p()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_r", None):
            self.close()

    def __repr__(self):
        return "<kiln.Version %s@%s %s>" % (self.dataset, self.commit[:12], self.ref or "")

    splits = SPLITS

    def shards(self, split="train"):
        """The split's shards in hash order, as ShardInfo."""
        arr = ctypes.POINTER(Shard)()
        n = ctypes.c_size_t()
        check(lib.kiln_reader_shards(self._handle(), _split_index(split), ctypes.byref(arr),
                                     ctypes.byref(n)))
        return [ShardInfo(s.hash.decode(), s.bytes, s.raw_bytes, s.records, s.key.decode(), text(s.url))
                for s in arr[:n.value]]

    @property
    def stats(self):
        """The version's counts (stats.json): records_in, valid, quarantined,
        erased (curated records `kiln erase` removed; records_in = valid +
        quarantined + erased), and per split records, shards, bytes, raw_bytes."""
        st = Stats()
        check(lib.kiln_reader_read_stats(self._handle(), ctypes.byref(st)))
        return {
            "records_in": st.records_in, "valid": st.valid, "quarantined": st.quarantined,
            "erased": st.erased,
            "splits": {name: {f: getattr(st.splits[i], f) for f in ("records", "shards", "bytes",
                                                                    "raw_bytes")}
                       for i, name in enumerate(SPLITS)},
        }

    @property
    def definition(self):
        """How the version was made (dataset.json): contract id and version,
        token scheme, key id and version (never the key), split scheme, key
        and salt, shard format and compression."""
        d = Definition()
        check(lib.kiln_reader_read_definition(self._handle(), ctypes.byref(d)))
        return {f: text(getattr(d, f)) for f in DEFINITION_FIELDS}

    @property
    def contract(self):
        d = self.definition
        return {"id": d["contract_id"], "version": d["contract_version"]}

    @property
    def key_id(self):
        return self.definition["key_id"]

    def verify(self, trusted_keys=None, deep=False):
        """kiln verify from Python: the tag bound to its name, the signature
        (against the ssh-ed25519 keys of trusted_keys, an allowed-signers
        file or a .pub), the tree, and with deep every shard's size and hash
        in the store. A dict: signature ("good", "tampered" or "none"),
        fingerprint, trusted, must_be_signed, problems (one line each; empty:
        the version can be trusted), shards_ok."""
        problems = []
        report = REPORT(lambda ctx, line: problems.append(text(line)))
        t = Trust()
        check(lib.kiln_reader_verify(self._handle(), os.fsencode(trusted_keys) if trusted_keys else None,
                                     1 if deep else 0, ctypes.byref(t), report, None))
        return {"signature": _SIGNATURE_NAMES.get(t.signature, str(t.signature)),
                "fingerprint": t.fingerprint.decode() or None, "trusted": bool(t.trusted),
                "must_be_signed": bool(t.must_be_signed), "problems": problems,
                "shards_ok": t.shards_ok}

    @property
    def signature(self):
        """"good", "tampered" or "none" (the tag's for a promoted version, else the commit's)."""
        if self._trust is None:
            self._trust = self.verify()
        return self._trust["signature"]

    def records(self, split="train", rank=0, world_size=1, seed=None, epoch=0, shuffle_buffer=0,
                decode=None):
        """Records of `split` for worker `rank` of `world_size`: shards
        assigned as kiln cat assigns them, shuffled by seed and epoch when a
        seed is given (else hash order), records shuffled through a buffer
        of shuffle_buffer records when > 0. Each record is bytes (one JSON
        line without its newline), or decode(bytes)."""
        return Records(self, split, rank, world_size, seed, epoch, shuffle_buffer, decode)

    def dicts(self, split="train", rank=0, world_size=1, seed=None, epoch=0, shuffle_buffer=0):
        """records(...) with each record a dict (its JSON object decoded):
        the same Records, with len(), state_dict() and load_state_dict()."""
        return self.records(split, rank, world_size, seed, epoch, shuffle_buffer, decode=json.loads)

    def to_pandas(self, split="train", columns=None):
        """The split as a pandas DataFrame, one row per record in kiln cat's
        order (shards in hash order). columns=None: every field, nested
        objects' fields as dotted columns ("device.os"), arrays as lists.
        columns=[...]: those columns in that order, each a field name or a
        dotted path into nested objects ("device" is the whole object,
        "device.os" its field); a record without it has None (NaN) there.
        Only the asked columns are kept while reading. Needs pandas
        (python3-pandas), imported here."""
        pandas = _pandas()
        if columns is not None:
            if isinstance(columns, (str, bytes)) or not all(isinstance(c, str) for c in columns):
                raise InvalidError(-1, "to_pandas: columns is a list of field names or dotted paths, "
                                   "not %r" % (columns,))
            columns = list(columns)
            if len(set(columns)) != len(columns):
                raise InvalidError(-1, "to_pandas: a column asked for twice in %r" % (columns,))
        records = self.records(split, decode=json.loads)
        try:
            if columns is None:
                return pandas.DataFrame([_flatten(r) for r in records])
            return pandas.DataFrame([[_field(r, c) for c in columns] for r in records], columns=columns)
        finally:
            records.close()


def _pandas():
    try:
        import pandas  # pylint: disable=import-outside-toplevel
    except ImportError as e:
        raise ImportError("kiln: Version.to_pandas needs pandas (%s): install python3-pandas "
                          "(Debian) or pip install pandas" % e) from None
    return pandas


def _field(record, path):
    """record's value of a field name, else of a dotted path into nested
    objects; None when the record has neither."""
    if path in record:
        return record[path]
    value = record
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def _flatten(record, prefix="", out=None):
    """A record's fields with nested objects' fields as dotted keys (the
    order of the record); arrays and scalars as they are."""
    out = {} if out is None else out
    for key, value in record.items():
        if isinstance(value, dict) and value:
            _flatten(value, prefix + key + ".", out)
        else:
            out[prefix + key] = value
    return out


class Records:
    """One worker's records of a split for one epoch: an iterator (iterating
    again goes on where it stopped) with a position to save and restore.

    state_dict() is a small JSON-serialisable dict (kiln's cursor state,
    docs/FORMATS.md "Reading"); load_state_dict() of it on a Records of the
    same version, split, rank, world size, seed, epoch and shuffle buffer
    yields exactly the records the original would have yielded next, in the
    same order. A state of another reading is refused (InvalidError naming
    what differs). len() is the number of records of this worker's epoch.
    """

    batch_records = 1024
    batch_bytes = 4 << 20

    def __init__(self, version, split, rank, world_size, seed, epoch, shuffle_buffer, decode):
        if world_size < 1 or not 0 <= rank < world_size:
            raise InvalidError(-1, "rank %r of world_size %r: 0 <= rank < world_size" % (rank, world_size))
        self.version = version
        self.decode = decode
        opts = CursorOptions(version=CURSOR_OPTIONS_VERSION, split=_split_index(split), rank=rank,
                             world=world_size, seed=seed or 0, shuffle=seed is not None, epoch=epoch,
                             shuffle_buffer=shuffle_buffer)
        self._c = ctypes.c_void_p()
        check(lib.kiln_cursor_open(ctypes.byref(self._c), version._handle(), ctypes.byref(opts)))
        version._records.add(self)
        self._data = ctypes.c_void_p()
        self._len = ctypes.c_size_t()
        self._count = ctypes.c_size_t()
        self._format = ctypes.c_void_p()
        self._format_len = ctypes.c_size_t()
        self._base = 0  # records handed out before the current batch
        self._n, self._it = 0, iter(())  # the current batch, and what is left of it
        self._gen = None

    def __len__(self):
        return lib.kiln_cursor_records(self._cursor())

    def _cursor(self):
        self.version._handle()
        if not self._c:
            raise InvalidError(-1, "the records reader is closed")
        return self._c

    def close(self):
        """Stops reading (the read-ahead too): later use raises InvalidError,
        records of the batch in hand included."""
        if self._c and os.getpid() == self.version._pid:
            lib.kiln_cursor_close(self._c)
        self._c = ctypes.c_void_p()
        # a generator suspended in the batch in hand meets the end of it,
        # then the closed cursor
        collections.deque(getattr(self, "_it", ()), maxlen=0)

    def __del__(self):
        if getattr(self, "_c", None):
            self.close()

    def __iter__(self):
        self._cursor()  # a closed version or records: InvalidError, not an empty iteration
        if self._gen is None:
            # a decode error ends the generator (and the iteration), as ever
            self._gen = (itertools.chain.from_iterable(self._batches()) if self.decode is None
                         else self._records())
        return self._gen

    def __next__(self):
        return next(iter(self))

    def _batch(self):
        """The next records of the cursor as a tuple iterator (None at the end).
        libkiln hands over the batch's bytes and its records' lengths as a
        struct format: the records are cut from libkiln's buffer in C, without
        a copy of the batch and without a Python-level scan of its bytes."""
        self._base = self.position
        self._n, self._it = 0, iter(())
        c = self._cursor()
        rc = check(lib.kiln_cursor_next_batch(c, self.batch_records, self.batch_bytes,
                                              ctypes.byref(self._data), ctypes.byref(self._len),
                                              ctypes.byref(self._count)))
        if rc == 0:
            return None
        check(lib.kiln_cursor_batch_format(c, ctypes.byref(self._format), ctypes.byref(self._format_len)))
        data = (ctypes.c_char * self._len.value).from_address(self._data.value)
        cut = struct.Struct(ctypes.string_at(self._format.value, self._format_len.value))
        lines = cut.unpack_from(data)
        if len(lines) != self._count.value:
            raise Error(-1, "kiln_cursor_batch_format: %d records, the batch has %d"
                        % (len(lines), self._count.value))
        self._n, self._it = len(lines), iter(lines)
        return self._it

    def _batches(self):
        """Each batch's records (a tuple iterator): chained in C, no Python
        frame per record."""
        while True:
            it = self._batch()
            if it is None:
                return
            yield it

    def _records(self):
        decode = self.decode
        while True:
            it = self._batch()
            if it is None:
                return
            # the tuple iterator counts what was handed out (position)
            yield from map(decode, it)

    @property
    def position(self):
        """Records of the epoch handed out so far."""
        return self._base + self._n - operator.length_hint(self._it)

    def state_dict(self):
        buf = ctypes.create_string_buffer(512)
        check(lib.kiln_cursor_state_at(self._cursor(), self.position, buf, len(buf)))
        return json.loads(buf.value)

    def load_state_dict(self, state):
        """Continue from state (a dict from state_dict, or its JSON text).
        libkiln decodes it (the one decoder, strict): a state it refuses is
        an InvalidError."""
        c = self._cursor()
        try:
            if not isinstance(state, (str, bytes)):
                state = json.dumps(state, separators=(",", ":"), allow_nan=False)
            if isinstance(state, str):
                state = state.encode()
        except (TypeError, ValueError) as e:
            raise InvalidError(-1, "cursor state: not JSON text or a dict of JSON values (%s)"
                               % type(e).__name__) from None
        if b"\0" in state:
            raise InvalidError(-1, "cursor state: a NUL byte")
        check(lib.kiln_cursor_restore(c, state))
        self._base = lib.kiln_cursor_yielded(c)
        self._n, self._it = 0, iter(())
        self._gen = None
