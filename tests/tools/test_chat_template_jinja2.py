#!/usr/bin/python3
"""Chat templates on conversations not in shared/: kvserve-template against Python's Jinja2 (Debian
python3-jinja2) set up as Hugging Face transformers renders chat templates (a sandboxed
environment, trim_blocks, lstrip_blocks, loop controls, tojson as json.dumps, raise_exception,
strftime_now), for every template in ../shared/chat-templates and the one phi-3's vocabulary
file carries (with that file's own BOS/EOS texts), on 40 random conversations each: system
prompts or none, alternating or not, empty, multi-line, quoted, braced and non-ASCII contents.
Errors must be errors on both sides. Usage: SCRIPT KVSERVE_TEMPLATE SHARED_DIR REQUIRE(0|1)"""
import json
import os
import random
import subprocess
import sys

tool, shared, require = sys.argv[1], sys.argv[2], sys.argv[3] == "1"


def skip(why):
    print(f"SKIP: {why}")
    sys.exit(1 if require else 77)


try:
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError:
    skip("Python's jinja2 is missing (Debian python3-jinja2)")
templates_dir = os.path.join(shared, "chat-templates")
if not os.path.isdir(templates_dir):
    skip(f"test data {templates_dir} not found")

NOW = 1727222400  # 2024-09-25 00:00:00 UTC


def hf_render(source, messages, add_generation_prompt, bos, eos):
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    import datetime
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.datetime.fromtimestamp(NOW, datetime.timezone.utc).strftime(fmt)
    kwargs = {"messages": messages, "add_generation_prompt": add_generation_prompt, "tools": None, "documents": None}
    if bos is not None:
        kwargs["bos_token"] = bos
    if eos is not None:
        kwargs["eos_token"] = eos
    return env.from_string(source).render(**kwargs)


def ours(path, messages, add_generation_prompt, bos, eos):
    args = [tool, "--template", path, "--now", str(NOW)]
    if bos is not None:
        args += ["--bos", bos]
    if eos is not None:
        args += ["--eos", eos]
    p = subprocess.run(args, input=json.dumps({"messages": messages, "add_generation_prompt": add_generation_prompt}),
                       capture_output=True, text=True)
    if p.returncode == 3:
        return None, p.stderr.strip()
    if p.returncode != 0:
        raise RuntimeError(p.stderr)
    return p.stdout, None


rng = random.Random(7)
PIECES = ["Hello", "  leading spaces", "trailing  ", "line one\nline two", "{{ not a tag }}", "{% raw %}", "'quotes' \"and\"",
          "é, 東京, 🦙", "", "tabs\tinside", "</think>thought", "x" * 40, "<|im_end|> inside", "ends with newline\n"]


def conversation():
    msgs = []
    if rng.random() < 0.4:
        msgs.append({"role": "system", "content": rng.choice(PIECES)})
    n = rng.randint(1, 5)
    for k in range(n):
        role = "user" if k % 2 == 0 else "assistant"
        if rng.random() < 0.1:
            role = rng.choice(["user", "assistant"])  # sometimes not alternating
        msgs.append({"role": role, "content": " ".join(rng.choice(PIECES) for _ in range(rng.randint(1, 3)))})
    return msgs


sources = json.load(open(os.path.join(templates_dir, "sources.json")))
cases = [(os.path.join(templates_dir, n), s.get("bos_token"), s.get("eos_token")) for n, s in sources.items()]
# The template a real vocabulary file carries, with that file's own BOS and EOS (read by our tool).
phi3 = os.path.join(shared, "models", "vocab", "ggml-vocab-phi-3.gguf")
if os.path.exists(phi3):
    import struct
    import tempfile
    # The model's template text itself, read with a minimal GGUF parser (the key is a string).
    def read_gguf_string_key(path, wanted):
        with open(path, "rb") as f:
            f.read(4); struct.unpack("<I", f.read(4)); nt, nk = struct.unpack("<QQ", f.read(16))
            def rs():
                (n,) = struct.unpack("<Q", f.read(8)); return f.read(n).decode("utf-8")
            sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
            def skip_value(t):
                if t == 8:
                    rs()
                elif t == 9:
                    (et,) = struct.unpack("<I", f.read(4)); (n,) = struct.unpack("<Q", f.read(8))
                    for _ in range(n):
                        skip_value(et)
                else:
                    f.read(sizes[t])
            found = {}
            for _ in range(nk):
                k = rs(); (t,) = struct.unpack("<I", f.read(4))
                if k in wanted and t == 8:
                    found[k] = rs()
                elif k in wanted and t in (4, 5):
                    found[k] = struct.unpack("<I", f.read(4))[0]
                else:
                    skip_value(t)
            return found
    meta = read_gguf_string_key(phi3, {"tokenizer.chat_template"})
    tmp = tempfile.NamedTemporaryFile("w", suffix=".jinja", delete=False)
    tmp.write(meta["tokenizer.chat_template"])
    tmp.close()
    cases.append((tmp.name, "<s>", "<|endoftext|>"))
elif require:
    skip(f"{phi3} not found")

failures = 0
checked = 0
for path, bos, eos in cases:
    source = open(path, encoding="utf-8").read()
    for _ in range(40):
        msgs = conversation()
        gen = rng.random() < 0.7
        try:
            want, want_err = hf_render(source, msgs, gen, bos, eos), None
        except (jinja2.exceptions.TemplateError, TypeError, ValueError, KeyError, AttributeError) as e:
            # A template that raises (raise_exception, or Python's own error such as iterating a
            # None `tools`) is an error both sides must give.
            want, want_err = None, str(e)
        got, got_err = ours(path, msgs, gen, bos, eos)
        checked += 1
        if (want_err is None) != (got_err is None) or (want_err is None and got != want):
            failures += 1
            if failures <= 5:
                print(f"{os.path.basename(path)}: {json.dumps(msgs)[:300]} gen={gen}\n  jinja2: {want!r} {want_err}\n  ours:   {got!r} {got_err}")
if failures:
    print(f"FAIL: {failures} of {checked} renders differ")
    sys.exit(1)
print(f"chat templates: {checked} random conversations render as Jinja2 renders them ({len(cases)} templates)")
