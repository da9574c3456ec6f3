// Pod lifecycle simulation of the Kubernetes API stand-in.
//
// A real kubelet would pull the image and run it under the runtime class.
// The stand-in runs nothing: it interprets the container's command line
// with a tiny, documented vocabulary (README.md, "Simulated programs") and
// drives the pod through the phases and container states a real kubelet
// reports (Pending/ContainerCreating, Running, Succeeded, Failed with an
// exit code, OOMKilled, DeadlineExceeded, Evicted, ErrImagePull).
// Everything the simulated program can observe (files, env, the service
// account token, writability of paths, the memory limit) is derived from
// the Pod spec the plugin sent, so the simulation checks that spec.
"use strict";

const { parseQuantity } = require("./validate.js");

const SA_TOKEN_DIR = "/var/run/secrets/kubernetes.io/serviceaccount";

function nowIso() { return new Date().toISOString().replace(/\.\d{3}Z$/, "Z"); }

class PodRun {
  // store: { get(kind, ns, name), onChange(pod) }, opts: { startDelayMs }
  constructor(store, pod, opts) {
    this.store = store;
    this.pod = pod;
    this.opts = opts;
    this.timers = new Set();
    this.log = "";           // what the log endpoint serves: both streams interleaved
    this.stdout = "";
    this.stderr = "";
    this.listeners = new Set();
    this.terminated = false;
    this.started = false;
    this.emptyDirs = new Map(); // volume name -> Map(path -> Buffer)
    this.waitingReason = "ContainerCreating";
  }

  container() { return this.pod.spec.containers[0]; }

  later(ms, fn) {
    const t = setTimeout(() => { this.timers.delete(t); fn(); }, ms);
    this.timers.add(t);
  }

  stop() { for (const t of this.timers) clearTimeout(t); this.timers.clear(); }

  emit(stream, text) {
    if (stream === "stdout") this.stdout += text; else this.stderr += text;
    this.log += text;
    for (const l of this.listeners) l.data(text);
  }

  setStatus(fn) {
    fn(this.pod.status);
    this.store.touch(this.pod);
  }

  begin() {
    const c = this.container();
    this.pod.status = {
      phase: "Pending",
      qosClass: qosClass(this.pod),
      conditions: [],
    };
    this.later(this.opts.startDelayMs, () => this.schedule(c));
  }

  schedule(c) {
    const t = nowIso();
    this.startMs = Date.now();
    this.setStatus((s) => {
      s.startTime = t;
      s.hostIP = "10.0.0.1";
      s.conditions = [{ type: "PodScheduled", status: "True", lastTransitionTime: t }];
      s.containerStatuses = [{ name: c.name, image: c.image, imageID: "", ready: false, restartCount: 0,
        started: false, state: { waiting: { reason: "ContainerCreating" } }, lastState: {} }];
    });
    const ads = this.pod.spec.activeDeadlineSeconds;
    if (ads) this.later(ads * 1000, () => this.deadline());
    this.tryStart(c);
  }

  // Wait for the image and for every secret/configMap the pod needs.
  tryStart(c) {
    if (this.terminated) return;
    if (/(^|\/)(missing|does-not-exist)([:@]|$)/.test(c.image)) {
      return this.waiting("ErrImagePull", `rpc error: code = NotFound desc = failed to pull and unpack image "${c.image}": not found`);
    }
    const ns = this.pod.metadata.namespace;
    for (const v of this.pod.spec.volumes || []) {
      const ref = v.secret ? ["Secret", v.secret.secretName, v.secret.optional]
        : v.configMap ? ["ConfigMap", v.configMap.name, v.configMap.optional] : null;
      if (ref && !ref[2] && !this.store.get(ref[0], ns, ref[1])) {
        this.waiting("ContainerCreating", `MountVolume.SetUp failed for volume "${v.name}" : ${ref[0].toLowerCase()} "${ref[1]}" not found`);
        return this.later(50, () => this.tryStart(c));
      }
    }
    for (const e of c.env || []) {
      const ref = e.valueFrom && (e.valueFrom.secretKeyRef || e.valueFrom.configMapKeyRef);
      if (!ref) continue;
      const kind = e.valueFrom.secretKeyRef ? "Secret" : "ConfigMap";
      const obj = this.store.get(kind, ns, ref.name);
      const has = obj && ((obj.data && ref.key in obj.data) || (obj.binaryData && ref.key in obj.binaryData));
      if (!has && !ref.optional) {
        this.waiting("CreateContainerConfigError", obj ? `couldn't find key ${ref.key} in ${kind} ${ns}/${ref.name}` : `${kind.toLowerCase()} "${ref.name}" not found`);
        return this.later(50, () => this.tryStart(c));
      }
    }
    this.run(c);
  }

