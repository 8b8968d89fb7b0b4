// Validates KEDA documents (JSON array on stdin) against the ScaledObject and
// TriggerAuthentication schemas of @kubernetes-models/keda (generated from KEDA's own Go
// types). Prints one JSON line per document: {"kind", "name", "errors": [...]}, and exits 1
// when any document is invalid or of a kind it has no schema for.
import { ScaledObject } from "@kubernetes-models/keda/keda.sh/v1alpha1/ScaledObject";
import { TriggerAuthentication } from "@kubernetes-models/keda/keda.sh/v1alpha1/TriggerAuthentication";

const MODELS = { ScaledObject, TriggerAuthentication };
const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
let failed = false;
for (const doc of JSON.parse(Buffer.concat(chunks).toString("utf8"))) {
  const Model = doc.apiVersion === "keda.sh/v1alpha1" ? MODELS[doc.kind] : undefined;
  let errors = [];
  if (!Model) {
    errors = [`no schema for ${doc.apiVersion} ${doc.kind}`];
  } else {
    try {
      new Model(doc).validate();
    } catch (err) {
      errors = [String(err.message ?? err)];
    }
  }
  failed ||= errors.length > 0;
  console.log(JSON.stringify({ kind: doc.kind, name: doc.metadata?.name, errors }));
}
process.exit(failed ? 1 : 0);
