#!/usr/bin/env python3
"""Constrained outputs judged by independent checkers.

Generates with kvserve-constrained (many requests batched through the engine, temperature 1)
for every case in tests/data/constraints/ on a random-weight model with a 152k-token byte-level
BPE vocabulary and on tiny real-text models from ../shared, then checks each output that
finished with "stop": JSON Schema cases with Python's json and jsonschema (Draft 2020-12, with
its format checker), regex cases with Python's re.fullmatch, choices by membership, grammars by
the check named in the case. A case that never finishes on any model fails too: it would test
nothing.

usage: test_constrained_outputs.py BUILD_DIR SHARED_MODELS_DIR REQUIRE(0|1) DATA_DIR
"""
import json
import os
import re
import subprocess
import sys

import datetime

import jsonschema

# Debian's jsonschema checks date-time and time only with rfc3339-validator installed; Python's
# own ISO 8601 parser (3.11: "Z" included) checks them here, with an offset required (RFC 3339).
FORMATS = jsonschema.FormatChecker()
for name, fn in jsonschema.Draft202012Validator.FORMAT_CHECKER.checkers.items():
    FORMATS.checkers[name] = fn


@FORMATS.checks("date-time", raises=ValueError)
def _date_time(s):
    return not isinstance(s, str) or datetime.datetime.fromisoformat(s).tzinfo is not None and "T" in s


@FORMATS.checks("time", raises=ValueError)
def _time(s):
    return not isinstance(s, str) or datetime.time.fromisoformat(s).tzinfo is not None


def run_cases(build, model, cases_file, samples, max_tokens):
    cmd = [os.path.join(build, "engine", "kvserve-constrained"), "--model", model, "--cases", cases_file,
           "--samples", str(samples), "--max-tokens", str(max_tokens), "--temperature", "1", "--parallel", "16"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=1500)
    if p.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr[-2000:]}")
    return [json.loads(line) for line in p.stdout.splitlines() if line.strip()]


def check(case, text):
    """None when text satisfies the case, else why not."""
    if "json_schema" in case:
        try:
            value = json.loads(text)
        except ValueError as e:
            return f"not JSON: {e}"
        v = jsonschema.Draft202012Validator(case["json_schema"], format_checker=FORMATS)
        errors = [e.message for e in v.iter_errors(value)]
        return "; ".join(errors) if errors else None
    if "regex" in case:
        return None if re.fullmatch(case["regex"], text) else "does not match the pattern"
    if "choice" in case:
        return None if text in case["choice"] else "not one of the choices"
    kind = case.get("check")
    if kind in ("json", "json_object"):
        try:
            value = json.loads(text)
        except ValueError as e:
            return f"not JSON: {e}"
        return None if kind == "json" or isinstance(value, dict) else "not an object"
    if kind == "arith":
        depth = 0
        for c in text:
            depth += (c == "(") - (c == ")")
            if depth < 0:
                return "unbalanced"
        ok = depth == 0 and re.fullmatch(r"[-+*()0-9]+", text) and not re.search(r"[-+*]{2}|\(\)|^[-+*]|[-+*]$", text)
        return None if ok else "not an expression"
    if "check_regex" in case:
        return None if re.fullmatch(case["check_regex"], text) else "does not match the check"
    return "the case names no check"


def main():
    build, models, require, data = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4]
    vocab = os.path.join(models, "vocab", "ggml-vocab-deepseek-llm.gguf")
    if not os.path.exists(vocab):
        print(f"SKIP: {models} is absent", file=sys.stderr)
        sys.exit(1 if require else 77)
    work = os.path.join(build, "constrained")
    os.makedirs(work, exist_ok=True)
    big = os.path.join(work, "vocab152k.gguf")
    if not os.path.exists(big):
        subprocess.run([os.path.join(build, "engine", "kvserve-mkmodel"), "--out", big, "--vocab-from", vocab,
                        "--vocab", "152064", "--dim", "64", "--layers", "2", "--heads", "4", "--kv-heads", "4",
                        "--ffn", "128", "--dtype", "F16", "--seed", "5"], check=True, capture_output=True)
    runs = [  # model, samples, max tokens
        (big, 8, 500),
        (os.path.join(models, "stories260K.gguf"), 3, 400),
        (os.path.join(models, "arch", "tiny-qwen3.gguf"), 2, 400),
    ]
    cases = {}
    for f in ("schemas.jsonl", "others.jsonl"):
        for line in open(os.path.join(data, f), encoding="utf-8"):
            if line.strip():
                c = json.loads(line)
                cases[c["name"]] = c
    schemas = sum("json_schema" in c for c in cases.values())
    assert schemas >= 30, f"only {schemas} schemas"
    failures, finished, total = [], {name: 0 for name in cases}, 0
    stopped = 0
    for model, samples, max_tokens in runs:
        for f in ("schemas.jsonl", "others.jsonl"):
            for out in run_cases(build, model, os.path.join(data, f), samples, max_tokens):
                total += 1
                case = cases[out["name"]]
                where = f"{os.path.basename(model)} {out['name']} #{out['sample']}"
                if out["finish"] in ("error", "rejected"):
                    failures.append(f"{where}: {out['finish']}: {out.get('error')}")
                    continue
                if out["finish"] != "stop":
                    continue
                stopped += 1
                finished[out["name"]] += 1
                why = check(case, out["text"])
                if why:
                    failures.append(f"{where}: {why}: {out['text']!r}")
    never = [n for n, k in finished.items() if k == 0]
    print(f"{total} outputs, {stopped} finished with stop and were checked, {len(failures)} failed; "
          f"{len(cases)} cases ({schemas} JSON schemas)")
    for f in failures[:40]:
        print("FAIL", f)
    if never:
        print("cases that never finished:", ", ".join(never))
    sys.exit(1 if failures or never or stopped < total // 2 else 0)


if __name__ == "__main__":
    main()