  waiting(reason, message) {
    if (this.waitingReason === reason && this.waitingMessage === message) return;
    this.waitingReason = reason;
    this.waitingMessage = message;
    this.setStatus((s) => { s.containerStatuses[0].state = { waiting: { reason, message } }; });
  }

  run(c) {
    const t = nowIso();
    this.started = true;
    this.startedAt = t;
    this.setStatus((s) => {
      s.phase = "Running";
      s.podIP = "10.1.0.2";
      s.conditions.push({ type: "Initialized", status: "True", lastTransitionTime: t },
        { type: "ContainersReady", status: "True", lastTransitionTime: t },
        { type: "Ready", status: "True", lastTransitionTime: t });
      s.containerStatuses[0] = { name: c.name, image: c.image, imageID: "standin://" + c.image,
        containerID: "standin://" + this.pod.metadata.uid, ready: true, restartCount: 0, started: true,
        state: { running: { startedAt: t } }, lastState: {} };
    });
    const argv = [...(c.command || []), ...(c.args || [])];
    this.steps = this.interpret(argv);
    this.next();
  }

  next() {
    while (!this.terminated && this.steps.length) {
      const s = this.steps.shift();
      if (s.sleep) return this.later(s.sleep, () => this.next());
      s.fn();
    }
    if (!this.terminated) this.exit(0);
  }

  exit(code, reason, signal) {
    if (this.terminated) return;
    this.terminated = true;
    this.stop();
    const t = nowIso();
    const term = { exitCode: code, reason: reason || (code === 0 ? "Completed" : "Error"),
      startedAt: this.startedAt || t, finishedAt: t, containerID: "standin://" + this.pod.metadata.uid };
    if (signal) term.signal = signal;
    this.setStatus((s) => {
      s.phase = code === 0 ? "Succeeded" : "Failed";
      s.conditions = (s.conditions || []).map((x) => (x.type === "Ready" || x.type === "ContainersReady")
        ? { ...x, status: "False", reason: "PodCompleted", lastTransitionTime: t } : x);
      s.containerStatuses[0].ready = false;
      s.containerStatuses[0].started = false;
      s.containerStatuses[0].state = { terminated: term };
    });
    for (const l of this.listeners) l.end();
  }

  // Kubelet's activeDeadlineSeconds enforcement.
  deadline() {
    if (this.terminated) return;
    const wasRunning = this.started;
    this.terminated = true;
    this.stop();
    const t = nowIso();
    this.setStatus((s) => {
      s.phase = "Failed";
      s.reason = "DeadlineExceeded";
      s.message = "Pod was active on the node longer than the specified deadline";
      const cs = s.containerStatuses[0];
      cs.ready = false;
      cs.started = false;
      cs.state = wasRunning
        ? { terminated: { exitCode: 137, reason: "Error", startedAt: this.startedAt, finishedAt: t,
          containerID: "standin://" + this.pod.metadata.uid } }
        : cs.state;
    });
    for (const l of this.listeners) l.end();
  }

  evict(message) {
    if (this.terminated) return;
    this.terminated = true;
    this.stop();
    const t = nowIso();
    this.setStatus((s) => {
      s.phase = "Failed";
      s.reason = "Evicted";
      s.message = message;
      s.containerStatuses[0].state = { terminated: { exitCode: 137, reason: "Error",
        startedAt: this.startedAt, finishedAt: t } };
    });
    for (const l of this.listeners) l.end();
  }

