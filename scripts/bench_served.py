#!/usr/bin/env python3
"""Concurrent streamed completions through OpenAI-style /v1/completions endpoints, client-timed.

Each server (NAME=URL, already started on the same model file) gets the same requests: REQUESTS
prompts of PROMPT_TOKENS random token ids (seeded; distinct, so no prefix is shared), each asking
for MAX_TOKENS greedy tokens with the end of text ignored, CONCURRENCY at a time, streamed (SSE).
Servers alternate, ROUNDS times. Per server the medians over rounds of: output tokens per second
(all completion tokens over the batch's wall time), TTFT p50 (request sent -> first streamed
token), TPOT p50 ((last token - first token) / (tokens - 1)), and, where the server exports
kvserve:engine_busy_seconds_total on URL/metrics, the engine's busy seconds over the wall time.
Prints a markdown table, ratios against the second server (the baseline) where there are two.
Usage: bench_served.py PROMPT_TOKENS MAX_TOKENS CONCURRENCY REQUESTS ROUNDS NAME=URL [NAME=URL ...]
"""
import json
import random
import statistics
import sys
import threading
import time
import urllib.error
import urllib.request


def model_id(url):
    with urllib.request.urlopen(url + "/v1/models", timeout=30) as r:
        return json.load(r)["data"][0]["id"]


def busy_seconds(url):
    """kvserve's engine busy seconds from URL/metrics, or None where the server has none."""
    try:
        with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
            for line in r.read().decode().splitlines():
                if line.startswith("kvserve:engine_busy_seconds_total"):
                    return float(line.split()[-1])
    except (urllib.error.URLError, OSError, ValueError):
        return None
    return None


def one_request(url, model, prompt, max_tokens, result):
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
            "stream": True}
    req = urllib.request.Request(url + "/v1/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    t0 = time.monotonic()
    first = last = None
    chunks = 0
    usage = None
    with urllib.request.urlopen(req, timeout=1200) as r:
        for raw in r:
            line = raw.decode().strip()
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                break
            event = json.loads(data)
            if event.get("usage"):
                usage = event["usage"]
            if event.get("choices"):
                now = time.monotonic()
                first = first if first is not None else now
                last = now
                chunks += 1
    tokens = usage["completion_tokens"] if usage and usage.get("completion_tokens") else max_tokens
    result.update(ttft=first - t0, tpot=(last - first) / max(1, tokens - 1), tokens=tokens, chunks=chunks)


def run_batch(url, prompts, max_tokens, concurrency):
    model = model_id(url)
    results = [dict() for _ in prompts]
    next_index = [0]
    lock = threading.Lock()

    def worker():
        while True:
            with lock:
                i = next_index[0]
                next_index[0] += 1
            if i >= len(prompts):
                return
            one_request(url, model, prompts[i], max_tokens, results[i])

    busy0 = busy_seconds(url)
    t0 = time.monotonic()
    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    busy1 = busy_seconds(url)
    missing = [i for i, r in enumerate(results) if "tokens" not in r]
    if missing:
        raise SystemExit(f"{url}: requests {missing} returned no tokens")
    return {
        "tps": sum(r["tokens"] for r in results) / wall,
        "ttft": statistics.median(r["ttft"] for r in results),
        "tpot": statistics.median(r["tpot"] for r in results),
        "busy": (busy1 - busy0) / wall if busy0 is not None and busy1 is not None else None,
    }


def main():
    prompt_tokens, max_tokens, concurrency, requests, rounds = (int(a) for a in sys.argv[1:6])
    servers = [a.split("=", 1) for a in sys.argv[6:]]
    rng = random.Random(7)
    # Ordinary vocabulary ids of a 32,000-token vocabulary (clear of the special ones at the start).
    prompts = [[rng.randrange(300, 31000) for _ in range(prompt_tokens)] for _ in range(requests)]
    got = {name: [] for name, _ in servers}
    for _ in range(rounds):
        for name, url in servers:
            got[name].append(run_batch(url, prompts, max_tokens, concurrency))
    med = {name: {k: (statistics.median(r[k] for r in rs) if rs[0][k] is not None else None) for k in rs[0]}
           for name, rs in got.items()}
    base = servers[1][0] if len(servers) > 1 else servers[0][0]
    print(f"| {concurrency} concurrent streams, {prompt_tokens}-token prompts, {max_tokens} out, {requests} requests "
          f"(median of {rounds}) | output tok/s | vs {base} | TTFT p50 | vs {base} | TPOT p50 | engine busy / wall |")
    print("|---|---|---|---|---|---|---|")
    for name, _ in servers:
        m, b = med[name], med[base]
        busy = f"{100 * m['busy']:.0f}%" if m["busy"] is not None else "-"
        print(f"| {name} | {m['tps']:.1f} | {m['tps'] / b['tps']:.2f}x | {m['ttft']:.2f} s | "
              f"{m['ttft'] / b['ttft']:.0%} | {1000 * m['tpot']:.0f} ms | {busy} |")


if __name__ == "__main__":
    main()
