// Request validation of the Kubernetes API stand-in.
//
// Three layers, in the order a real API server applies them:
//   1. decoding: JSON, apiVersion/kind matching the route, unknown fields
//      (fieldValidation=Strict rejects them, Warn/Ignore drop them);
//   2. the official OpenAPI schema of the object (npm kubernetes-models,
//      generated from the Kubernetes OpenAPI spec), answered as 422 Invalid;
//   3. a subset of the API server's own validation (names, labels, pod
//      volume/mount consistency, quantities, secrets) and admission
//      (RuntimeClass existence, Pod Security "restricted" when the namespace
//      asks for it), answered as 422 Invalid or 403 Forbidden.
// What is NOT checked is listed in ../README.md.
"use strict";

const { Namespace, Pod, Secret, ConfigMap } = require("kubernetes-models/v1");
const { NetworkPolicy } = require("kubernetes-models/networking.k8s.io/v1");
const { RoleBinding } = require("kubernetes-models/rbac.authorization.k8s.io/v1");
const { DeleteOptions } = require("@kubernetes-models/apimachinery/apis/meta/v1/DeleteOptions");

const MODELS = {
  Namespace: { model: Namespace, apiVersion: "v1" },
  Pod: { model: Pod, apiVersion: "v1" },
  Secret: { model: Secret, apiVersion: "v1" },
  ConfigMap: { model: ConfigMap, apiVersion: "v1" },
  NetworkPolicy: { model: NetworkPolicy, apiVersion: "networking.k8s.io/v1" },
  RoleBinding: { model: RoleBinding, apiVersion: "rbac.authorization.k8s.io/v1" },
  DeleteOptions: { model: DeleteOptions, apiVersion: "v1" },
};

class ApiError extends Error {
  // code: HTTP status; reason: Kubernetes StatusReason; causes: [{reason, message, field}]
  constructor(code, reason, message, details) {
    super(message);
    this.code = code;
    this.reason = reason;
    this.details = details || undefined;
  }
}

// ---------------------------------------------------------------- unknown fields
// The generated validators read exactly the properties the schema knows and
// iterate the keys of maps.  Wrapping the body in a Proxy that records those
// reads tells, after validation, which keys the schema did not know.
function track(obj, path, touched) {
  if (obj === null || typeof obj !== "object") return obj;
  const cache = new Map();
  let seen = touched.get(path);
  if (!seen) { seen = new Set(); touched.set(path, seen); }
  return new Proxy(obj, {
    get(t, k, r) {
      const v = Reflect.get(t, k, r);
      if (typeof k !== "string" || !Object.prototype.hasOwnProperty.call(t, k)) return v;
      seen.add(k);
      if (v && typeof v === "object") {
        if (!cache.has(k)) cache.set(k, track(v, path + "/" + k, touched));
        return cache.get(k);
      }
      return v;
    },
    ownKeys(t) {
      const keys = Reflect.ownKeys(t);
      for (const k of keys) if (typeof k === "string") seen.add(k);
      return keys;
    },
  });
}

function k8sPath(ptr) {
  // "/spec/containers/0/image" -> "spec.containers[0].image"
  let out = "";
  for (const part of ptr.split("/").slice(1)) {
    if (/^\d+$/.test(part)) out += "[" + part + "]";
    else out += (out ? "." : "") + part.replace(/~1/g, "/").replace(/~0/g, "~");
  }
  return out;
}

function findUnknown(obj, path, touched, out) {
  if (obj === null || typeof obj !== "object") return;
  const seen = touched.get(path) || new Set();
  for (const k of Object.keys(obj)) {
    const p = path + "/" + k;
    if (!Array.isArray(obj) && !seen.has(k)) out.push(k8sPath(p));
    else findUnknown(obj[k], p, touched, out);
  }
}

function dropPath(obj, dotted) {
  // best effort removal of an unknown field (Warn/Ignore modes)
  const parts = dotted.replace(/\[(\d+)\]/g, ".$1").split(".");
  let cur = obj;
  for (let i = 0; i < parts.length - 1; i++) { cur = cur && cur[parts[i]]; }
  if (cur && typeof cur === "object") delete cur[parts[parts.length - 1]];
}