  // Graceful deletion: SIGTERM, the simulated program exits 143.
  terminate() {
    if (this.terminated) return;
    if (this.started) this.exit(143, "Error");
    else { this.terminated = true; this.stop(); }
  }

  // ---------------------------------------------------------- filesystem view
  mountFor(path) {
    const c = this.container();
    const mounts = [...(c.volumeMounts || [])].sort((a, b) => b.mountPath.length - a.mountPath.length);
    for (const m of mounts) {
      if (path === m.mountPath || path.startsWith(m.mountPath.replace(/\/$/, "") + "/")) {
        const vol = (this.pod.spec.volumes || []).find((v) => v.name === m.name);
        const rel = path === m.mountPath ? "" : path.slice(m.mountPath.replace(/\/$/, "").length + 1);
        return { m, vol, rel: m.subPath ? (rel ? m.subPath + "/" + rel : m.subPath) : rel };
      }
    }
    return null;
  }

  projectedFile(vol, rel) {
    const ns = this.pod.metadata.namespace;
    const src = vol.secret ? this.store.get("Secret", ns, vol.secret.secretName)
      : vol.configMap ? this.store.get("ConfigMap", ns, vol.configMap.name) : null;
    if (!src) return null;
    const items = (vol.secret || vol.configMap).items;
    let key = rel;
    if (items) {
      const it = items.find((i) => i.path === rel);
      if (!it) return null;
      key = it.key;
    }
    if (src.data && key in src.data) return vol.secret ? Buffer.from(src.data[key], "base64") : Buffer.from(src.data[key]);
    if (src.binaryData && key in src.binaryData) return Buffer.from(src.binaryData[key], "base64");
    return null;
  }

  readFile(path) {
    const mt = this.mountFor(path);
    if (!mt) {
      if (path.startsWith(SA_TOKEN_DIR + "/") && this.pod.spec.automountServiceAccountToken !== false)
        return Buffer.from(path.endsWith("/token") ? "standin-service-account-token" : "");
      return null;
    }
    if (mt.vol.emptyDir) return (this.emptyDirs.get(mt.vol.name) || new Map()).get(mt.rel) || null;
    return this.projectedFile(mt.vol, mt.rel);
  }

  // null on success, else an errno-style message
  writeFile(path, buf) {
    const mt = this.mountFor(path);
    const sc = this.container().securityContext || {};
    if (!mt) return sc.readOnlyRootFilesystem ? "Read-only file system" : null;
    if (mt.m.readOnly || mt.vol.secret || mt.vol.configMap || mt.vol.projected || mt.vol.downwardAPI)
      return "Read-only file system";
    if (!mt.vol.emptyDir) return null;
    let files = this.emptyDirs.get(mt.vol.name);
    if (!files) { files = new Map(); this.emptyDirs.set(mt.vol.name, files); }
    files.set(mt.rel, buf);
    let total = 0;
    for (const b of files.values()) total += b.length;
    const lim = mt.vol.emptyDir.sizeLimit;
    if (lim !== undefined && total > parseQuantity(lim)) {
      this.evict(`Usage of EmptyDir volume "${mt.vol.name}" exceeds the limit "${lim}".`);
    }
    return null;
  }

  envValue(name) {
    const c = this.container();
    const e = (c.env || []).find((x) => x.name === name);
    if (!e) return undefined;
    if (e.value !== undefined) return e.value;
    const ref = e.valueFrom && (e.valueFrom.secretKeyRef || e.valueFrom.configMapKeyRef);
    if (!ref) return "";
    const secret = !!e.valueFrom.secretKeyRef;
    const obj = this.store.get(secret ? "Secret" : "ConfigMap", this.pod.metadata.namespace, ref.name);
    if (!obj || !obj.data || !(ref.key in obj.data)) return undefined;
    return secret ? Buffer.from(obj.data[ref.key], "base64").toString() : obj.data[ref.key];
  }

