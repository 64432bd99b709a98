#!/usr/bin/env python3
"""One greedy stream through an OpenAI-style /v1/completions endpoint, timed by the client.

Alternates between servers given as NAME=URL (each already started on the same model file),
ROUNDS times, and prints a markdown row per server: the median output tokens per second over
the rounds (the completion's usage.completion_tokens over the request's wall time) and its
ratio to the first server. Used by bench-speculative.sh to put kvserve beside llama-server.
Usage: bench_one_stream.py PROMPT_FILE MAX_TOKENS ROUNDS NAME=URL [NAME=URL ...]
"""
import json
import statistics
import sys
import time
import urllib.request


def model_id(url):
    with urllib.request.urlopen(url + "/v1/models", timeout=30) as r:
        return json.load(r)["data"][0]["id"]


def run(url, prompt, max_tokens):
    body = {"model": model_id(url), "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True}
    req = urllib.request.Request(url + "/v1/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    t0 = time.monotonic()
    with urllib.request.urlopen(req, timeout=600) as r:
        answer = json.load(r)
    seconds = time.monotonic() - t0
    return answer["usage"]["completion_tokens"] / seconds, answer["choices"][0]["text"]


def main():
    prompt_file, max_tokens, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    servers = [a.split("=", 1) for a in sys.argv[4:]]
    with open(prompt_file) as f:
        prompt = f.read()
    rates = {name: [] for name, _ in servers}
    texts = {}
    for _ in range(rounds):
        for name, url in servers:
            rate, text = run(url, prompt, max_tokens)
            rates[name].append(rate)
            texts[name] = text
    base = statistics.median(rates[servers[0][0]])
    print(f"| server ({max_tokens} tokens, greedy, median of {rounds}) | tok/s | vs {servers[0][0]} | same text as {servers[0][0]} |")
    print("|---|---|---|---|")
    for name, _ in servers:
        m = statistics.median(rates[name])
        print(f"| {name} | {m:.1f} | {m / base:.2f}x | {'yes' if texts[name] == texts[servers[0][0]] else 'no'} |")


if __name__ == "__main__":
    main()
