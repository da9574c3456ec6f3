#!/usr/bin/env python3
"""/v1/mcp with clients nobody here wrote, against a real `eaid serve`
running real runsc sandboxes (issue 35 item 3; docs/mcp.md): the official
MCP Python SDK (PyPI `mcp`, pinned in tests/mcp/requirements.txt) and the
official TypeScript SDK (npm, tests/mcp/package.json; test_mcp_ts.mjs),
each over Streamable HTTP and over the stdio bridge (`eai mcp`), and the
MCP Inspector's CLI (tools/list, tools/call).

Each transport: list the tools; `execute` Python and read stdout `1`;
progress notifications carrying the output while a command runs; a session
(create, write a file, run code that reads it and leaves a file, read and
list files, close); a cancelled call whose execution ends `cancelled`; an
error as a tool error with the API's code in the caller's language; another
tenant cannot use the MCP session id.

Run by ctest with the venv of tests/mcp/setup.sh: test_mcp_clients.py;
exit 77 when the Python SDK is missing (the fresh chroot, which runs no
sandbox)."""
import asyncio
import json
import os
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "hostile"))
from eaid_env import BUILD, Env, check, ensure_image  # noqa: E402

try:
    import anyio
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client
except ImportError as e:  # pragma: no cover - the fresh chroot
    print("SKIP: the MCP Python SDK is not installed (%s): tests/mcp/setup.sh" % e)
    sys.exit(77)

failures = []


def ok(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def http_transport(url, key, lang="en"):
    http = create_mcp_http_client(headers={"Authorization": "Bearer " + key, "Accept-Language": lang})
    return http, streamable_http_client(url, http_client=http)


def stdio_transport(env, key):
    e = {"EAI_URL": env.url, "EAI_API_KEY": key, "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    return None, stdio_client(StdioServerParameters(command=os.path.join(BUILD, "eai"), args=["mcp"], env=e))


async def scenario(name, env, transport):
    http, t = transport
    try:
        async with Client(t) as c:
            tools = sorted(x.name for x in (await c.list_tools()).tools)
            ok(tools == sorted(["execute", "session_create", "session_exec", "session_write_file",
                                "session_read_file", "session_list_files", "session_close"]),
               "%s: tools/list %s" % (name, tools))

            r = await c.call_tool("execute", {"code": "print(1)"})
            ok(not r.is_error and r.structured_content["stdout"] == "1\n" and r.structured_content["exit_code"] == 0,
               "%s: execute print(1) -> %s" % (name, r.structured_content))
            ok(r.content[0].text == "1\n", "%s: the text content is stdout" % name)

            seen = []

            async def progress(p, total, message):
                seen.append(message or "")

            code = "import time\nfor i in range(4):\n    print('tick', i, flush=True)\n    time.sleep(0.7)\n"
            r = await c.call_tool("execute", {"code": code}, progress_callback=progress)
            ok(not r.is_error and r.structured_content["stdout"].count("tick") == 4, "%s: the long run ends" % name)
            ok(len(seen) >= 2 and "tick 0" in "".join(seen),
               "%s: progress notifications with the output as it came: %s" % (name, seen))

            r = await c.call_tool("session_create", {"image": "python:3.11-slim"})
            sid = (r.structured_content or {}).get("session_id")
            ok(not r.is_error and sid, "%s: session_create -> %s" % (name, r.structured_content))
            if sid:
                r = await c.call_tool("session_write_file", {"session_id": sid, "path": "/tmp/in.txt",
                                                             "content": "21\n"})
                ok(not r.is_error, "%s: session_write_file %s" % (name, r.content))
                r = await c.call_tool("session_exec", {"session_id": sid, "code":
                                      "n = int(open('/tmp/in.txt').read())\nopen('/tmp/out.txt', 'w').write(str(n * 2))\nprint(n * 2)"})
                ok(not r.is_error and r.structured_content["stdout"] == "42\n", "%s: session_exec reads the file: %s"
                   % (name, r.structured_content))
                r = await c.call_tool("session_read_file", {"session_id": sid, "path": "/tmp/out.txt"})
                ok(not r.is_error and r.structured_content["content"] == "42", "%s: session_read_file %s"
                   % (name, r.structured_content))
                r = await c.call_tool("session_list_files", {"session_id": sid})
                ok(not r.is_error and "out.txt" in json.dumps(r.structured_content), "%s: session_list_files" % name)
                r = await c.call_tool("session_close", {"session_id": sid})
                ok(not r.is_error, "%s: session_close" % name)
                r = await c.call_tool("session_exec", {"session_id": sid, "code": "print(1)"})
                ok(r.is_error, "%s: a closed session answers a tool error: %s" % (name, r.content[0].text))

            # cancellation: the SDK sends notifications/cancelled when the call's scope is cancelled
            t0 = time.time()
            with anyio.move_on_after(3):
                await c.call_tool("execute", {"code": "import time\nprint('long', flush=True)\ntime.sleep(60)"})
            ok(time.time() - t0 < 10, "%s: the cancelled call returned at once" % name)
            cancelled = await wait_cancelled(env)
            ok(cancelled, "%s: the cancelled call's execution ended cancelled" % name)

            r = await c.call_tool("execute", {"code": "print(1)", "limits": {"memory": "lots"}})
            ok(r.is_error and r.structured_content["error"]["code"] == "validation_failed",
               "%s: a refused request is a tool error with the API's code: %s" % (name, r.content[0].text))
    finally:
        if http is not None:
            await http.aclose()


async def wait_cancelled(env):
    deadline = time.time() + 60
    while time.time() < deadline:
        st, b = env.api("GET", "/v1/sandbox/executions?limit=5")
        items = b.get("items", b.get("data", [])) if st == 200 else []
        longs = [x for x in items if "time.sleep(60)" in json.dumps(x.get("command"))]
        if longs and longs[0]["status"] == "cancelled":
            return True
        await anyio.sleep(0.5)
    return False


async def french(env, key):
    """Accept-Language: fr on the MCP requests: the tool error in French."""
    http, t = http_transport(env.url + "/v1/mcp", key, lang="fr")
    try:
        async with Client(t) as c:
            r = await c.call_tool("execute", {"code": "print(1)", "limits": {"memory": "lots"}})
            ok(r.is_error and "La requête est invalide" in r.content[0].text, "fr: %s" % r.content[0].text)
    finally:
        await http.aclose()


async def other_tenant(env, key_a, key_b):
    """A's MCP session id used with B's key: 404, as an unknown one."""
    url = env.url + "/v1/mcp"
    hdr = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    req = urllib.request.Request(url, data=json.dumps(init).encode(), headers=dict(hdr, Authorization="Bearer " + key_a))
    with urllib.request.urlopen(req, timeout=10) as r:
        sid = r.headers["Mcp-Session-Id"]
    body = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers=dict(hdr, Authorization="Bearer " + key_b, **{"Mcp-Session-Id": sid}))
    try:
        urllib.request.urlopen(req, timeout=10)
        code = 200
    except urllib.error.HTTPError as e:
        code = e.code
    ok(code == 404, "another tenant's key with A's MCP session id: %s" % code)
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers=dict(hdr, Authorization="Bearer " + key_a, **{"Mcp-Session-Id": sid}))
    with urllib.request.urlopen(req, timeout=10) as r:
        ok(r.status == 200 and "execute" in r.read().decode(), "A's own key with its MCP session id")