// Schema validation; returns {warnings} or throws ApiError.
function schemaCheck(kind, body, fieldValidation, name) {
  const m = MODELS[kind];
  const touched = new Map();
  let errors = null;
  try {
    m.model.prototype.validate.call(track(body, "", touched));
  } catch (e) {
    errors = e.errors || [{ instancePath: "", message: e.message }];
  }
  const unknown = [];
  findUnknown(body, "", touched, unknown);
  const warnings = [];
  if (unknown.length) {
    if (fieldValidation === "Strict") {
      throw new ApiError(400, "BadRequest", "strict decoding error: " +
        unknown.map((u) => `unknown field "${u}"`).join(", "));
    }
    for (const u of unknown) {
      if (fieldValidation !== "Ignore") warnings.push(`unknown field "${u}"`);
      dropPath(body, u);
    }
  }
  if (errors) {
    const causes = errors.map((e) => ({
      reason: e.keyword === "required" ? "FieldValueRequired" : "FieldValueInvalid",
      message: (e.keyword === "required" ? "Required value: " + e.params.missingProperty
        : "Invalid value: " + e.message),
      field: k8sPath(e.instancePath + (e.keyword === "required" ? "/" + e.params.missingProperty : "")),
    }));
    throw invalid(kind, name, causes);
  }
  return { warnings };
}

function invalid(kind, name, causes) {
  const msg = `${kind} "${name || ""}" is invalid: ` +
    causes.map((c) => `${c.field}: ${c.message}`).join(", ");
  return new ApiError(422, "Invalid", msg, { name: name || "", kind: kind.toLowerCase() + "s", causes });
}

// ---------------------------------------------------------------- apiserver rules
const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const QUALIFIED_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
const CONFIG_KEY = /^[-._a-zA-Z0-9]+$/;
const ENV_NAME = /^[-._a-zA-Z][-._a-zA-Z0-9]*$/;

function checkDnsLabel(v, field, causes) {
  if (typeof v !== "string" || v.length > 63 || !DNS1123_LABEL.test(v))
    causes.push({ reason: "FieldValueInvalid", field,
      message: `Invalid value: "${v}": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character` });
}
function checkDnsSubdomain(v, field, causes) {
  if (typeof v !== "string" || v.length > 253 || !DNS1123_SUBDOMAIN.test(v))
    causes.push({ reason: "FieldValueInvalid", field,
      message: `Invalid value: "${v}": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character` });
}
function checkQualifiedName(k, field, causes) {
  const parts = k.split("/");
  let ok = parts.length <= 2;
  if (parts.length === 2) ok = ok && parts[0].length <= 253 && DNS1123_SUBDOMAIN.test(parts[0]);
  const n = parts[parts.length - 1];
  ok = ok && n.length > 0 && n.length <= 63 && QUALIFIED_NAME.test(n);
  if (!ok) causes.push({ reason: "FieldValueInvalid", field, message: `Invalid value: "${k}": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character` });
}

function checkMeta(kind, meta, causes, clusterScoped) {
  meta = meta || {};
  if (!meta.name && !meta.generateName)
    causes.push({ reason: "FieldValueRequired", field: "metadata.name", message: "Required value: name or generateName is required" });
  if (meta.name) {
    if (kind === "Namespace") checkDnsLabel(meta.name, "metadata.name", causes);
    else checkDnsSubdomain(meta.name, "metadata.name", causes);
  }
  for (const [k, v] of Object.entries(meta.labels || {})) {
    checkQualifiedName(k, "metadata.labels", causes);
    if (typeof v !== "string" || v.length > 63 || !LABEL_VALUE.test(v))
      causes.push({ reason: "FieldValueInvalid", field: "metadata.labels", message: `Invalid value: "${v}": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character` });
  }
  let annSize = 0;
  for (const [k, v] of Object.entries(meta.annotations || {})) {
    checkQualifiedName(k, "metadata.annotations", causes);
    annSize += k.length + String(v).length;
  }
  if (annSize > 262144)
    causes.push({ reason: "FieldValueTooLong", field: "metadata.annotations", message: "Too long: must have at most 262144 bytes" });
  for (const [i, o] of (meta.ownerReferences || []).entries()) {
    if (!o.uid) causes.push({ reason: "FieldValueInvalid", field: `metadata.ownerReferences[${i}].uid`, message: "Invalid value: \"\": uid must not be empty" });
    if (clusterScoped === false && o.kind === "Namespace") { /* allowed */ }
  }
}

