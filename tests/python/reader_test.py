"""The Python reader (python/kiln) against a version made by kiln run, checked
with tools kiln did not write: git for the tree files, the kiln CLI for the
records (kiln cat runs the same rule in another process), Python's own
hashlib for corruption. Run by tests/integration/python_reader.sh:

    reader_test.py KILN WORKDIR PART

PART: "reader" (the kiln package), "torch" (kiln.torch, python3-torch) or
"edges" (a version closed under its records, each way; refused states).
Prints "FAIL: ..." per failed check and "N passed, M failed" at the end.
"""

import collections
import hashlib
import io
import json
import multiprocessing
import os
import random
import shutil
import signal
import subprocess
import sys
import time

import zstandard

import kiln

KILN, WORK, PART = sys.argv[1], sys.argv[2], sys.argv[3]
MANIFEST = os.path.join(WORK, "m.git")
STORE = "file://" + os.path.join(WORK, "store")
SPEC = "user-events@v1"
# How DataLoader workers start: fork (torch's default) unless the script says
# otherwise. Under the sanitizer build it says forkserver: the ASan runtime
# preloaded into python has no fork handler for its allocator (GCC 12), so a
# worker forked while another thread of the training process was in malloc
# waits forever on the allocator's lock; the forkserver forks from a process
# with one thread.
MP_CONTEXT = os.environ.get("KILN_TEST_MP_CONTEXT") or None
if MP_CONTEXT == "forkserver":
    multiprocessing.set_forkserver_preload(["kiln.torch"])
passed = failed = 0