  // ---------------------------------------------------------- programs
  interpret(argv) {
    const steps = [];
    const out = (s, t) => steps.push({ fn: () => this.emit(s, t) });
    const fail = (msg, code) => steps.push({ fn: () => { this.emit("stderr", msg + "\n"); this.exit(code); } });
    if (argv.length === 0) { fail("standin: container has no command and the stand-in knows no image entrypoint", 127); return steps; }
    const base = argv[0].split("/").pop();
    if (base === "sh" && argv[1] === "-c") {
      const m = /^exec "\$@" ?< ?(\S+)$/.exec(argv[2] || "");
      if (!m) { fail(`standin: shell script not simulated: ${argv[2]}`, 127); return steps; }
      const stdinPath = m[1];
      const inner = this.interpret(argv.slice(4));
      steps.push({ fn: () => {
        const data = this.readFile(stdinPath);
        if (data === null) { this.emit("stderr", `sh: 1: cannot open ${stdinPath}: No such file\n`); this.exit(2); }
        else this.stdin = data;
      } });
      return steps.concat(inner);
    }
    if (base === "echo") { out("stdout", argv.slice(1).join(" ") + "\n"); return steps; }
    if (base === "true") return steps;
    if (base === "false") { steps.push({ fn: () => this.exit(1) }); return steps; }
    if (base === "sleep") { steps.push({ sleep: Math.round(parseFloat(argv[1] || "0") * 1000) }); return steps; }
    if (base !== "eai-sim") { fail(`standin: command not simulated: ${argv[0]}`, 127); return steps; }
    for (let i = 1; i < argv.length; i++) {
      const a = argv[i];
      const arg = () => { i++; return argv[i] === undefined ? "" : argv[i]; };
      switch (a) {
        case "--stdout": { const t = arg(); out("stdout", t); break; }
        case "--stderr": { const t = arg(); out("stderr", t); break; }
        case "--sleep-ms": { steps.push({ sleep: parseInt(arg(), 10) || 0 }); break; }
        case "--exit": { const n = parseInt(arg(), 10); steps.push({ fn: () => this.exit(n) }); break; }
        case "--signal": { const n = parseInt(arg(), 10); steps.push({ fn: () => this.exit(128 + n, "Error", n) }); break; }
        case "--cat": {
          const p = arg();
          steps.push({ fn: () => {
            const d = this.readFile(p);
            if (d === null) { this.emit("stderr", `cat: ${p}: No such file or directory\n`); this.exit(1); }
            else this.emit("stdout", d.toString());
          } });
          break;
        }
        case "--cat-stdin": steps.push({ fn: () => this.emit("stdout", (this.stdin || Buffer.alloc(0)).toString()) }); break;
        case "--env": {
          const n = arg();
          steps.push({ fn: () => { const v = this.envValue(n); this.emit("stdout", v === undefined ? "<unset>\n" : v + "\n"); } });
          break;
        }
        case "--write": case "--write-bytes": {
          const p = arg(); const v = arg();
          const buf = a === "--write" ? Buffer.from(v) : Buffer.alloc(Math.max(0, Math.floor(parseQuantity(v))), 0x61);
          steps.push({ fn: () => {
            const e = this.writeFile(p, buf);
            if (e) { this.emit("stderr", `write ${p}: ${e}\n`); this.exit(1); }
          } });
          break;
        }
        case "--alloc": {
          const q = arg();
          steps.push({ fn: () => {
            const lim = ((this.container().resources || {}).limits || {}).memory;
            if (lim !== undefined && parseQuantity(q) > parseQuantity(lim)) this.exit(137, "OOMKilled");
          } });
          break;
        }
        default: fail(`eai-sim: unknown option ${a}`, 2); return steps;
      }
    }
    return steps;
  }
}

function qosClass(pod) {
  let guaranteed = true, any = false;
  for (const c of pod.spec.containers || []) {
    const r = c.resources || {};
    const lim = r.limits || {}, req = r.requests || lim;
    if (Object.keys(lim).length || Object.keys(req).length) any = true;
    for (const k of ["cpu", "memory"]) {
      if (lim[k] === undefined || parseQuantity(req[k] === undefined ? lim[k] : req[k]) !== parseQuantity(lim[k])) guaranteed = false;
    }
  }
  return guaranteed ? "Guaranteed" : any ? "Burstable" : "BestEffort";
}

module.exports = { PodRun, nowIso };