// Kubernetes resource quantity -> number (cores or bytes); NaN when malformed.
function parseQuantity(q) {
  if (typeof q === "number") return q;
  const m = /^([+-]?[0-9.]+)([eE][+-]?[0-9]+|n|u|m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$/.exec(String(q));
  if (!m) return NaN;
  const n = parseFloat(m[1]);
  const s = m[2] || "";
  const mult = { "": 1, n: 1e-9, u: 1e-6, m: 1e-3, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18,
    Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3, Ti: 1024 ** 4, Pi: 1024 ** 5, Ei: 1024 ** 6 };
  if (s.startsWith("e") || s.startsWith("E")) return n * Math.pow(10, parseInt(s.slice(1), 10));
  return n * mult[s];
}

function checkPod(pod, causes) {
  const spec = pod.spec || {};
  if (spec.restartPolicy && !["Always", "OnFailure", "Never"].includes(spec.restartPolicy))
    causes.push({ reason: "FieldValueNotSupported", field: "spec.restartPolicy", message: `Unsupported value: "${spec.restartPolicy}": supported values: "Always", "OnFailure", "Never"` });
  if (spec.activeDeadlineSeconds !== undefined && !(spec.activeDeadlineSeconds >= 1))
    causes.push({ reason: "FieldValueInvalid", field: "spec.activeDeadlineSeconds", message: "Invalid value: must be between 1 and 2147483647, inclusive" });
  const volumes = new Map();
  for (const [i, v] of (spec.volumes || []).entries()) {
    checkDnsLabel(v.name, `spec.volumes[${i}].name`, causes);
    if (volumes.has(v.name)) causes.push({ reason: "FieldValueDuplicate", field: `spec.volumes[${i}].name`, message: `Duplicate value: "${v.name}"` });
    volumes.set(v.name, v);
    const sources = Object.keys(v).filter((k) => k !== "name");
    if (sources.length !== 1) causes.push({ reason: "FieldValueRequired", field: `spec.volumes[${i}]`, message: "must specify exactly one volume source" });
    if (v.secret && !v.secret.secretName) causes.push({ reason: "FieldValueRequired", field: `spec.volumes[${i}].secret.secretName`, message: "Required value" });
    if (v.emptyDir && v.emptyDir.sizeLimit !== undefined && !(parseQuantity(v.emptyDir.sizeLimit) > 0))
      causes.push({ reason: "FieldValueInvalid", field: `spec.volumes[${i}].emptyDir.sizeLimit`, message: "Invalid value: must be greater than zero" });
    const items = (v.secret && v.secret.items) || (v.configMap && v.configMap.items) || [];
    for (const [j, it] of items.entries()) {
      if (!it.path || it.path.startsWith("/") || it.path.split("/").includes(".."))
        causes.push({ reason: "FieldValueInvalid", field: `spec.volumes[${i}].items[${j}].path`, message: `Invalid value: "${it.path}": must be a relative path without '..'` });
      if (typeof it.mode === "number" && (it.mode < 0 || it.mode > 0o777))
        causes.push({ reason: "FieldValueInvalid", field: `spec.volumes[${i}].items[${j}].mode`, message: "Invalid value: must be a number between 0 and 0777" });
    }
  }
  const cnames = new Set();
  const all = [...(spec.initContainers || []).map((c, i) => [c, `spec.initContainers[${i}]`]),
    ...(spec.containers || []).map((c, i) => [c, `spec.containers[${i}]`])];
  for (const [c, f] of all) {
    checkDnsLabel(c.name, f + ".name", causes);
    if (cnames.has(c.name)) causes.push({ reason: "FieldValueDuplicate", field: f + ".name", message: `Duplicate value: "${c.name}"` });
    cnames.add(c.name);
    if (!c.image) causes.push({ reason: "FieldValueRequired", field: f + ".image", message: "Required value" });
    const mountPaths = new Set();
    for (const [j, vm] of (c.volumeMounts || []).entries()) {
      if (!volumes.has(vm.name)) causes.push({ reason: "FieldValueNotFound", field: `${f}.volumeMounts[${j}].name`, message: `Not found: "${vm.name}"` });
      if (!vm.mountPath || !vm.mountPath.startsWith("/")) causes.push({ reason: "FieldValueInvalid", field: `${f}.volumeMounts[${j}].mountPath`, message: "Invalid value: must be an absolute path" });
      if (mountPaths.has(vm.mountPath)) causes.push({ reason: "FieldValueInvalid", field: `${f}.volumeMounts[${j}].mountPath`, message: `Invalid value: "${vm.mountPath}": must be unique` });
      mountPaths.add(vm.mountPath);
      if (vm.subPath && (vm.subPath.startsWith("/") || vm.subPath.split("/").includes("..")))
        causes.push({ reason: "FieldValueInvalid", field: `${f}.volumeMounts[${j}].subPath`, message: "Invalid value: must be a relative path without '..'" });
    }
    for (const [j, e] of (c.env || []).entries()) {
      if (!ENV_NAME.test(e.name || "")) causes.push({ reason: "FieldValueInvalid", field: `${f}.env[${j}].name`, message: `Invalid value: "${e.name}": a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', and must not start with a digit` });
      if (e.value !== undefined && e.valueFrom !== undefined) causes.push({ reason: "FieldValueInvalid", field: `${f}.env[${j}].valueFrom`, message: "Invalid value: may not be specified when `value` is not empty" });
    }
    const res = c.resources || {};
    for (const which of ["limits", "requests"]) {
      for (const [rk, rv] of Object.entries(res[which] || {})) {
        const n = parseQuantity(rv);
        if (!(n >= 0)) causes.push({ reason: "FieldValueInvalid", field: `${f}.resources.${which}[${rk}]`, message: `Invalid value: "${rv}": must be a valid quantity` });
      }
    }
    for (const [rk, rv] of Object.entries(res.requests || {})) {
      const lim = (res.limits || {})[rk];
      if (lim !== undefined && parseQuantity(rv) > parseQuantity(lim))
        causes.push({ reason: "FieldValueInvalid", field: `${f}.resources.requests`, message: `Invalid value: "${rv}": must be less than or equal to ${rk} limit of ${lim}` });
    }
  }
}

// Decoding of []byte fields happens before validation on a real server:
// bad base64 is a 400 BadRequest, not a 422.
function decodeBytes(kind, obj) {
  for (const field of kind === "Secret" ? ["data"] : ["binaryData"]) {
    for (const [k, v] of Object.entries((obj && obj[field]) || {})) {
      if (typeof v !== "string" || !/^[A-Za-z0-9+/]*={0,2}$/.test(v) || v.length % 4 !== 0)
        throw new ApiError(400, "BadRequest", `${kind} in version "v1" cannot be handled as a ${kind}: illegal base64 data in ${field}[${k}]`);
    }
  }
}

function checkSecretLike(kind, obj, causes) {
  let size = 0;
  for (const field of ["data", "stringData", "binaryData"]) {
    for (const [k, v] of Object.entries(obj[field] || {})) {
      if (!CONFIG_KEY.test(k) || k.length > 253)
        causes.push({ reason: "FieldValueInvalid", field: `${field}[${k}]`, message: `Invalid value: "${k}": a valid config key must consist of alphanumeric characters, '-', '_' or '.'` });
      if (field === "data" && kind === "Secret" || field === "binaryData") {
        size += Buffer.from(v, "base64").length;
      } else size += String(v).length;
    }
  }
  if (size > 1048576)
    causes.push({ reason: "FieldValueTooLong", field: "data", message: "Too long: must have at most 1048576 bytes" });
}

const CIDR4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})\/(\d{1,2})$/;
function validCidr(c) {
  const m = CIDR4.exec(c || "");
  if (m) return m.slice(1, 5).every((x) => +x <= 255) && +m[5] <= 32;
  const i = (c || "").lastIndexOf("/");
  if (i < 0) return false;
  const ip = c.slice(0, i), pfx = c.slice(i + 1);
  return /^[0-9a-fA-F:]+$/.test(ip) && ip.includes(":") && /^\d+$/.test(pfx) && +pfx <= 128;
}

