/**
 * Checking the signature of a completion callback (docs/executions.md "Completion callbacks"):
 * `Eai-Signature: t=<unix seconds>,v1=<hex>`, `<hex>` = HMAC-SHA-256(secret, "<t>.<body>")
 * over the exact body bytes received. Uses WebCrypto (global `crypto`, or `node:crypto`'s).
 */
export const SIGNATURE_HEADER = "Eai-Signature";
export const EVENT_ID_HEADER = "Eai-Event-Id";

type Subtle = SubtleCrypto;

async function subtle(): Promise<Subtle> {
  const g = (globalThis as { crypto?: { subtle?: Subtle } }).crypto;
  if (g?.subtle) return g.subtle;
  const m = (await import("node:crypto" as string)) as { webcrypto?: { subtle?: Subtle } };
  if (!m.webcrypto?.subtle) throw new Error("no WebCrypto available");
  return m.webcrypto.subtle;
}

const enc = new TextEncoder();
const bytes = (v: string | Uint8Array): Uint8Array => (typeof v === "string" ? enc.encode(v) : v);

async function hmacHex(secret: string | Uint8Array, msg: Uint8Array): Promise<string> {
  const s = await subtle();
  const key = await s.importKey("raw", bytes(secret) as BufferSource, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const mac = new Uint8Array(await s.sign("HMAC", key, msg as BufferSource));
  return Array.from(mac, (x) => x.toString(16).padStart(2, "0")).join("");
}

/** The header value eaid sends for `body` at `timestamp` (for tests and tools). */
export async function sign(secret: string | Uint8Array, timestamp: number, body: string | Uint8Array): Promise<string> {
  const t = Math.trunc(timestamp);
  const b = bytes(body);
  const pre = enc.encode(`${t}.`);
  const msg = new Uint8Array(pre.length + b.length);
  msg.set(pre);
  msg.set(b, pre.length);
  return `t=${t},v1=${await hmacHex(secret, msg)}`;
}

function ctEqual(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let d = 0;
  for (let i = 0; i < a.length; i++) d |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return d === 0;
}

/**
 * True when `header` (the `Eai-Signature` value) signs `body` (the exact bytes received)
 * with `secret` and its `t` is within `toleranceS` seconds (default 300; 0 turns the check
 * off) of `nowS` (default: the clock). Constant-time comparison; a malformed header is
 * false, never an exception. Keep the accepted `Eai-Event-Id`s: a callback may come twice.
 */
export async function verifySignature(secret: string | Uint8Array, header: string | null | undefined,
  body: string | Uint8Array, options: { toleranceS?: number; nowS?: number } = {}): Promise<boolean> {
  if (!header || typeof header !== "string") return false;
  let t: number | undefined;
  const sigs: string[] = [];
  for (const part of header.split(",")) {
    const i = part.indexOf("=");
    if (i < 0) continue;
    const k = part.slice(0, i).trim();
    const v = part.slice(i + 1).trim();
    if (k === "t") {
      if (!/^\d{1,15}$/.test(v)) return false;
      t = Number(v);
    } else if (k === "v1") sigs.push(v.toLowerCase());
  }
  if (t === undefined || !sigs.length) return false;
  const tol = options.toleranceS ?? 300;
  const now = options.nowS ?? Date.now() / 1000;
  if (tol > 0 && Math.abs(now - t) > tol) return false;
  const want = (await sign(secret, t, body)).split("v1=")[1];
  let ok = false;
  for (const s of sigs) ok = ctEqual(want, s) || ok;
  return ok;
}
