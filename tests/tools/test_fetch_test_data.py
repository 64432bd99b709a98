#!/usr/bin/env python3
"""scripts/fetch-test-data.sh against an offline mirror built from the shared test data: every
public file arrives byte-exact through its way of being taken (raw bytes, a JSON key, a Python
literal, a Markdown block), a source with the wrong bytes is refused and the next one tried, a
file nobody serves correctly is reported and fails the run, a file already in place is kept, and
--verify passes on the shared copy and fails, naming the file, on a copy with one byte changed.
Usage: test_fetch_test_data.py SCRIPTS_DIR SHARED_DIR REQUIRE(0/1); exit 77 (skipped) without
the shared data unless REQUIRE is 1."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

scripts, shared, require = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
fetch = os.path.join(scripts, "fetch-test-data.sh")
manifest = json.load(open(os.path.join(scripts, "test-data-sources.json")))
if not os.path.isdir(os.path.join(shared, "models")):
    print(f"SKIP: test data {shared} not found")
    sys.exit(1 if require else 77)

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def run(*args):
    p = subprocess.run([fetch, *args], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def served_form(source, content, tables):
    """What the source's URL would answer for a file whose bytes are `content` (several files
    may come from one Python table: `tables` gathers their entries by URL)."""
    if "json_key" in source:
        return json.dumps({"other": 1, source["json_key"]: content.decode("utf-8")}).encode()
    if "python_name" in source:
        return f"import os\n\n{source['python_name']} = {content!r}\n\nother = 'x'\n".encode()
    if "python_dict" in source:
        outer, inner = source["python_dict"]
        table = tables.setdefault(source["url"], {"someone/else": {inner: "not this one"}})
        table[outer] = {"bos_token": None, inner: content.decode("utf-8")}
        return f"def configs():\n    return {table!r}\n".encode()
    if "markdown_after" in source:
        return (f"# doc\n\n```\n$ another command\nnot this\n```\n\n```\n{source['markdown_after']}\n"
                f"{content.decode('utf-8')}\n```\n\nmore text\n").encode()
    return content


def read(path):
    return open(path, "rb").read() if os.path.exists(path) else None


def place(mirror, url, data):
    path = os.path.join(mirror, url.split("://", 1)[1])
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


work = tempfile.mkdtemp(prefix="kvserve-fetch-")
try:
    mirror, dest = os.path.join(work, "mirror"), os.path.join(work, "dest")
    copy = dest + "-shared-copy"
    shutil.copytree(shared, copy, ignore=shutil.ignore_patterns("hooks"), copy_function=shutil.copyfile)
    for d, _, _ in os.walk(copy):
        os.chmod(d, 0o755)
    files = manifest["files"]
    gguf = next(e for e in files if e["path"] == "models/stories260K.gguf")
    check(len(gguf["sources"]) >= 2, "stories260K.gguf has a fallback source")
    tables = {}
    for e in files:
        content = open(os.path.join(shared, e["path"]), "rb").read()
        first = e["sources"][0]
        if e is gguf:
            # The first source answers wrong bytes; the second is right.
            place(mirror, first["url"], content[:-1] + bytes([content[-1] ^ 1]))
            place(mirror, e["sources"][1]["url"], served_form(e["sources"][1], content, tables))
        else:
            place(mirror, first["url"], served_form(first, content, tables))

    rc, out = run("--mirror", mirror, "--dest", dest, "--timeout", "5")
    check(rc == 0, f"fetch from the mirror succeeds (rc {rc})")
    same = [e["path"] for e in files if read(os.path.join(dest, e["path"])) == read(os.path.join(shared, e["path"]))]
    check(len(same) == len(files), f"{len(same)} of {len(files)} public files arrive byte-exact")
    check("wrong" in out and gguf["sources"][1]["url"].split("://")[1] in out,
          "the wrong first source is refused and the fallback used")
    for way in ("json_key", "python_name", "python_dict", "markdown_after"):
        check(any(way in s for e in files for s in e["sources"]), f"the manifest uses {way}")

    rc, out = run("--mirror", mirror, "--dest", dest, "--timeout", "5")
    check(rc == 0 and out.count("already here") == len(files), "a second run keeps every file in place")

    # A file whose only source serves other bytes is reported by name and fails the run.
    victim = next(e for e in files if e["path"].endswith(".jinja") and len(e["sources"]) == 1)
    os.remove(os.path.join(dest, victim["path"]))
    place(mirror, victim["sources"][0]["url"], b"{{ tampered }}")
    rc, out = run("--mirror", mirror, "--dest", dest, "--timeout", "5")
    check(rc == 1 and f"MISSING  {victim['path']}" in out, f"a tampered {victim['path']} fails the run, named")
    check(not os.path.exists(os.path.join(dest, victim["path"])), "and is not written")

    rc, out = run("--verify", "--dest", shared)
    check(rc == 0, f"--verify passes on {shared}")
    derived = manifest["derived"][0]["path"]
    with open(os.path.join(copy, derived), "r+b") as f:
        first_byte = f.read(1)
        f.seek(0)
        f.write(bytes([first_byte[0] ^ 0x20]))
    rc, out = run("--verify", "--dest", copy)
    check(rc == 1 and f"WRONG    {derived}" in out, f"--verify names a changed {derived}")
finally:
    shutil.rmtree(work, ignore_errors=True)

print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
