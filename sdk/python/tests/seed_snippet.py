#!/usr/bin/env python3
"""The seed's Python example (C-12 section 7), run verbatim against the live eaid
that EAI_URL / EAI_API_KEY name.  Only the three placeholders the issue allows
are replaced: the base URL, the key and the image (python:3.12-slim is not
built here; EAI_CONFORMANCE_IMAGE, default python:3.11-slim, is)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SNIPPET = '''
from enterprise_ai import EnterpriseAI

client = EnterpriseAI(base_url="<control-plane-url>", api_key="eai_xxx_secret")
ex = client.sandbox.execute("python:3.12-slim", ["python", "-c", "print(1)"], profile="gvisor")
'''

code = (SNIPPET.replace("<control-plane-url>", os.environ["EAI_URL"])
        .replace("eai_xxx_secret", os.environ["EAI_API_KEY"])
        .replace("python:3.12-slim", os.environ.get("EAI_CONFORMANCE_IMAGE") or "python:3.11-slim"))
ns: dict = {}
exec(compile(code, "seed-snippet", "exec"), ns)
ex = ns["ex"]
ok = ex.status == "succeeded" and ex.exit_code == 0 and ex.stdout == "1\n" and ex.profile == "gvisor"
print("%s seed snippet (python): status %s exit %s stdout %r profile %s" % (
    "PASS" if ok else "FAIL", ex.status, ex.exit_code, ex.stdout, ex.profile))
sys.exit(0 if ok else 1)
