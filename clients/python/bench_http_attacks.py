#!/usr/bin/env python3
"""Availability of the HTTP API under connection attacks: /health latency seen by a prober on
another loopback address (127.0.0.2) while an attacker on 127.0.0.1 runs each attack in turn.

  baseline     no attack
  half-close   1,030 connections that each send a few header bytes and close (used to leave
               CLOSE-WAIT sockets holding every slot for the 300 s timeout)
  slowloris    1,030 connections that each send a header line, then one byte every 10 s,
               reconnecting whenever the server cuts one
  big-prompt   one client that posts a 4 MB prompt to /tokenize again and again (tokenized on
               the connection thread, it stalled every other client for 1-3 s)

Every figure is a latency of one /health call (a new connection each, as a kubelet probe makes
it); a call with no answer within 2 s counts as a failure. Prints a Markdown table, and JSON with
--json. Traffic goes to loopback only, bounded in count and time.
"""
import argparse
import asyncio
import json
import socket
import statistics
import time

PROBE_TIMEOUT = 2.0


async def probe_once(port):
    start = time.perf_counter()
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection("127.0.0.1", port, local_addr=("127.0.0.2", 0)), PROBE_TIMEOUT)
        writer.write(b"GET /health HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n")
        await writer.drain()
        data = await asyncio.wait_for(reader.read(), PROBE_TIMEOUT)
        writer.close()
        ok = data.startswith(b"HTTP/1.1 200")
    except (asyncio.TimeoutError, OSError):
        ok = False
    return ok, time.perf_counter() - start


async def prober(port, seconds, interval=0.1):
    results = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        results.append(await probe_once(port))
        await asyncio.sleep(interval)
    return results


async def half_close(port, stop, count=1030):
    """Connections that send part of a request line and close; again and again."""
    while not stop.is_set():
        socks = []
        for _ in range(count):
            try:
                s = socket.socket()
                s.setblocking(False)
                s.connect_ex(("127.0.0.1", port))
                socks.append(s)
            except OSError:
                break
        await asyncio.sleep(0.2)
        for s in socks:
            try:
                s.send(b"POST /v1/completions HTTP/1.1\r\nHo")
            except OSError:
                pass
            s.close()
        await asyncio.sleep(1.0)


async def slowloris_one(port, stop):
    while not stop.is_set():
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET /v1/models HTTP/1.1\r\nHost: x\r\n")
            await writer.drain()
            while not stop.is_set():
                await asyncio.sleep(10)
                writer.write(b"X-a: b\r\n")
                await writer.drain()
                if reader.at_eof():
                    break
            writer.close()
        except (OSError, ConnectionError):
            await asyncio.sleep(0.5)


async def slowloris(port, stop, count=1030):
    await asyncio.gather(*(slowloris_one(port, stop) for _ in range(count)))


async def big_prompt(port, stop, size=4 << 20):
    body = json.dumps({"prompt": "Once upon a time there was a little girl. " * (size // 42)}).encode()
    head = (f"POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
    while not stop.is_set():
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(head + body)
            await writer.drain()
            await reader.read()
            writer.close()
        except (OSError, ConnectionError):
            await asyncio.sleep(0.2)


ATTACKS = {"baseline": None, "half-close": half_close, "slowloris": slowloris, "big-prompt": big_prompt}


async def run(port, seconds, names):
    rows = {}
    for name in names:
        attack = ATTACKS[name]
        stop = asyncio.Event()
        task = asyncio.ensure_future(attack(port, stop)) if attack else None
        if task:
            await asyncio.sleep(3)  # let the attack take hold
        results = await prober(port, seconds)
        stop.set()
        if task:
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
        await asyncio.sleep(12 if name == "slowloris" else 2)  # the server cuts what is left
        lat = sorted(t for ok, t in results if ok)
        failed = sum(1 for ok, _ in results if not ok)
        q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] * 1000 if lat else float("nan")
        rows[name] = {"probes": len(results), "failed": failed, "p50_ms": q(0.5), "p99_ms": q(0.99),
                      "max_ms": (lat[-1] * 1000 if lat else float("nan"))}
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, required=True, help="the server's HTTP port on 127.0.0.1")
    ap.add_argument("--seconds", type=float, default=20, help="probing time per attack")
    ap.add_argument("--json", help="write the figures here too")
    ap.add_argument("--attacks", default=",".join(ATTACKS), help="which, in order (the first should be baseline)")
    ap.add_argument("--no-header", action="store_true", help="table rows only")
    args = ap.parse_args()
    rows = asyncio.run(run(args.port, args.seconds, args.attacks.split(",")))
    base = rows["baseline"]["p99_ms"] if "baseline" in rows else float("nan")
    if not args.no_header:
        print("| attack (from 127.0.0.1) | /health probes (127.0.0.2) | failed (> 2 s) | p50 ms | p99 ms | max ms | p99 / baseline |")
        print("|---|---|---|---|---|---|---|")
    for name, r in rows.items():
        print(f"| {name} | {r['probes']} | {r['failed']} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | {r['max_ms']:.1f} | "
              f"{r['p99_ms'] / base:.1f}x |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
