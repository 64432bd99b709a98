#!/usr/bin/python3
"""Checks docs/kubernetes/kvserve.yaml for what makes it deployable as written: the embedded
config is one the server's schema accepts (known sections, TLS and token files that the Secret
volumes provide), the model reaches /models through the init container and the ConfigMap's URL,
startup/readiness/liveness probes run kvserve-cli health over TLS against the gRPC port, the
termination grace covers the drain, the memory request covers the KV budget, the image is not
pulled when present, and the ports agree with the Service. The schema check is separate
(kubernetes_schema_check.mjs)."""
import json
import re
import sys

import yaml

path = sys.argv[1]
docs = {d["kind"]: d for d in yaml.safe_load_all(open(path)) if d}
assert set(docs) == {"ConfigMap", "Deployment", "Service"}, set(docs)
cm = docs["ConfigMap"]["data"]
config = json.loads(cm["kvserve.json"])
assert set(config) <= {"model", "cache", "scheduler", "server"}, config.keys()
server = config["server"]
grpc_port = int(server["listen"].rsplit(":", 1)[1])
metrics_port = int(server["metrics_listen"].rsplit(":", 1)[1])
http_port = int(server["http_listen"].rsplit(":", 1)[1])


def size(text):
    """'512MiB' / 1073741824 -> bytes (the forms the server accepts and Kubernetes' Mi/Gi)."""
    if isinstance(text, int):
        return text
    m = re.fullmatch(r"([0-9.]+)\s*(B|KiB|MiB|GiB|Ki|Mi|Gi)?", text)
    assert m, text
    return int(float(m.group(1)) * {None: 1, "B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30,
                                    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30}[m.group(2)])


pod = docs["Deployment"]["spec"]["template"]["spec"]
c = pod["containers"][0]
assert c["imagePullPolicy"] == "IfNotPresent" and not c["image"].endswith(":latest"), c["image"]
ports = {p["name"]: p["containerPort"] for p in c["ports"]}
assert ports == {"grpc": grpc_port, "http": http_port, "metrics": metrics_port}, ports

# Every file the config names is mounted: the model from the emptyDir the init container fills,
# TLS and tokens from Secrets.
mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
volumes = {v["name"]: v for v in pod["volumes"]}
def volume_of(file):
    for mount_path, name in mounts.items():
        if file.startswith(mount_path.rstrip("/") + "/"):
            return volumes[name]
    raise AssertionError(f"{file} is on no mounted volume")
assert "secret" in volume_of(server["tls_cert_file"]) and "secret" in volume_of(server["tls_key_file"])
assert "secret" in volume_of(server["auth_token_file"])
model_volume = volume_of(config["model"]["path"])
assert "emptyDir" in model_volume, model_volume
init = pod["initContainers"][0]
assert any(m["name"] == model_volume["name"] for m in init["volumeMounts"])
assert config["model"]["path"] in " ".join(init["command"])
assert init["env"][0]["valueFrom"]["configMapKeyRef"]["key"] in cm and cm["model_url"].startswith("https://")

# Probes: kvserve-cli health over TLS with the certificate the server serves; a startup probe
# gives a large model time to load before liveness counts.
for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
    cmd = c[probe]["exec"]["command"]
    assert cmd[0] == "kvserve-cli" and cmd[-1] == "health", cmd
    assert cmd[cmd.index("--addr") + 1].endswith(f":{grpc_port}"), cmd
    assert cmd[cmd.index("--tls-ca") + 1] == server["tls_cert_file"], cmd
startup = c["startupProbe"]
assert startup["periodSeconds"] * startup["failureThreshold"] >= 300, "less than 5 minutes to load"
assert "initialDelaySeconds" not in c["livenessProbe"]

grace_s = server["shutdown_grace_ms"] / 1000
assert pod["terminationGracePeriodSeconds"] > grace_s, "pods would be killed mid-drain"
mem = size(c["resources"]["requests"]["memory"])
assert mem > size(config["cache"]["memory_bytes"]) + 140 * 2**20, "request below the KV budget + weights"
assert size(c["resources"]["limits"]["memory"]) >= mem
assert pod["securityContext"]["runAsNonRoot"] is True
svc_ports = {p["name"]: p["targetPort"] for p in docs["Service"]["spec"]["ports"]}
assert svc_ports == {"grpc": "grpc", "http": "http", "metrics": "metrics"}, svc_ports
assert docs["Service"]["spec"]["selector"] == docs["Deployment"]["spec"]["selector"]["matchLabels"]
print("kubernetes manifest: structural checks passed")