function checkNetworkPolicy(np, causes) {
  const spec = np.spec || {};
  for (const [i, t] of (spec.policyTypes || []).entries())
    if (!["Ingress", "Egress"].includes(t)) causes.push({ reason: "FieldValueNotSupported", field: `spec.policyTypes[${i}]`, message: `Unsupported value: "${t}": supported values: "Ingress", "Egress"` });
  const rules = [...(spec.egress || []).map((r, i) => [r, `spec.egress[${i}]`, r.to]),
    ...(spec.ingress || []).map((r, i) => [r, `spec.ingress[${i}]`, r.from])];
  for (const [r, f, peers] of rules) {
    for (const [j, p] of (r.ports || []).entries()) {
      if (p.protocol && !["TCP", "UDP", "SCTP"].includes(p.protocol))
        causes.push({ reason: "FieldValueNotSupported", field: `${f}.ports[${j}].protocol`, message: `Unsupported value: "${p.protocol}"` });
      if (typeof p.port === "number" && (p.port < 1 || p.port > 65535))
        causes.push({ reason: "FieldValueInvalid", field: `${f}.ports[${j}].port`, message: "Invalid value: must be between 1 and 65535, inclusive" });
    }
    for (const [j, p] of (peers || []).entries()) {
      if (p.ipBlock) {
        if (!validCidr(p.ipBlock.cidr)) causes.push({ reason: "FieldValueInvalid", field: `${f}.to[${j}].ipBlock.cidr`, message: `Invalid value: "${p.ipBlock.cidr}": must be a valid CIDR` });
        if (p.podSelector || p.namespaceSelector) causes.push({ reason: "FieldValueForbidden", field: `${f}.to[${j}]`, message: "Forbidden: may not specify more than 1 peer type" });
      }
    }
  }
}

