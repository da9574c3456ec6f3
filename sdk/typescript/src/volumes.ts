/**
 * Volumes (docs/volumes.md): disks of the tenant's, kept between executions and
 * sessions on the node that made them.
 *
 *   const v = await client.volumes.create("notes", "64Mi");
 *   await client.sandbox.execute({ image: "python:3.11-slim", profile: "gvisor-small",
 *     command: ["sh", "-c", "echo kept > /mnt/notes/a.txt"], volumes: [{ name: "notes", path: "/mnt/notes" }] });
 *   await client.volumes.files("notes").read("a.txt");   // the bytes of "kept\n"
 *   await client.volumes.delete("notes");
 */
import type { Transport } from "./client.js";
import { q } from "./client.js";
import { SessionFiles } from "./sessions.js";
import type { VolumeInfo } from "./types.js";

type Json = Record<string, unknown>;

function toVolume(raw: Json): VolumeInfo {
  return { ...raw, id: String(raw.id ?? ""), status: String(raw.status ?? "") } as VolumeInfo;
}

/** `client.volumes`; a `ref` is a volume's id (`vol_...`) or its name. */
export class Volumes {
  readonly #t: Transport;
  constructor(t: Transport) {
    this.#t = t;
  }

  /** POST a volume of `size` bytes (or a quantity, `"512Mi"`); resolves once it is formatted and mounted
   * on the node.  Not retried after a lost answer: a create that landed answers `409 conflict` the second time. */
  async create(name: string, size: number | string, options: { timeoutMs?: number } = {}): Promise<VolumeInfo> {
    return toVolume(await this.#t.json("POST", "/v1/volumes",
      { json: { name, size_bytes: size }, idempotent: false, timeoutMs: options.timeoutMs ?? 120_000 }));
  }

  async list(): Promise<VolumeInfo[]> {
    const r = await this.#t.json("GET", "/v1/volumes");
    return Array.isArray(r.items) ? (r.items as Json[]).map(toVolume) : [];
  }

  /** The volume with its `used_bytes` and `free_bytes`. */
  async get(ref: string): Promise<VolumeInfo> {
    return toVolume(await this.#t.json("GET", `/v1/volumes/${q(ref)}`));
  }

  /** `{id, status: "deleted", usage}`; a ConflictError (`volume_in_use`) while a sandbox or a file call holds it. */
  async delete(ref: string): Promise<Json> {
    return this.#t.json("DELETE", `/v1/volumes/${q(ref)}`, { timeoutMs: Math.max(this.#t.timeoutMs, 60_000) });
  }

  /** The volume's files: `write`, `read`, `list`, `delete` as a session's (paths relative to its root). */
  files(ref: string): SessionFiles {
    return new SessionFiles(this.#t, ref, `/v1/volumes/${q(ref)}`);
  }
}
