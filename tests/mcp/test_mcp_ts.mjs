// /v1/mcp with the official MCP TypeScript SDK (@modelcontextprotocol/sdk,
// pinned in tests/mcp/package.json), over Streamable HTTP and over the stdio
// bridge (`eai mcp`); run by tests/mcp/test_mcp_clients.py against its eaid:
//   node test_mcp_ts.mjs <eaid URL> <API key> <path of eai>
// Prints one line per check ("ok   ..." / "FAIL ..."), exits 1 on a failure.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [url, key, eai] = process.argv.slice(2);
let failures = 0;
const ok = (cond, what) => {
  console.log((cond ? "ok   " : "FAIL ") + what);
  if (!cond) failures++;
};

async function scenario(name, transport) {
  const c = new Client({ name: "eai-tests", version: "1.0.0" });
  await c.connect(transport);
  const tools = (await c.listTools()).tools.map((t) => t.name).sort();
  ok(tools.length === 7 && tools.includes("execute") && tools.includes("session_exec"), `${name}: tools/list ${tools}`);

  let r = await c.callTool({ name: "execute", arguments: { code: "print(1)" } });
  ok(!r.isError && r.structuredContent.stdout === "1\n", `${name}: execute print(1) -> ${JSON.stringify(r.structuredContent)}`);

  const seen = [];
  r = await c.callTool(
    { name: "execute", arguments: { code: "import time\nfor i in range(3):\n    print('tick', i, flush=True)\n    time.sleep(0.7)\n" } },
    undefined,
    { onprogress: (p) => seen.push(p.message || "") },
  );
  ok(!r.isError && seen.length >= 1 && seen.join("").includes("tick 0"), `${name}: progress ${JSON.stringify(seen)}`);

  r = await c.callTool({ name: "session_create", arguments: { image: "python:3.11-slim" } });
  const sid = r.structuredContent && r.structuredContent.session_id;
  ok(!r.isError && sid, `${name}: session_create`);
  r = await c.callTool({ name: "session_write_file", arguments: { session_id: sid, path: "/tmp/a.txt", content: "5" } });
  ok(!r.isError, `${name}: session_write_file`);
  r = await c.callTool({ name: "session_exec", arguments: { session_id: sid, code: "print(int(open('/tmp/a.txt').read()) + 1)" } });
  ok(!r.isError && r.structuredContent.stdout === "6\n", `${name}: session_exec -> ${JSON.stringify(r.structuredContent)}`);
  r = await c.callTool({ name: "session_close", arguments: { session_id: sid } });
  ok(!r.isError, `${name}: session_close`);

  // cancellation: aborting the request sends notifications/cancelled
  const ac = new AbortController();
  const t0 = Date.now();
  setTimeout(() => ac.abort("enough"), 2500);
  let aborted = false;
  try {
    await c.callTool({ name: "execute", arguments: { code: "import time\ntime.sleep(60)\nprint('ts-long')" } }, undefined, { signal: ac.signal });
  } catch (e) {
    aborted = true;
  }
  ok(aborted && Date.now() - t0 < 10000, `${name}: the aborted call returned at once`);
  await c.close();
}

try {
  await scenario(
    "ts-http",
    new StreamableHTTPClientTransport(new URL(url + "/v1/mcp"), { requestInit: { headers: { Authorization: "Bearer " + key } } }),
  );
  await scenario("ts-stdio", new StdioClientTransport({ command: eai, args: ["mcp"], env: { EAI_URL: url, EAI_API_KEY: key, PATH: process.env.PATH } }));
} catch (e) {
  ok(false, "exception: " + (e && e.stack ? e.stack : e));
}
console.log(`${failures} failure(s)`);
process.exit(failures ? 1 : 0);
