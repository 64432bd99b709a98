#!/usr/bin/env python3
"""The multi-tenant chat workload for scripts/bench-replicas.sh, through a balancer.

A few long system prompts shared by many conversations (token-id prompts: the system prompt,
then a short message of the conversation's own), streamed with usage; per request the
time to first token, the replica that answered (HAProxy's X-Kvserve-Replica header), the
cached prompt tokens and whether the stream ended properly. Prints one JSON object.

--faults DIR: while the load runs, SIGKILL replica 1, restart it, then SIGTERM replica 2 (the
replicas' pid files and ports as scripts/replicas.sh wrote them) and classify every request:
completed, cut by the kill (an error the client saw), or lost (failed anywhere else).

usage: bench_replicas.py URL --requests N --concurrency C [--prefixes P] [--prefix-len L]
                         [--output-len O] [--faults DIR --server CMD...]
"""
import argparse
import json
import os
import random
import signal
import subprocess
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor


def one(url, model, prompt, max_tokens):
    body = json.dumps({"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
                       "stream": True, "stream_options": {"include_usage": True}}).encode()
    req = urllib.request.Request(url + "/v1/completions", data=body, headers={"content-type": "application/json"})
    start = time.time()
    r = {"start": start, "ttft": None, "replica": None, "cached": 0, "prompt": len(prompt), "tokens": 0,
         "done": False, "error": None}
    try:
        with urllib.request.urlopen(req, timeout=300) as resp:
            r["replica"] = resp.headers.get("X-Kvserve-Replica")
            for raw in resp:
                line = raw.decode().strip()
                if not line.startswith("data: "):
                    continue
                data = line[6:]
                if data == "[DONE]":
                    r["done"] = True
                    break
                chunk = json.loads(data)
                if "error" in chunk:
                    r["error"] = chunk["error"].get("message", "error event")
                    continue
                if chunk.get("usage"):
                    r["cached"] = chunk["usage"]["prompt_tokens_details"]["cached_tokens"]
                    r["tokens"] = chunk["usage"]["completion_tokens"]
                for c in chunk.get("choices", []):
                    if c.get("text") and r["ttft"] is None:
                        r["ttft"] = time.time() - start
    except Exception as e:  # a refused or cut connection: the client sees it
        r["error"] = f"{type(e).__name__}: {e}"
    r["end"] = time.time()
    if not r["done"] and not r["error"]:
        r["error"] = "the stream ended without [DONE]"
    return r


def pct(values, q):
    v = sorted(values)
    return v[min(len(v) - 1, int(len(v) * q))] if v else None


def faults(dirname, server_cmd, base, log):
    """Replica 1 killed at 2 s and restarted at 4 s on its ports; replica 2 drained at 7 s."""
    time.sleep(2)
    pid1 = int(open(os.path.join(dirname, "r1.pid")).read())
    os.kill(pid1, signal.SIGKILL)
    log["killed_at"] = time.time()
    time.sleep(2)
    args = [a.replace("{grpc}", str(base + 2)).replace("{http}", str(base + 3)) for a in server_cmd]
    p = subprocess.Popen(args, stdout=open(os.path.join(dirname, "r1-restart.log"), "w"), stderr=subprocess.STDOUT)
    open(os.path.join(dirname, "r1.pid"), "w").write(str(p.pid))
    log["restarted_at"] = time.time()
    time.sleep(3)
    pid2 = int(open(os.path.join(dirname, "r2.pid")).read())
    os.kill(pid2, signal.SIGTERM)
    log["drained_at"] = time.time()
    log["drain_pid"] = pid2


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--requests", type=int, default=240)
    ap.add_argument("--concurrency", type=int, default=6)
    ap.add_argument("--prefixes", type=int, default=6)
    ap.add_argument("--prefix-len", type=int, default=768)
    ap.add_argument("--output-len", type=int, default=16)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--faults")
    ap.add_argument("--base-port", type=int, default=18100)
    ap.add_argument("--server", nargs=argparse.REMAINDER, default=[])
    a = ap.parse_args()
    rng = random.Random(a.seed)
    systems = [[rng.randrange(3, a.vocab) for _ in range(a.prefix_len)] for _ in range(a.prefixes)]
    prompts = []
    for i in range(a.requests):
        r = random.Random(a.seed * 100_003 + i)
        prompts.append(r.choice(systems) + [r.randrange(3, a.vocab) for _ in range(r.randrange(16, 48))])
    with urllib.request.urlopen(a.url + "/v1/models", timeout=10) as r:
        model = json.loads(r.read())["data"][0]["id"]
    log = {}
    chaos = None
    if a.faults:
        chaos = threading.Thread(target=faults, args=(a.faults, a.server, a.base_port, log))
    t0 = time.time()
    with ThreadPoolExecutor(a.concurrency) as pool:
        futures = [pool.submit(one, a.url, model, p, a.output_len) for p in prompts]
        if chaos:
            chaos.start()
        results = [f.result() for f in futures]
    wall = time.time() - t0
    if chaos:
        chaos.join()
    ok = [r for r in results if r["done"] and not r["error"]]
    if not ok:
        raise SystemExit("no request completed: " + str({r["error"] for r in results}))
    out = {"requests": len(results), "completed": len(ok), "wall_s": wall,
           "output_tok_s": sum(r["tokens"] for r in ok) / wall,
           "ttft_p50_ms": 1e3 * pct([r["ttft"] for r in ok if r["ttft"] is not None], 0.5),
           "ttft_p90_ms": 1e3 * pct([r["ttft"] for r in ok if r["ttft"] is not None], 0.9),
           "hit_rate": sum(r["cached"] for r in ok) / max(1, sum(r["prompt"] for r in ok)),
           "by_replica": {k: sum(1 for r in results if r["replica"] == k) for k in sorted({str(r["replica"]) for r in results})}}
    if a.faults:
        kill, back = log["killed_at"], log["restarted_at"]
        failed = [r for r in results if r not in ok]
        # Cut by the kill: on replica 1 and running when it died.
        cut = [r for r in failed if r["replica"] in ("r1", None) and r["start"] <= kill <= r["end"] + 0.5]
        lost = [r for r in failed if r not in cut]
        drained = [r for r in results if r["replica"] == "r2" and r["start"] <= log["drained_at"] <= r["end"]]
        out.update({"cut_by_kill": len(cut), "lost": len(lost), "lost_errors": [r["error"] for r in lost][:5],
                    "cut_errors": sorted({r["error"].split(":")[0] for r in cut}),
                    "running_on_drained_replica": len(drained),
                    "completed_on_drained_replica": sum(1 for r in drained if r in ok),
                    "served_by_restarted_replica_after_restart": sum(1 for r in results if r["replica"] == "r1" and r["start"] > back)})
        try:
            os.waitpid(log["drain_pid"], 0)
        except ChildProcessError:
            pass
    print(json.dumps(out))


if __name__ == "__main__":
    main()