def node_clients(env, key):
    """The TypeScript SDK (test_mcp_ts.mjs) and the MCP Inspector's CLI."""
    mods = os.path.join(HERE, "node_modules")
    if not os.path.isdir(os.path.join(mods, "@modelcontextprotocol", "sdk")):
        ok(False, "tests/mcp/node_modules missing: npm ci in tests/mcp (scripts/test.sh does)")
        return
    r = subprocess.run(["node", os.path.join(HERE, "test_mcp_ts.mjs"), env.url, key, os.path.join(BUILD, "eai")],
                       capture_output=True, text=True, timeout=300)
    print(r.stdout + r.stderr, flush=True)
    ok(r.returncode == 0, "the TypeScript SDK's checks (test_mcp_ts.mjs)")
    deadline = time.time() + 60
    st = None
    while time.time() < deadline and st != "cancelled":
        code, b = env.api("GET", "/v1/sandbox/executions?limit=20")
        items = b.get("items", b.get("data", [])) if code == 200 else []
        longs = [x for x in items if "ts-long" in json.dumps(x.get("command"))]
        st = longs[0]["status"] if longs else None
        time.sleep(0.5)
    ok(st == "cancelled", "the TypeScript SDK's aborted call: its executions ended cancelled (%s)" % st)
    cli = os.path.join(mods, "@modelcontextprotocol", "inspector-cli", "build", "cli.js")
    base = ["node", cli, "--cli", env.url + "/v1/mcp", "--transport", "http", "--header",
            "Authorization: Bearer " + key]
    # cwd: the CLI looks for its package.json relative to the current directory
    # (inspector-cli 1.0.3 build/index.js), so it runs from its own build directory
    r = subprocess.run(base + ["--method", "tools/list"], capture_output=True, text=True, timeout=120,
                       cwd=os.path.dirname(cli))
    ok(r.returncode == 0 and '"session_exec"' in r.stdout, "MCP Inspector CLI tools/list: %s %s"
       % (r.returncode, (r.stdout + r.stderr)[-300:]))
    r = subprocess.run(base + ["--method", "tools/call", "--tool-name", "execute", "--tool-arg", "code=print(6*7)"],
                       capture_output=True, text=True, timeout=120, cwd=os.path.dirname(cli))
    ok(r.returncode == 0 and "42" in r.stdout, "MCP Inspector CLI tools/call execute: %s %s"
       % (r.returncode, (r.stdout + r.stderr)[-300:]))


def main():
    ensure_image()
    env = Env()
    try:
        key_b = env.make_key("mcp-b")
        key = env.make_key("mcp")
        env.start(ready_path="/readyz", timeout=120)
        anyio.run(scenario, "http", env, http_transport(env.url + "/v1/mcp", key))
        anyio.run(scenario, "stdio", env, stdio_transport(env, key))
        anyio.run(french, env, key)
        anyio.run(other_tenant, env, key, key_b)
        node_clients(env, key)
    finally:
        env.stop()
    print("%d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
