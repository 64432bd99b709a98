#!/usr/bin/python3
"""Checks docs/kubernetes/kvserve.yaml: it parses, the probes are native gRPC probes on the
container's gRPC port, the termination grace covers the server's drain, the embedded config is
one the server's schema accepts (only known sections), and the ports agree with the Service."""
import json
import sys

import yaml

path = sys.argv[1]
docs = {d["kind"]: d for d in yaml.safe_load_all(open(path)) if d}
assert set(docs) == {"ConfigMap", "Deployment", "Service"}, set(docs)
config = json.loads(docs["ConfigMap"]["data"]["kvserve.json"])
assert set(config) <= {"model", "cache", "scheduler", "server"}, config.keys()
grpc_port = int(config["server"]["listen"].rsplit(":", 1)[1])
metrics_port = int(config["server"]["metrics_listen"].rsplit(":", 1)[1])

pod = docs["Deployment"]["spec"]["template"]["spec"]
c = pod["containers"][0]
ports = {p["name"]: p["containerPort"] for p in c["ports"]}
assert ports == {"grpc": grpc_port, "metrics": metrics_port}, ports
for probe in ("readinessProbe", "livenessProbe"):
    assert c[probe]["grpc"]["port"] == grpc_port, probe
grace_s = config["server"]["shutdown_grace_ms"] / 1000
assert pod["terminationGracePeriodSeconds"] > grace_s, "pods would be killed mid-drain"
mem = c["resources"]["requests"]["memory"]
assert mem.endswith("Mi") and int(mem[:-2]) * 2**20 > config["cache"]["memory_bytes"], "request below the KV budget"
assert pod["securityContext"]["runAsNonRoot"] is True
svc_ports = {p["name"]: p["targetPort"] for p in docs["Service"]["spec"]["ports"]}
assert svc_ports == {"grpc": "grpc", "metrics": "metrics"}, svc_ports
assert docs["Service"]["spec"]["selector"] == docs["Deployment"]["spec"]["selector"]["matchLabels"]
print("kubernetes manifest: all checks passed")
