#!/usr/bin/python3
"""An independent client: Python grpcio (Debian's python3-grpcio) against the real server.

Checks that the API works for clients no one here wrote: streaming Generate reproduces the
public stories260K reference, Tokenize, GetModelInfo, the standard health service, and a bad
field answered with INVALID_ARGUMENT naming it.
Usage: e2e_python_client.py SERVER_BIN MODEL STUBS_DIR REQUIRE_SHARED(0|1) EXPECTED_TXT
"""
import os
import signal
import subprocess
import sys
import tempfile
import time

SKIP = 77  # ctest SKIP_RETURN_CODE


def main():
    server_bin, model, stubs, require, expected_path = sys.argv[1:6]
    if not os.path.exists(model):
        print(f"test data {model} not found; skipping")
        return 1 if require == "1" else SKIP
    sys.path.insert(0, stubs)
    import grpc
    import kvserve_pb2 as pb
    import kvserve_pb2_grpc as pbg
    import importlib.util
    # Loaded by path: a "grpc" folder of stubs cannot shadow the installed grpc package.
    spec = importlib.util.spec_from_file_location("health_pb2", os.path.join(stubs, "grpc/health/v1/health_pb2.py"))
    health_pb2 = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(health_pb2)

    tmp = tempfile.mkdtemp()
    port_file = os.path.join(tmp, "port")
    proc = subprocess.Popen([server_bin, "--model", model, "--listen", "127.0.0.1:0", "--port-file", port_file,
                             "--set", "cache.num_blocks=256", "--set", "server.log_level=\"warn\"",
                             "--set", "server.http_listen=\"127.0.0.1:0\""])
    try:
        for _ in range(300):
            if os.path.exists(port_file):
                break
            time.sleep(0.05)
        port = int(open(port_file).read())
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        stub = pbg.InferenceStub(channel)

        check = channel.unary_unary("/grpc.health.v1.Health/Check",
                                    request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
                                    response_deserializer=health_pb2.HealthCheckResponse.FromString)
        assert check(health_pb2.HealthCheckRequest()).status == health_pb2.HealthCheckResponse.SERVING

        req = pb.GenerateRequest(prompt_token_ids=[1], request_id="py-1",
                                 sampling=pb.SamplingParams(max_new_tokens=200, temperature=0.0))
        text, chunks, complete = "", 0, None
        for resp in stub.Generate(req, timeout=60):
            if resp.HasField("chunk"):
                chunks += 1
                text += resp.chunk.text
            else:
                complete = resp.complete
        expected = open(expected_path, encoding="utf-8").read()
        assert text == expected, f"text differs:\n{text!r}\n{expected!r}"
        assert chunks > 1, "the text did not stream"
        assert complete.finish_reason == pb.FINISH_REASON_LENGTH
        assert complete.completion_tokens == 200 and complete.request_id == "py-1"

        tok = stub.Tokenize(pb.TokenizeRequest(text="Once upon a time"))
        assert list(tok.token_ids) == [1, 403, 407, 261, 378], list(tok.token_ids)

        info = stub.GetModelInfo(pb.GetModelInfoRequest())
        assert info.kv_bytes_per_token.total == 2 * 5 * 4 * 8 * 4
        assert info.n_kv_heads == 4 and info.num_blocks == 256

        try:
            list(stub.Generate(pb.GenerateRequest(prompt="x", sampling=pb.SamplingParams(top_p=3.0))))
            raise AssertionError("top_p=3 was accepted")
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, e.code()
            assert "sampling.top_p" in e.details(), e.details()

        # Streaming a long request while aborting it from the same client.
        stream = stub.Generate(pb.GenerateRequest(prompt="Once", request_id="py-2",
                                                  sampling=pb.SamplingParams(max_new_tokens=1500,
                                                                             ignore_eos=True)))
        next(stream)
        assert stub.Abort(pb.AbortRequest(request_id="py-2")).found
        try:
            for _ in stream:
                pass
            raise AssertionError("aborted stream ended OK")
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.CANCELLED, e.code()
        # Server reflection, so grpcurl-style tools work without the proto: ask it to list the
        # services (ServerReflectionRequest field 7, list_services) and look for ours.
        reflect = channel.stream_stream("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
                                        request_serializer=lambda b: b, response_deserializer=lambda b: b)
        listing = b"".join(reflect(iter([b"\x3a\x00"]), timeout=10))
        assert b"kvserve.v1.Inference" in listing and b"grpc.health.v1.Health" in listing, listing
        print("python grpcio client: all checks passed")
        return 0
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


if __name__ == "__main__":
    sys.exit(main())
