#!/usr/bin/python3
"""Streams a continuation from a kvserve server with Python's grpcio: docs/api.md's Python example.

Needs Debian's python3-grpcio and python3-protobuf (scripts/deps.sh --test installs them; run it
with /usr/bin/python3, whose packages those are) and the stubs the build generates in
build/python (kvserve_pb2.py, kvserve_pb2_grpc.py).
Usage: /usr/bin/python3 clients/python/generate.py [--addr HOST:PORT] [--stubs DIR]
       [--max-tokens N] [--temperature T] PROMPT
"""
import argparse
import os
import sys


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("prompt")
    p.add_argument("--addr", default="127.0.0.1:50051")
    p.add_argument("--stubs", default=os.path.join(here, "..", "..", "build", "python"),
                   help="folder holding kvserve_pb2.py (default: build/python)")
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--temperature", type=float, default=1.0)
    args = p.parse_args()
    sys.path.insert(0, args.stubs)
    import grpc
    import kvserve_pb2 as pb
    import kvserve_pb2_grpc as pbg

    stub = pbg.InferenceStub(grpc.insecure_channel(args.addr))
    request = pb.GenerateRequest(prompt=args.prompt,
                                 sampling=pb.SamplingParams(max_new_tokens=args.max_tokens,
                                                            temperature=args.temperature))
    try:
        for response in stub.Generate(request):
            if response.HasField("chunk"):
                sys.stdout.write(response.chunk.text)
                sys.stdout.flush()
            elif response.HasField("complete"):
                c = response.complete
                print(f"\n[{pb.FinishReason.Name(c.finish_reason)}: {c.prompt_tokens} prompt and "
                      f"{c.completion_tokens} generated tokens]", file=sys.stderr)
    except grpc.RpcError as e:
        print(f"generate.py: {e.code().name}: {e.details()}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