def check(name, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAIL: %s%s" % (name, (": " + detail) if detail else ""))


def raises(fn, exc, *words):
    try:
        fn()
    except exc as e:
        return all(w in str(e) for w in words) or print("  message: %s" % e)
    return False


def cli(*args):
    return subprocess.run([KILN, *args], check=True, capture_output=True,
                          env=dict(os.environ, KILN_MANIFEST=MANIFEST, KILN_STORE=STORE)).stdout


def git(*args):
    return subprocess.run(["git", "--git-dir", MANIFEST, *args], check=True, capture_output=True).stdout


def reader_part():
    v = kiln.open(SPEC, manifest=MANIFEST, store=STORE)
    commit = git("rev-parse", "refs/tags/user-events/v1^{commit}").decode().strip()
    check("version: dataset, commit, ref", (v.dataset, v.commit, v.ref) ==
          ("user-events", commit, "refs/tags/user-events/v1"), repr(v))
    stats = json.loads(git("show", commit + ":stats.json"))
    dataset = json.loads(git("show", commit + ":dataset.json"))
    check("stats: records as stats.json says", v.stats["valid"] == stats.get("valid") and
          v.stats["splits"]["train"]["records"] == stats["splits"]["train"]["records"],
          "%r / %r" % (v.stats, stats))
    check("definition: the key id of dataset.json (never a key)",
          v.key_id and v.key_id in json.dumps(dataset) and v.contract["id"] == "user-events",
          repr(v.definition))
    ls = [json.loads(l) for l in cli("ls", SPEC, "--split", "train", "--format", "json").splitlines()]
    check("shards: as kiln ls lists them", [(s.hash, s.records, s.bytes, s.key) for s in v.shards("train")]
          == [(s["shard"], s["records"], s["bytes"], s["key"]) for s in ls])
    check("signature: a signed tag is good", v.signature == "good", v.signature)
    t = v.verify(deep=True)
    check("verify --deep: no problems, every shard intact", not t["problems"] and
          t["shards_ok"] == sum(v.stats["splits"][s]["shards"] for s in kiln.SPLITS), repr(t))

    # the records are those kiln cat gives for the same reading
    for args, kw in [((), {}),
                     (("--rank", "1", "--world-size", "3", "--shuffle-seed", "9", "--epoch", "2"),
                      dict(rank=1, world_size=3, seed=9, epoch=2)),
                     (("--shuffle-seed", "4", "--epoch", "1", "--shuffle-buffer", "77", "--split", "dev"),
                      dict(split="dev", seed=4, epoch=1, shuffle_buffer=77))]:
        want = cli("cat", SPEC, *args).splitlines()
        got = list(v.records(**kw))
        check("records as kiln cat %s" % " ".join(args), got == want, "%d vs %d" % (len(got), len(want)))
    every = sorted(cli("cat", SPEC).splitlines())
    check("the split has records", len(every) > 1000)

    # four ranks, two epochs: each record once per epoch; epochs differ; a seed repeats
    def epoch(e, seed=21, buffer=0):
        return [r for rank in range(4) for r in v.records(rank=rank, world_size=4, seed=seed, epoch=e,
                                                          shuffle_buffer=buffer)]
    e0, e1 = epoch(0), epoch(1)
    check("epoch 0 over 4 ranks: each record once", sorted(e0) == every)
    check("epoch 1 over 4 ranks: each record once", sorted(e1) == every)
    check("the two epochs differ in order", e0 != e1)
    check("the same seed and epoch give the same order", epoch(1) == e1)
    b = epoch(1, buffer=300)
    check("a shuffle buffer keeps the records, changes the order", sorted(b) == every and b != e1)
    dec = list(v.records(decode=json.loads))
    check("decode=json.loads yields dicts", len(dec) == len(every) and all(isinstance(d, dict) for d in dec))
    check("len() is the worker's records", len(v.records(rank=2, world_size=4, seed=21)) ==
          len(list(v.records(rank=2, world_size=4, seed=21))))

    # stopped at random points, restored (from JSON): exactly the rest
    rng = random.Random(7)
    for buffer in (0, 500):
        kw = dict(rank=1, world_size=2, seed=3, epoch=5, shuffle_buffer=buffer)
        full = list(v.records(**kw))
        stops = [0, 1, 1023, 1024, 1025, len(full) - 1, len(full)] + rng.sample(range(len(full)), 6)
        bad = []
        for stop in stops:
            r = v.records(**kw)
            it = iter(r)
            head = [next(it) for _ in range(stop)]
            state = json.loads(json.dumps(r.state_dict()))
            r2 = v.records(**kw)
            r2.load_state_dict(state)
            if head + list(r2) != full:
                bad.append(stop)
        check("buffer %d: restored at %d points, exactly the rest" % (buffer, len(stops)), not bad, repr(bad))
        r = v.records(**kw)
        it = iter(r)
        a = [next(it) for _ in range(10)]
        st = r.state_dict()
        b = [next(it) for _ in range(10)]
        r.load_state_dict(st)
        check("buffer %d: a reader rewound to its own state repeats" % buffer, list(iter(r))[:10] == b)
        check("buffer %d: the state says what was read" % buffer, st["yielded"] == 10 and st["epoch"] == 5)

    r = v.records(rank=1, world_size=2, seed=3, epoch=5)
    next(iter(r))
    st = r.state_dict()
    check("a state of another world size is refused, naming it",
          raises(lambda: v.records(rank=1, world_size=4, seed=3, epoch=5).load_state_dict(st),
                 kiln.InvalidError, "world is 2", "4"))
    check("a state of another epoch is refused",
          raises(lambda: v.records(rank=1, world_size=2, seed=3, epoch=6).load_state_dict(st),
                 kiln.InvalidError, "epoch is 5"))
    other = dict(st, commit="0" * 40)
    check("a state of another version is refused",
          raises(lambda: v.records(rank=1, world_size=2, seed=3, epoch=5).load_state_dict(other),
                 kiln.InvalidError, "commit is " + "0" * 40))
    check("a state whose position does not add up is refused",
          raises(lambda: v.records(rank=1, world_size=2, seed=3, epoch=5).load_state_dict(dict(st, line=999999)),
                 kiln.InvalidError, "is not where"))
    check("an unknown version is NotFoundError",
          raises(lambda: kiln.open("user-events@v9", manifest=MANIFEST), kiln.NotFoundError, "v9"))
    check("a bad split is refused", raises(lambda: v.records(split="validation"), kiln.InvalidError, "validation"))

    # a corrupted shard: an error naming it, none of its records
    bad_store = os.path.join(WORK, "bad-store")
    shutil.copytree(os.path.join(WORK, "store"), bad_store)
    order = v.shards("train")
    mine = list(v.records(seed=8))
    # the records of the reading's first shard: until the state moves to shard 1
    seq = []
    r = v.records(seed=8)
    for rec in r:
        seq.append(rec)
        if r.state_dict()["shard"] == 1:
            break
    first_shard_records = len(seq)
    second_hash = None
    for s in order:
        path = os.path.join(bad_store, s.key)
        with open(path, "rb") as f:
            data = f.read()
        text = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data)).read()
        lines = text.splitlines()
        if lines and lines[0] == mine[first_shard_records]:
            second_hash = s.hash
            bad = bytearray(data)
            bad[len(bad) // 2] ^= 0xFF
            with open(path, "wb") as f:
                f.write(bad)
            check("the corrupted file no longer hashes to its name",
                  hashlib.blake2b(bytes(bad), digest_size=32).hexdigest() != s.hash)
            break
    check("the second shard of the reading was found", second_hash is not None)
    got = []
    err = None
    try:
        with kiln.open(SPEC, manifest=MANIFEST, store="file://" + bad_store) as vb:
            for rec in vb.records(seed=8):
                got.append(rec)
    except kiln.InvalidError as e:
        err = str(e)
    check("a corrupted shard raises an error naming it", err is not None and second_hash in err and
          "hash mismatch" in err, repr(err))
    check("and yields none of its records (the first shard's all)", got == mine[:first_shard_records],
          "%d records before the error, the first shard has %d" % (len(got), first_shard_records))

    # a cache node: over http, and its directory read in place
    node = os.environ.get("KILN_TEST_CACHE_URL")
    cache_dir = os.environ.get("KILN_TEST_CACHE_DIR")
    want = list(v.records(seed=2, epoch=1))
    with kiln.open(SPEC, manifest=MANIFEST, store=node) as vh:
        check("through a cache node (http): the same records", list(vh.records(seed=2, epoch=1)) == want)
    with kiln.open("user-events@v1", manifest=MANIFEST, cache=cache_dir) as vc:
        check("a cache node's directory in place: the same records", list(vc.records(seed=2, epoch=1)) == want)
        check("and the store is the cache directory", vc.store == "file://" + os.path.abspath(cache_dir))
    with kiln.open("user-events@main", manifest=MANIFEST, cache=cache_dir) as vc:
        view = os.path.basename(os.readlink(os.path.join(cache_dir, "views", "user-events", "main")))
        check("a pinned branch reads the commit its view shows", vc.commit == view, vc.commit + " " + view)

    # a version is refused in another process
    pid = os.fork()
    if pid == 0:
        try:
            v.shards("train")
            os._exit(1)
        except kiln.InvalidError as e:
            os._exit(0 if "open the version in each process" in str(e) else 2)
    check("a version used after fork is refused", os.waitpid(pid, 0)[1] == 0)


# ---- kiln.torch ---------------------------------------------------------------

def loader(rank, world, workers, epoch, batch=16, **kw):
    import kiln.torch
    ds = kiln.torch.IterableDataset(SPEC, manifest=MANIFEST, store=STORE, seed=13, shuffle_buffer=64,
                                    rank=rank, world_size=world, **kw)
    ds.set_epoch(epoch)
    # timeout: a worker that stops answering fails the test instead of hanging it
    return kiln.torch.DataLoader(ds, batch_size=batch, num_workers=workers, collate_fn=list,
                                 multiprocessing_context=MP_CONTEXT if workers else None,
                                 timeout=300 if workers else 0)


def torch_part():
    import kiln.torch
    every = sorted(cli("cat", SPEC).splitlines())
    epochs = []
    for e in (0, 1):
        got = [r for rank in range(4) for b in loader(rank, 4, 3, e) for r in b]
        c = collections.Counter(got)
        check("torch epoch %d, 4 ranks x 3 workers: each record exactly once" % e,
              sorted(got) == every, "%d records, %d distinct, max %d" % (len(got), len(c), max(c.values())))
        epochs.append(got)
    check("torch: the two epochs differ in order", epochs[0] != epochs[1])
    check("torch: the same seed and epoch give the same order",
          [r for rank in range(4) for b in loader(rank, 4, 3, 1) for r in b] == epochs[1])
    check("torch: decode=json.loads gives dicts", all(isinstance(x, dict) for b in
          kiln.torch.DataLoader(kiln.torch.IterableDataset(SPEC, manifest=MANIFEST, store=STORE,
                                                           decode=json.loads, rank=0, world_size=8),
                                batch_size=4, collate_fn=list) for x in b))

    # kiln.torch.DataLoader makes its batches in the workers' datasets: the
    # batches of torch's own fetcher (a plain DataLoader over the same
    # dataset), with drop_last, the default collate and a collate_fn
    import torch.utils.data as tud
    for workers, batch, kw in [(0, 16, {}), (2, 7, {"drop_last": True}), (3, 5, {"collate_fn": tuple}),
                               (2, 9, {"collate_fn": sorted, "drop_last": True})]:
        def ds():
            return kiln.torch.IterableDataset(SPEC, manifest=MANIFEST, store=STORE, seed=5, shuffle_buffer=8,
                                              rank=1, world_size=2)
        opts = dict(batch_size=batch, num_workers=workers, timeout=300 if workers else 0,
                    multiprocessing_context=MP_CONTEXT if workers else None, **kw)
        ours, theirs = list(kiln.torch.DataLoader(ds(), **opts)), list(tud.DataLoader(ds(), **opts))
        check("torch: %d workers, batch_size %d, %s: the batches of torch's own fetcher"
              % (workers, batch, sorted(kw)), ours == theirs and len(ours) > 3,
              "%d and %d batches" % (len(ours), len(theirs)))

    # stopped after random batches, resumed from the saved state: the same batches
    full = list(loader(2, 4, 3, 1))
    rng = random.Random(11)
    bad = []
    for stop in [1, 2, 3, len(full) - 1] + rng.sample(range(1, len(full)), 3):
        dl = loader(2, 4, 3, 1)
        head = []
        for b in dl:
            head.append(b)
            if len(head) == stop:
                state = json.loads(json.dumps(dl.state_dict()))
                break
        dl2 = loader(2, 4, 3, 0)  # the state sets the epoch
        dl2.load_state_dict(state)
        if head + list(dl2) != full:
            bad.append(stop)
    check("torch: resumed after 7 stops, exactly the rest (same batches, same order)", not bad, repr(bad))
    state = loader(2, 4, 3, 1).state_dict()
    check("torch: a state for another number of workers is refused",
          raises(lambda: loader(2, 4, 2, 1).load_state_dict(state), kiln.InvalidError, "num_workers"))
    check("torch: a state for another world size is refused",
          raises(lambda: loader(2, 8, 3, 1).load_state_dict(state), kiln.InvalidError, "world_size is 4"))

    # SIGKILL of a training process that checkpointed: resumed, exactly the rest
    full = [r for b in loader(1, 2, 3, 1) for r in b]
    log, ckpt = os.path.join(WORK, "train.log"), os.path.join(WORK, "ckpt.json")
    for f in (log, ckpt):
        if os.path.exists(f):
            os.unlink(f)
    # its own session: the SIGKILL takes the process and its DataLoader
    # workers at once, as when a preempted machine goes away
    child = subprocess.Popen([sys.executable, __file__, KILN, WORK, "train", "1", "2", "3", "1", log, ckpt],
                             start_new_session=True)
    deadline = time.time() + 60
    while time.time() < deadline and not os.path.exists(ckpt):
        time.sleep(0.05)
    time.sleep(0.3)
    os.killpg(child.pid, signal.SIGKILL)
    child.wait()
    check("torch: the training process checkpointed before SIGKILL", os.path.exists(ckpt))
    with open(ckpt) as f:
        ck = json.load(f)
    with open(log, "rb") as f:
        done = f.read().split(b"\n")[:ck["records"]]
    rest = [r for b in (lambda dl: (dl.load_state_dict(ck["data"]), dl)[1])(loader(1, 2, 3, 0)) for r in b]
    check("torch: checkpointed %d of %d records; resumed after SIGKILL, exactly the rest" %
          (ck["records"], len(full)), ck["records"] < len(full) and done + rest == full,
          "%d + %d vs %d" % (len(done), len(rest), len(full)))


def train(rank, world, workers, epoch, log, ckpt):
    """A training loop: consumes batches, appends their records to log and
    checkpoints {records, data} every 5 batches (atomically), slowly."""
    dl = loader(int(rank), int(world), int(workers), int(epoch))
    n = 0
    with open(log, "ab") as out:
        for i, b in enumerate(dl):
            out.write(b"".join(r + b"\n" for r in b))
            n += len(b)
            if i % 5 == 4:
                out.flush()
                os.fsync(out.fileno())
                with open(ckpt + ".tmp", "w") as f:
                    json.dump({"records": n, "data": dl.state_dict()}, f)
                os.rename(ckpt + ".tmp", ckpt)
            time.sleep(0.01)


# ---- a closed version, and states the reader refuses (issue 25) ---------------

CLOSE_SCENARIOS = {
    # each leaves a Records of a closed version, read ahead in flight, in `r`
    "close while the records are alive": """
v = kiln.open(SPEC, manifest=MANIFEST, store=STORE)
r = v.records(seed=1)
it = iter(r)
next(it)
v.close()
""",
    "leaving the with block": """
with kiln.open(SPEC, manifest=MANIFEST, store=STORE) as v:
    r = v.records(seed=1)
    it = iter(r)
    next(it)
""",
    "break out of the loop, then close": """
with kiln.open(SPEC, manifest=MANIFEST, store=STORE) as v:
    r = v.records(seed=1)
    it = iter(r)
    for rec in it:
        break
""",
    "break out of a loop over v.records() (the records left to the collector)": """
with kiln.open(SPEC, manifest=MANIFEST, store=STORE) as v:
    for rec in v.records(seed=1, decode=json.loads):
        break
    r = v.records(seed=2)
    it = iter(r)
    next(it)
gc.collect()
""",
}

CLOSE_USE = """
import gc, json, sys, kiln
SPEC, MANIFEST, STORE = sys.argv[1:4]
%s
ok = 0
for use in (lambda: next(it), lambda: next(iter(r)), lambda: list(r), r.state_dict, lambda: len(r),
            lambda: r.load_state_dict({"kiln_cursor": 1})):
    try:
        use()
        print("no error")
    except kiln.Error as e:
        ok += "closed" in str(e)
del r, it
gc.collect()
print("%%d errors" %% ok)
"""


def run_closed(name, body):
    """A scenario in its own python (a crash is its exit status), under a
    time limit: an error from every use of the records, then a clean exit."""
    try:
        p = subprocess.run([sys.executable, "-c", CLOSE_USE % body, SPEC, MANIFEST, STORE],
                           capture_output=True, timeout=120)
    except subprocess.TimeoutExpired:
        return False, "hung"
    out = p.stdout.decode(errors="replace").strip()
    return p.returncode == 0 and out == "6 errors", "exit %d, %r, %s" % (
        p.returncode, out, p.stderr.decode(errors="replace").strip()[-300:])


def edges_part():
    for name, body in CLOSE_SCENARIOS.items():
        for attempt in range(3):  # the read-ahead at another point each time
            ok, detail = run_closed(name, body)
            if not ok:
                break
        check("closed version, %s: each use of the records is a kiln.Error, no crash" % name, ok, detail)

    v = kiln.open(SPEC, manifest=MANIFEST, store=STORE)
    kw = dict(seed=3, epoch=1)
    full = list(v.records(**kw))
    r = v.records(**kw)
    it = iter(r)
    head = [next(it) for _ in range(10)]
    st = r.state_dict()
    text = json.dumps(st, separators=(",", ":"))

    def refused(state, *words):
        return raises(lambda: v.records(**kw).load_state_dict(state), kiln.Error, *words)

    check("state: a second yielded key is refused (not the last one taken)",
          refused(text[:-1] + ',"yielded":210}', "appears twice"))
    check("state: a second yielded key written with an escape is refused",
          refused(text[:-1] + ',"yi\\u0065lded":210}', "appears twice"))
    check("state: bytes after the JSON are a kiln.Error",
          refused(text + " {}", "not one JSON object") and refused(text + "x", "not one JSON object"))
    check("state: a NUL byte is a kiln.Error", refused(text.encode() + b"\0x", "NUL"))
    for value in (-1, 10 ** 30, 2 ** 64, 1.5, True, "10", None):
        check("state: yielded %r is refused" % (value,), refused(dict(st, yielded=value), "yielded must be"))
    check("state: rank -1 is refused", refused(dict(st, rank=-1), "rank must be"))
    check("state: a value JSON cannot hold is a kiln.Error",
          refused(dict(st, yielded=float("nan")), "not JSON") and refused(dict(st, yielded=object()), "not JSON"))
    check("state: an unknown key is refused", refused(dict(st, extra=1), "unknown key"))
    # a key written with an escape, once, is that key: the binding's position is libkiln's
    r2 = v.records(**kw)
    r2.load_state_dict(text.replace('"yielded"', '"yi\\u0065lded"') + "\n")
    check("state: an escaped key once is taken; position and records as libkiln has them",
          r2.position == 10 and head + list(r2) == full, "position %d" % r2.position)
    r3 = v.records(**kw)
    r3.load_state_dict(text)
    check("state: its JSON text restores", r3.state_dict() == st and head + list(r3) == full)
    v.close()


if __name__ == "__main__":  # not in a forkserver's DataLoader worker
    if PART == "train":
        train(*sys.argv[4:])
        sys.exit(0)
    {"reader": reader_part, "torch": torch_part, "edges": edges_part}[PART]()
    print("%d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)
