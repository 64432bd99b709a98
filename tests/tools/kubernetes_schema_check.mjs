// Validates every object of a Kubernetes manifest against the API's own OpenAPI schemas, as the
// npm package kubernetes-models (generated from them) carries them: types, enums, required
// fields. Unknown field names are not caught (these schemas allow extra properties).
// Usage: node kubernetes_schema_check.mjs MANIFEST (kubernetes-models and js-yaml resolvable)
import fs from "node:fs";
import yaml from "js-yaml";
const docs = yaml.loadAll(fs.readFileSync(process.argv[2], "utf8")).filter(Boolean);
for (const d of docs) {
  const [group, version] = d.apiVersion.includes("/") ? d.apiVersion.split("/") : ["", d.apiVersion];
  const mod = await import(`kubernetes-models/${group ? group + "/" : ""}${version}/${d.kind}`);
  const Cls = mod[d.kind] ?? mod.default;
  new Cls(d).validate();
  console.log(`${d.kind} ${d.metadata.name}: valid`);
}
