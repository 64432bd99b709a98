#!/usr/bin/env python3
"""Fetches the public files of kvserve's test data (../shared) from their upstream sources and
checks each against its sha256 (scripts/test-data-sources.json). Files computed from those
(llama.cpp's outputs, quantized twins, tiny models, Jinja2 renders) are published nowhere: they
are listed there so that --verify can check a copy, and the tests that need them skip without them.

A source is a URL and how to take the file from it: the bytes as they are, a JSON key, a literal
inside a Python file (a variable, or a model's entry in a dict), or the lines of a Markdown code
block after a given line. Standard library only, so it runs before deps.sh has."""
import argparse, ast, hashlib, json, os, sys, tempfile, urllib.request

kMaxBytes = 64 << 20  # the largest public file is under 6 MiB


def take_python_name(text, name):
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise ValueError(f"no assignment to {name}")


def take_python_dict(text, outer, inner):
    for node in ast.walk(ast.parse(text)):
        if not isinstance(node, ast.Dict):
            continue
        for key, value in zip(node.keys, node.values):
            if isinstance(key, ast.Constant) and key.value == outer and isinstance(value, ast.Dict):
                for k2, v2 in zip(value.keys, value.values):
                    if isinstance(k2, ast.Constant) and k2.value == inner:
                        return ast.literal_eval(v2)
    raise ValueError(f"no entry {outer!r} with {inner!r}")


def take_markdown_after(text, marker):
    lines = text.split("\n")
    start = lines.index(marker) + 1  # ValueError when the marker line is absent
    end = start
    while end < len(lines) and not lines[end].startswith("```"):
        end += 1
    if end == len(lines):
        raise ValueError("the code block after the marker never closes")
    return "\n".join(lines[start:end])


def take(source, data):
    """The file's bytes from what the source's URL answered."""
    if "json_key" in source:
        value = json.loads(data.decode("utf-8"))[source["json_key"]]
    elif "python_name" in source:
        value = take_python_name(data.decode("utf-8"), source["python_name"])
    elif "python_dict" in source:
        value = take_python_dict(data.decode("utf-8"), *source["python_dict"])
    elif "markdown_after" in source:
        value = take_markdown_after(data.decode("utf-8"), source["markdown_after"])
    else:
        value = data
    return value if isinstance(value, bytes) else value.encode("utf-8")


def mirrored(url, mirror):
    """With --mirror, https://host/path is read from <mirror>/host/path (an offline copy)."""
    if not mirror:
        return url
    rest = url.split("://", 1)[1]
    if "://" in mirror:
        return mirror.rstrip("/") + "/" + rest
    return "file://" + os.path.abspath(os.path.join(mirror, rest))


def download(url, timeout):
    with urllib.request.urlopen(url, timeout=timeout) as reply:
        data = reply.read(kMaxBytes + 1)
    if len(data) > kMaxBytes:
        raise ValueError(f"larger than {kMaxBytes} bytes")
    return data


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def present(dest, entry):
    path = os.path.join(dest, entry["path"])
    if not os.path.isfile(path):
        return None
    with open(path, "rb") as f:
        return sha256(f.read()) == entry["sha256"]


def fetch_one(dest, entry, mirror, timeout):
    """True when the file is in place with its checksum; prints what each source answered."""
    if present(dest, entry):
        print(f"ok       {entry['path']} (already here)")
        return True
    for source in entry["sources"]:
        url = mirrored(source["url"], mirror)
        try:
            data = take(source, download(url, timeout))
        except Exception as e:  # a source that fails is reported and the next one tried
            print(f"  failed {url}: {e}")
            continue
        got = sha256(data)
        if got != entry["sha256"]:
            print(f"  wrong  {url}: sha256 {got}, expected {entry['sha256']}")
            continue
        path = os.path.join(dest, entry["path"])
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path))
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
        print(f"fetched  {entry['path']} from {url}")
        return True
    print(f"MISSING  {entry['path']}: no source gave the expected bytes")
    return False


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dest", default=os.path.join(here, "..", "..", "shared"),
                        help="where the test data goes (default: ../shared beside the project)")
    parser.add_argument("--manifest", default=os.path.join(here, "test-data-sources.json"))
    parser.add_argument("--verify", action="store_true",
                        help="fetch nothing; check every listed file (derived ones too) against its sha256")
    parser.add_argument("--mirror", default="",
                        help="read https://host/path from MIRROR/host/path instead (a directory or a URL prefix)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per download")
    args = parser.parse_args()
    with open(args.manifest) as f:
        manifest = json.load(f)
    dest = os.path.abspath(args.dest)
    if args.verify:
        bad = 0
        for entry in manifest["files"] + manifest["derived"]:
            state = present(dest, entry)
            if not state:
                bad += 1
                print(f"{'WRONG' if state is False else 'MISSING':8} {entry['path']}")
        total = len(manifest["files"]) + len(manifest["derived"])
        print(f"{total - bad} of {total} files in {dest} have their listed sha256")
        return 1 if bad else 0
    ok = sum(fetch_one(dest, entry, args.mirror, args.timeout) for entry in manifest["files"])
    derived_here = sum(bool(present(dest, entry)) for entry in manifest["derived"])
    print(f"{ok} of {len(manifest['files'])} public files in {dest}; "
          f"{derived_here} of {len(manifest['derived'])} derived files present "
          "(published nowhere: tests that need a missing one skip and say which)")
    return 0 if ok == len(manifest["files"]) else 1


if __name__ == "__main__":
    sys.exit(main())
