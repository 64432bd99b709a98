#!/usr/bin/env python3
"""Llama 3's (llama-bpe), Qwen2's and o200k's (gpt-4o: gpt-oss) pre-tokenizer splits against Python's `regex` module running
the patterns exactly as the models' tokenizer.json files give them (case-insensitive
contractions and all), on llama.cpp's tokenizer test strings plus strings of our own.
Usage: test_pre_tokenizer_regex.py KVSERVE_TOKENIZE INP_FILE REQUIRE(0/1)
Exit 77 (skipped) when the .inp file or the regex module is absent, unless REQUIRE is 1."""
import json
import os
import subprocess
import sys

tool, inp, require = sys.argv[1], sys.argv[2], sys.argv[3] == "1"


def skip(why):
    print(f"SKIP: {why}")
    sys.exit(1 if require else 77)


try:
    import regex
except ImportError:
    skip("Python's regex module is missing (Debian python3-regex)")
if not os.path.exists(inp):
    skip(f"test data {inp} not found")

# The Split pre-tokenizer patterns of meta-llama/Llama-3.x, Qwen/Qwen2.5 and openai/gpt-oss tokenizer.json.
PATTERNS = {
    "llama-bpe": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    "qwen2": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    "gpt-4o": r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
              r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
              r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
}

with open(inp, encoding="utf-8") as f:
    texts = f.read().split("\n__ggml_vocab_test__\n")[:-1]
texts += [
    "I'M HERE, YOU'RE THERE, WE'LL SEE'S", "don't DON'T Don'T", "1234567 12 123 1 ٣٤٥ ½ ²",
    "\r\n\r\n  \n\t\t x \u00a0 y \u3000 z", "a\u0301b\u0301 naïve Zürich", "東京タワー 서울 😀👍🏽 🇫🇷",
    "$100,000.00 (+5%) <tag attr='v'>", "    indented\n\tcode();  ", "'' 's 'S x's", "end with spaces   ",
    "HelloWorld JSONParser iPhone McDonald's XMLHttpRequest'S ABCdef", "path/to/file//\n/\r\n x", "ǅungla ʰmod ÀÉÎàéî",
    "a\u0301B\u0301c\u0308 देवनागरी ไทย", "<|start|>assistant<|channel|>final<|message|>Hi!",
]

for name, pattern in PATTERNS.items():
    rx = regex.compile(pattern)
    want = [[m.group(0) for m in rx.finditer(t)] for t in texts]
    got = json.loads(subprocess.run([tool, "--split", name], input=json.dumps(texts), capture_output=True,
                                    text=True, check=True).stdout)
    bad = [(t, w, g) for t, w, g in zip(texts, want, got) if w != g]
    for t, w, g in bad[:5]:
        print(f"{name}: {t!r}\n  regex:   {w}\n  kvserve: {g}")
    if bad:
        print(f"FAIL: {name}: {len(bad)} of {len(texts)} texts split differently")
        sys.exit(1)
    print(f"{name}: {len(texts)} texts split as Python regex splits them")
