// Validates every object of a Kubernetes manifest against its API's own OpenAPI schemas, as npm
// packages generated from them carry them: kubernetes-models for the core APIs,
// @kubernetes-models/gateway-api for Gateway and HTTPRoute (types, enums, required fields;
// unknown field names are not caught, as these schemas allow extra properties). An
// InferencePool, which no package carries, is left to test_inference_gateway_manifest.py.
// Usage: node kubernetes_schema_check.mjs MANIFEST (the packages and js-yaml resolvable)
import fs from "node:fs";
import yaml from "js-yaml";
const docs = yaml.loadAll(fs.readFileSync(process.argv[2], "utf8")).filter(Boolean);
for (const d of docs) {
  const [group, version] = d.apiVersion.includes("/") ? d.apiVersion.split("/") : ["", d.apiVersion];
  if (group === "inference.networking.k8s.io") {
    console.log(`${d.kind} ${d.metadata.name}: checked by test_inference_gateway_manifest.py`);
    continue;
  }
  const pkg = group.startsWith("gateway.networking") ? "@kubernetes-models/gateway-api" : "kubernetes-models";
  const mod = await import(`${pkg}/${group ? group + "/" : ""}${version}/${d.kind}`);
  const Cls = mod[d.kind] ?? mod.default;
  new Cls(d).validate();
  console.log(`${d.kind} ${d.metadata.name}: valid`);
}
