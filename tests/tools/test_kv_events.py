#!/usr/bin/env python3
"""KV-cache events, rebuilt by an independent subscriber into the server's prefix-cache index.

Starts kvserve with server.kv_events_endpoint on a small cache, subscribes with Debian's
python3-zmq and decodes with python3-msgpack (vLLM's wire format: topic, 8-byte big-endian
sequence number, msgpack [ts, [events]]), and drives 1,000+ completions of shared system
prompts and distinct suffixes through the HTTP API, enough to evict cached blocks and preempt
running sequences. The index rebuilt from the events alone must then
  - have every BlockRemoved name a block it holds, with no gap in the sequence numbers;
  - hold as many blocks as the server reports cached (kvserve:prefix_cache_blocks);
  - predict, for each of a set of probe prompts sent one at a time, exactly the cached prompt
    tokens the server reports (usage.prompt_tokens_details.cached_tokens): the longest chain of
    full blocks, from the root, whose parent and tokens the index holds, up to the block holding
    the last prompt token.
Exit 77 (skipped) without the model or the Python modules, unless REQUIRE is 1.

usage: test_kv_events.py SERVER_BIN MODEL REQUIRE(0|1)
"""
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

BLOCK = 16


def skip(msg, require):
    print(msg)
    sys.exit(1 if require else 77)


class Index:
    """The server's cached blocks as the events tell them."""

    def __init__(self):
        self.blocks = {}  # hash -> (parent, tokens)
        self.by_content = {}  # (parent, tokens) -> hash
        self.lock = threading.Lock()
        self.last_seq = None
        self.errors = []
        self.stored = self.removed = self.batches = 0
        self.last_message = time.time()

    def apply(self, seq, batch):
        with self.lock:
            if self.last_seq is not None and seq != self.last_seq + 1:
                self.errors.append(f"sequence {self.last_seq} then {seq}")
            if self.last_seq is None and seq != 1:
                self.errors.append(f"first batch seen is {seq}, not 1 (events before the load were lost)")
            self.last_seq = seq
            self.batches += 1
            self.last_message = time.time()
            ts, events = batch[0], batch[1]
            if not isinstance(ts, float):
                self.errors.append(f"timestamp {ts!r}")
            for e in events:
                kind = e[0]
                if kind == "BlockStored":
                    hashes, parent, tokens, block_size = e[1], e[2], e[3], e[4]
                    if block_size != BLOCK or len(tokens) != BLOCK * len(hashes) or len(e) != 7:
                        self.errors.append(f"BlockStored shape {e!r}")
                        continue
                    for i, h in enumerate(hashes):
                        key = (parent, tuple(tokens[i * BLOCK:(i + 1) * BLOCK]))
                        if h in self.blocks:
                            self.errors.append(f"block {h} stored twice")
                        self.blocks[h] = key
                        self.by_content[key] = h
                        parent = h
                        self.stored += 1
                elif kind == "BlockRemoved":
                    for h in e[1]:
                        if h not in self.blocks:
                            self.errors.append(f"removed block {h} was never stored")
                            continue
                        key = self.blocks.pop(h)
                        if self.by_content.get(key) == h:
                            del self.by_content[key]
                        self.removed += 1
                elif kind == "AllBlocksCleared":
                    self.blocks.clear()
                    self.by_content.clear()
                else:
                    self.errors.append(f"unknown event {kind!r}")

    def predict(self, tokens):
        """Cached tokens for a prompt: the chain of full blocks before the last token's block."""
        with self.lock:
            parent, k = None, 0
            while (k + 1) * BLOCK <= len(tokens) - 1:
                h = self.by_content.get((parent, tuple(tokens[k * BLOCK:(k + 1) * BLOCK])))
                if h is None:
                    break
                parent, k = h, k + 1
            return k * BLOCK


def subscribe(zmq, msgpack, port, index, stop):
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.RCVHWM, 0)  # keep every message however far behind this thread falls
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    sub.setsockopt(zmq.RCVTIMEO, 200)
    sub.connect(f"tcp://127.0.0.1:{port}")
    while not stop.is_set():
        try:
            topic, seq, payload = sub.recv_multipart()
        except zmq.Again:
            continue
        index.apply(int.from_bytes(seq, "big"), msgpack.unpackb(payload, raw=False))
    sub.close(0)
    ctx.term()


