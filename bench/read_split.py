#!/usr/bin/python3
"""Read the train split of user-events@v1 one way and print the seconds it
took (imports excluded), after checking the record count.

Usage: read_split.py WAY RECORDS [STORE_DIR KEYS_FILE]

WAY is one of:
  kiln      kiln.open("user-events@v1").records("train"): each shard fetched
            from the store, its BLAKE2b-256 checked, decompressed and cut
            into records (bytes), the next shard read ahead in a thread
  oneshot   for each shard file of the split (KEYS_FILE, in order, under
            STORE_DIR): read it whole, ZstdDecompressor().decompress() it in
            one call, bytes.split() it into lines; no hash check
  stream    for each shard file: io.BufferedReader(ZstdDecompressor()
            .stream_reader(f)) line by line; no hash check
  loader0   kiln.torch.DataLoader(IterableDataset(...), batch_size=256,
  loader2   num_workers=0 or 2), records as bytes, counted per batch
The kiln ways find the version through KILN_MANIFEST and KILN_STORE (and
libkiln through KILN_LIBRARY, the package through PYTHONPATH).
"""

import io
import sys
import time

import zstandard


def main():
    way, want = sys.argv[1], int(sys.argv[2])
    n = 0
    if way == "kiln":
        import kiln
        v = kiln.open("user-events@v1")
        t = time.perf_counter()
        n = sum(1 for _ in v.records("train"))
    elif way in ("oneshot", "stream"):
        store, keys = sys.argv[3], open(sys.argv[4], encoding="utf-8").read().split()
        d = zstandard.ZstdDecompressor()
        t = time.perf_counter()
        for k in keys:
            with open("%s/%s" % (store, k), "rb") as f:
                if way == "oneshot":
                    lines = d.decompress(f.read()).split(b"\n")
                    n += len(lines) - (lines[-1] == b"")
                else:
                    for _ in io.BufferedReader(d.stream_reader(f)):
                        n += 1
    elif way in ("loader0", "loader2"):
        import kiln.torch
        ds = kiln.torch.IterableDataset("user-events@v1", "train")
        loader = kiln.torch.DataLoader(ds, batch_size=256, num_workers=int(way[-1]))
        t = time.perf_counter()
        for batch in loader:
            n += len(batch)
    else:
        sys.exit("read_split.py: unknown way %r" % way)
    print("%.4f" % (time.perf_counter() - t))
    if n != want:
        sys.exit("read_split.py: %s read %d records, the split holds %d" % (way, n, want))


if __name__ == "__main__":
    main()
