#!/usr/bin/env node
// The seed's TypeScript example (C-12 section 7), run verbatim against the live
// eaid that EAI_URL / EAI_API_KEY name.  Only the placeholders the issue allows
// are replaced: the base URL and the image (python:3.12-slim is not built here;
// EAI_CONFORMANCE_IMAGE, default python:3.11-slim, is).  The snippet imports the
// package by its name: Node resolves that to this package itself (self-reference
// through "exports"), so the file is written inside the package and run there.
import { writeFileSync, rmSync } from "node:fs";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";

const SNIPPET = `import { EnterpriseAI } from "@enterprise-ai/sdk";

const client = new EnterpriseAI({ baseUrl: "<control-plane-url>", apiKey: process.env.EAI_API_KEY });
const ex = await client.sandbox.execute({ image: "python:3.12-slim", profile: "gvisor", command: ["python", "-c", "print(1)"] });
`;

const code = SNIPPET.replace("<control-plane-url>", process.env.EAI_URL)
  .replace("python:3.12-slim", process.env.EAI_CONFORMANCE_IMAGE || "python:3.11-slim")
  + "\nconsole.log(JSON.stringify({ status: ex.status, exit_code: ex.exit_code, stdout: ex.stdout, profile: ex.profile }));\n";
const file = fileURLToPath(new URL("../test/.seed-run.mjs", import.meta.url));
writeFileSync(file, code);
try {
  const r = spawnSync(process.execPath, [file], { encoding: "utf8", timeout: 300_000 });
  let got = {};
  try { got = JSON.parse(r.stdout.trim().split("\n").pop()); } catch { /* reported below */ }
  const ok = r.status === 0 && got.status === "succeeded" && got.exit_code === 0 && got.stdout === "1\n" && got.profile === "gvisor";
  console.log(`${ok ? "PASS" : "FAIL"} seed snippet (typescript): ${JSON.stringify(got)}${ok ? "" : " " + r.stderr}`);
  process.exitCode = ok ? 0 : 1;
} finally {
  rmSync(file, { force: true });
}
