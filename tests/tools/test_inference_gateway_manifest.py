#!/usr/bin/python3
"""Checks docs/kubernetes/inference-gateway.yaml for what makes the inference gateway route to
kvserve as written, by the inference extension's own rules (its v1 InferencePool CRD and the
model-server protocol): the InferencePool has a selector, exactly one target port and an
extensionRef, as the CRD requires; its selector picks the kvserve pods and nothing else; its
target port is the pods' HTTP port, where the OpenAI API and /metrics are (the EPP scrapes
there), served plaintext without tokens; the extensionRef names the EPP's Service and port; the
EPP watches this pool by name with an EndpointPickerConfig it mounts, and may read pods and
pools; the HTTPRoute sends to the pool through the Gateway; readiness is /ready. The schema
check of the core and Gateway API objects is separate (kubernetes_schema_check.mjs)."""
import json
import sys

import yaml

docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
by = {(d["kind"], d["metadata"]["name"]): d for d in docs}
pool = by[("InferencePool", "kvserve-pool")]
assert pool["apiVersion"] == "inference.networking.k8s.io/v1", pool["apiVersion"]
spec = pool["spec"]
assert set(spec) <= {"selector", "targetPorts", "extensionRef"}, spec.keys()
assert spec["selector"]["matchLabels"] and set(spec["selector"]) == {"matchLabels"}
assert len(spec["targetPorts"]) == 1 and 1 <= spec["targetPorts"][0]["number"] <= 65535
ext = spec["extensionRef"]
assert ext["name"] and ext.get("failureMode", "FailClose") in ("FailOpen", "FailClose")

pods = [d for d in docs if d["kind"] == "Deployment"
        and all(d["spec"]["template"]["metadata"]["labels"].get(k) == v for k, v in spec["selector"]["matchLabels"].items())]
assert [d["metadata"]["name"] for d in pods] == ["kvserve-pool"], [d["metadata"]["name"] for d in pods]
pod = pods[0]["spec"]["template"]["spec"]
c = pod["containers"][0]
ports = {p["name"]: p["containerPort"] for p in c["ports"]}
cm = by[("ConfigMap", next(v["configMap"]["name"] for v in pod["volumes"] if "configMap" in v))]
server = json.loads(cm["data"]["kvserve.json"])["server"]
assert int(server["http_listen"].rsplit(":", 1)[1]) == ports["http"] == spec["targetPorts"][0]["number"]
for k in ("tls_cert_file", "auth_token_file"):
    assert not server.get(k), f"the gateway and its EPP reach the pool in plaintext without tokens: {k}"
assert c["readinessProbe"]["httpGet"]["path"] == "/ready"
assert c["readinessProbe"]["httpGet"]["port"] in ("http", ports["http"])
assert pods[0]["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] * 1000 > server["shutdown_grace_ms"]

svc = by[("Service", ext["name"])]
epp = next(d for d in docs if d["kind"] == "Deployment" and
           all(d["spec"]["template"]["metadata"]["labels"].get(k) == v for k, v in svc["spec"]["selector"].items()))
svc_port = next(p for p in svc["spec"]["ports"] if p["port"] == ext.get("portNumber", 9002))
ec = epp["spec"]["template"]["spec"]["containers"][0]
epp_ports = {p["name"]: p["containerPort"] for p in ec["ports"]}
assert epp_ports[svc_port["targetPort"]] == 9002, "the ext-proc port"
args = ec["args"]
assert args[args.index("--pool-name") + 1] == pool["metadata"]["name"]
assert "--pool-group" not in args or args[args.index("--pool-group") + 1] == "inference.networking.k8s.io"
config_file = args[args.index("--config-file") + 1]
mount = next(m for m in ec["volumeMounts"] if config_file.startswith(m["mountPath"] + "/"))
vol = next(v for v in epp["spec"]["template"]["spec"]["volumes"] if v["name"] == mount["name"])
plugins = yaml.safe_load(by[("ConfigMap", vol["configMap"]["name"])]["data"][config_file.rsplit("/", 1)[1]])
assert plugins["kind"] == "EndpointPickerConfig"
declared = {p["type"] for p in plugins["plugins"]}
for profile in plugins["schedulingProfiles"]:
    for ref in profile["plugins"]:
        assert ref["pluginRef"] in declared, ref
assert any(e["name"] == "NAMESPACE" for e in ec["env"])
sa = epp["spec"]["template"]["spec"]["serviceAccountName"]
binding = next(d for d in docs if d["kind"] == "RoleBinding" and any(s["name"] == sa for s in d["subjects"]))
rules = by[("Role", binding["roleRef"]["name"])]["rules"]
def allowed(group, resource):
    return any(group in r["apiGroups"] and resource in r["resources"] and {"get", "watch", "list"} <= set(r["verbs"])
               for r in rules)
assert allowed("", "pods") and allowed("inference.networking.k8s.io", "inferencepools")

route = by[("HTTPRoute", "kvserve")]
assert any(p["name"] == "inference-gateway" for p in route["spec"]["parentRefs"])
assert ("Gateway", "inference-gateway") in by
refs = [b for r in route["spec"]["rules"] for b in r["backendRefs"]]
assert refs == [{"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": "kvserve-pool"}], refs
print("inference-gateway.yaml: the pool selects the kvserve pods on their HTTP port; the EPP, its config, "
      "RBAC and Service agree with the pool; the route sends to the pool")
