#!/usr/bin/env python3
"""Checks that every #include in engine/ and server/ points down the layer table below.

A file may include a file of its own module or of a module on a lower layer; modules on the
same layer are peers and do not include each other. Exit status 1 and one line per violation
otherwise. --plant FILE:HEADER adds an include that is not in the tree, to show the check fails.
"""
import argparse
import os
import re
import sys

# Lowest first. A module is engine/<name>/ or server/<name>/; "server" is server/'s own files
# (main, options, the metrics port), which compose the front ends.
LAYERS = [
    ["common"],                                   # leaf types: ConfigError, requests, buffers
    ["codecs"],                                   # tensor types and block codecs
    ["kernels", "gguf"],                          # CPU kernels; the file format
    ["weights", "kv_cache"],                      # weight matrices; the paged cache
    ["model", "text", "sampling", "inspect"],      # architectures; tokenizer; sampler; inspection
    ["grammar", "speculative"],                   # constrained decoding (UTF-8 from text/); proposers
                                                  # for speculative decoding (a draft runs a model)
    ["runtime"],                                  # the loop, scheduler, config
    ["tools"],                                    # engine command-line tools
    ["core"],                                     # server/core: transport-neutral service state
    ["grpc", "http", "proto"],                    # the front ends (proto: generated gRPC code)
    ["server"],                                   # server/'s own files: main and what it composes
]
RANK = {m: i for i, layer in enumerate(LAYERS) for m in layer}
GENERATED = re.compile(r"^(kvserve|health)\.(grpc\.)?pb\.h$|^grpc/health/")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def module_of_file(rel):
    """The module a source file belongs to, or None when it is not checked."""
    parts = rel.split("/")
    if parts[0] == "engine" and len(parts) > 2:
        return parts[1]
    if parts[0] == "server":
        return parts[1] if len(parts) > 2 else "server"
    return None


def module_of_include(header, including_rel):
    """The module a quoted include names: its first directory, else the including file's."""
    if GENERATED.match(header):
        return "proto"
    first = header.split("/")[0]
    if "/" in header and first in RANK:
        return first
    return module_of_file(including_rel)


def check(root, planted):
    violations = []
    unknown = set()
    for top in ("engine", "server"):
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for name in sorted(names):
                if not name.endswith((".h", ".cc", ".cc.in")):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, name), root)
                mod = module_of_file(rel)
                if mod is None:
                    continue
                if mod not in RANK:
                    unknown.add(mod)
                    continue
                with open(os.path.join(root, rel), encoding="utf-8") as f:
                    headers = INCLUDE.findall(f.read())
                headers += [h for (p, h) in planted if p == rel]
                for h in headers:
                    target = module_of_include(h, rel)
                    if target == mod or target not in RANK:
                        continue
                    if RANK[target] >= RANK[mod]:
                        how = "a peer of" if RANK[target] == RANK[mod] else "a layer above"
                        violations.append(f"{rel} includes {h}: {target} is {how} {mod}")
    return violations, unknown


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), ".."))
    ap.add_argument("--plant", action="append", default=[], metavar="FILE:HEADER")
    args = ap.parse_args()
    planted = [tuple(p.split(":", 1)) for p in args.plant]
    violations, unknown = check(args.root, planted)
    for m in sorted(unknown):
        violations.append(f"module {m} is not in the layer table (scripts/check_layers.py)")
    for v in violations:
        print(v)
    if violations:
        return 1
    print("layers: every include points down (" + " < ".join("/".join(l) for l in LAYERS) + ")")
    return 0


if __name__ == "__main__":
    sys.exit(main())