// ---------------------------------------------------------------- admission
// Pod Security Standards, "restricted" level (what the namespace label
// pod-security.kubernetes.io/enforce=restricted makes the API server enforce).
function podSecurityRestricted(pod) {
  const spec = pod.spec || {};
  const psc = spec.securityContext || {};
  const v = [];
  if (spec.hostNetwork || spec.hostPID || spec.hostIPC) v.push("host namespaces (hostNetwork=true, hostPID=true or hostIPC=true)");
  const allowedVol = ["configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"];
  for (const vol of spec.volumes || []) {
    const t = Object.keys(vol).find((k) => k !== "name");
    if (!allowedVol.includes(t)) v.push(`restricted volume types (volume "${vol.name}" uses ${t})`);
  }
  const containers = [...(spec.initContainers || []), ...(spec.containers || [])];
  const bad = (what, pred) => {
    const names = containers.filter(pred).map((c) => `"${c.name}"`);
    if (names.length) v.push(`${what} (container${names.length > 1 ? "s" : ""} ${names.join(", ")})`);
  };
  bad("privileged", (c) => c.securityContext && c.securityContext.privileged === true);
  bad("allowPrivilegeEscalation != false", (c) => !c.securityContext || c.securityContext.allowPrivilegeEscalation !== false);
  bad("unrestricted capabilities (must set securityContext.capabilities.drop=[\"ALL\"])",
    (c) => !((c.securityContext || {}).capabilities || {}).drop || !c.securityContext.capabilities.drop.includes("ALL"));
  bad("unrestricted capabilities (only NET_BIND_SERVICE may be added)",
    (c) => (((c.securityContext || {}).capabilities || {}).add || []).some((a) => a !== "NET_BIND_SERVICE"));
  bad("runAsNonRoot != true", (c) => {
    const cs = c.securityContext || {};
    return cs.runAsNonRoot === false || (cs.runAsNonRoot !== true && psc.runAsNonRoot !== true);
  });
  bad("runAsUser=0", (c) => (c.securityContext || {}).runAsUser === 0 || ((c.securityContext || {}).runAsUser === undefined && psc.runAsUser === 0));
  bad("seccompProfile (must set type to \"RuntimeDefault\" or \"Localhost\")", (c) => {
    const t = ((c.securityContext || {}).seccompProfile || psc.seccompProfile || {}).type;
    return t !== "RuntimeDefault" && t !== "Localhost";
  });
  bad("hostPort", (c) => (c.ports || []).some((p) => p.hostPort));
  return v;
}

module.exports = {
  ApiError, MODELS, schemaCheck, invalid, checkMeta, checkPod, checkSecretLike,
  checkNetworkPolicy, podSecurityRestricted, parseQuantity, decodeBytes,
};