def post(http, path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{http}{path}", data=json.dumps(body).encode(),
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return json.loads(r.read())


def metric(http, name):
    with urllib.request.urlopen(f"http://127.0.0.1:{http}/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    return None


def quiet(index, http, since, seconds=0.5, limit=10.0):
    """Waits until no batch has come for a while since `since` (the end of the last request: its
    response can reach the client before the engine hands that step's events to the publisher)
    and the index holds as many blocks as the server says it caches (on a loaded machine the
    publisher's thread may lag the engine), or the limit. The count alone is no proof: a request
    that stores blocks into a full cache evicts as many."""
    end = time.time() + limit
    while time.time() < end:
        if time.time() - max(index.last_message, since) >= seconds:
            with index.lock:
                held = len(index.blocks)
            if held == metric(http, "kvserve:prefix_cache_blocks"):
                return
        time.sleep(0.05)
    index.errors.append(f"the index never came to hold what the server caches ({len(index.blocks)} against "
                        f"{metric(http, 'kvserve:prefix_cache_blocks')}), last sequence {index.last_seq}")
    raise TimeoutError(index.errors[-1])


def main():
    server_bin, model, require = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
    if not os.path.exists(model):
        skip(f"test data {model} not found", require)
    try:
        import msgpack
        import zmq
    except ImportError as e:
        skip(f"python3-zmq and python3-msgpack are needed: {e}", require)
    tmp = tempfile.mkdtemp()
    port_file = os.path.join(tmp, "port")
    proc = subprocess.Popen(
        [server_bin, "--model", model, "--listen", "127.0.0.1:0", "--port-file", port_file,
         "--set", "server.http_listen=\"127.0.0.1:0\"", "--set", "server.metrics_listen=\"\"",
         "--set", "server.kv_events_endpoint=\"tcp://127.0.0.1:*\"", "--set", "server.log_level=\"warn\"",
         "--set", f"cache.block_size={BLOCK}", "--set", "cache.num_blocks=48", "--set", "scheduler.max_num_seqs=6"],
        stdout=open(os.path.join(tmp, "log"), "w"), stderr=subprocess.STDOUT,
        # As serve.sh runs it: with libgomp's default spin count, a server beside another that
        # computes on the same cores (a second copy of this test, ctest -j2) spins its barriers
        # against a descheduled thread, and 1,000 requests took tens of minutes instead of 20 s.
        env={**os.environ, "GOMP_SPINCOUNT": os.environ.get("GOMP_SPINCOUNT", "3000")})
    index, stop = Index(), threading.Event()
    try:
        for _ in range(300):
            if os.path.exists(port_file + ".http") and os.path.exists(port_file + ".kvevents"):
                break
            time.sleep(0.05)
        http, kv = int(open(port_file + ".http").read()), int(open(port_file + ".kvevents").read())
        sub = threading.Thread(target=subscribe, args=(zmq, msgpack, kv, index, stop))
        sub.start()
        time.sleep(2.0)  # the subscription reaches the publisher before any event is due

        rng = random.Random(7)
        systems = [[rng.randrange(3, 512) for _ in range(rng.randrange(40, 100))] for _ in range(6)]

        def one(i):
            r = random.Random(i)
            prompt = r.choice(systems) + [r.randrange(3, 512) for _ in range(r.randrange(4, 40))]
            out = post(http, "/v1/completions", {"model": "stories260K", "prompt": prompt, "temperature": 0,
                                                 "max_tokens": r.randrange(4, 80), "ignore_eos": True})
            return out["usage"]["prompt_tokens_details"]["cached_tokens"]

        requests = 1000
        with ThreadPoolExecutor(12) as pool:
            hits = sum(1 for c in pool.map(one, range(requests)) if c > 0)
        quiet(index, http, time.time())
        preemptions = metric(http, "kvserve:num_preemptions_total")
        cached = metric(http, "kvserve:prefix_cache_blocks")
        failures = list(index.errors)
        if len(index.blocks) != cached:
            failures.append(f"the index holds {len(index.blocks)} blocks, the server {cached}")
        if index.removed == 0:
            failures.append("no block was evicted: the load did not test removals")
        if not preemptions:
            failures.append("no sequence was preempted: the load did not test preemption")

        # Probes one at a time: the index's prediction against the server's count.
        probes = 0
        answered = time.time()
        for i in range(60):
            r = random.Random(10_000 + i)
            base = r.choice(systems)
            prompt = base[:r.randrange(8, len(base) + 1)] + [r.randrange(3, 512) for _ in range(r.randrange(0, 20))]
            if len(prompt) < 2:
                continue
            quiet(index, http, answered)
            want = index.predict(prompt)
            got = post(http, "/v1/completions", {"model": "stories260K", "prompt": prompt, "max_tokens": 1,
                                                 "temperature": 0})["usage"]["prompt_tokens_details"]["cached_tokens"]
            answered = time.time()
            if got != want:
                failures.append(f"probe {i} ({len(prompt)} tokens): the index predicts {want} cached, the server has {got}")
            probes += 1
        quiet(index, http, answered)
        after = metric(http, "kvserve:prefix_cache_blocks")
        if len(index.blocks) != after:
            failures.append(f"after the probes the index holds {len(index.blocks)} blocks, the server {after}")
        print(f"kv events: {requests} requests ({hits} with cached tokens), {index.batches} batches, "
              f"{index.stored} blocks stored, {index.removed} removed, {int(preemptions or 0)} preemptions; "
              f"index = server: {int(cached or 0)} blocks after the load, {int(after or 0)} after {probes} probes, "
              f"each probe's cached tokens as the index predicted")
        if failures:
            for f in failures[:20]:
                print("FAIL:", f)
            sys.exit(1)
    finally:
        stop.set()
        proc.terminate()
        proc.wait(timeout=30)


if __name__ == "__main__":
    main()
