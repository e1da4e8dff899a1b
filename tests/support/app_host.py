"""A host for the MCP server's views, as the ext-apps specification (2026-01-26) says a web
host loads one: the host page (its own origin) runs the SDK's ``AppBridge`` (from the npm
package in ``.tools/extapps``), and renders the view's HTML through a sandbox proxy on another
origin, which puts it in an inner frame sandboxed to scripts alone under the CSP built from
the resource's ``_meta.ui.csp``; JSON-RPC over ``postMessage`` all the way.

The host is connected to the real server through the MCP SDK's own client, with the
connection's key: the host calls the tool as a model would, reads the resource its
``_meta.ui.resourceUri`` names, hands the view the tool's input and result, and relays the
view's ``tools/call`` over that same client (asking its user first for a destructive tool,
as hosts do). The pages are served by the browser context's routes; every other request is
recorded and refused.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp.client import Client
from mcp.types import TextResourceContents
from playwright.sync_api import (
    BrowserContext,
    ConsoleMessage,
    Frame,
    FrameLocator,
    Page,
    Route,
)

from tests.support.mcp import McpServer

ROOT = Path(__file__).resolve().parents[2]
MODULES = ROOT / ".tools/extapps/node_modules"
BRIDGE = MODULES / "@modelcontextprotocol/ext-apps/dist/src/app-bridge.js"
HOST = "http://host.test"
SANDBOX = "http://sandbox.test"
# The bridge's imports, resolved in the browser from the package's own dependencies.
IMPORTS = {
    "@modelcontextprotocol/ext-apps/app-bridge": str(BRIDGE.relative_to(MODULES)),
    "@modelcontextprotocol/client": "@modelcontextprotocol/client/dist/index.mjs",
    "@modelcontextprotocol/client/_shims": "@modelcontextprotocol/client/dist/shimsBrowser.mjs",
    "@modelcontextprotocol/core": "@modelcontextprotocol/core/dist/index.mjs",
    "@modelcontextprotocol/core/internal": "@modelcontextprotocol/core/dist/internal.mjs",
    "zod/v4": "zod/v4/index.js",
    "eventsource": "eventsource/dist/index.js",
    "eventsource-parser": "eventsource-parser/dist/index.js",
    "eventsource-parser/stream": "eventsource-parser/dist/stream.js",
    "pkce-challenge": "pkce-challenge/dist/index.browser.js",
}

HOST_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Test host</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body { margin: 0; font: 15px system-ui; } #chat { padding: 8px; }
body[data-theme="dark"] { background: #111; color: #eee; }
iframe { display: block; width: 100%; border: 1px solid #bbb; border-radius: 6px; height: 80px; }
</style>
<script type="importmap">IMPORT_MAP</script></head>
<body><main id="chat"><p>An answer from the assistant, with its view below.</p></main>
<script type="module">
import { AppBridge, PostMessageTransport } from "@modelcontextprotocol/ext-apps/app-bridge";
window.host = { sizes: [], messages: [], calls: [] };
window.startApp = async (spec) => {
  document.body.dataset.theme = spec.theme;
  const before = document.getElementById("app");
  if (before) { await window.host.bridge.teardownResource({}); before.remove(); }
  const frame = document.createElement("iframe");
  frame.id = "app";
  frame.title = "Memory view";
  frame.setAttribute("sandbox", "allow-scripts allow-same-origin");
  document.getElementById("chat").append(frame);
  const bridge = new AppBridge(null, { name: "test-host", version: "1.0.0" },
    { serverTools: {}, message: { text: {} }, sandbox: { csp: spec.csp } },
    { hostContext: { theme: spec.theme, displayMode: "inline", availableDisplayModes: ["inline"],
      containerDimensions: { maxHeight: 500, width: frame.clientWidth }, platform: "web",
      locale: "en-GB", toolInfo: { tool: spec.tool } } });
  bridge.oncalltool = async (params) => {
    window.host.calls.push(params);
    const tool = spec.tools[params.name];
    // the view calls only tools the app may see (ext-apps: visibility)
    if (!tool || !(tool.visibility || ["model", "app"]).includes("app")) {
      throw new Error(`the view may not call ${params.name}`);
    }
    if (tool.destructive && !(await window.hostConfirm(params.name, params.arguments || {}))) {
      return { isError: true, content: [{ type: "text", text: "the user declined" }] };
    }
    return await window.hostCall(params.name, params.arguments || {});
  };
  bridge.onmessage = async (params) => { window.host.messages.push(params); return {}; };
  bridge.onsizechange = ({ height }) => {
    window.host.sizes.push(height);
    if (height) frame.style.height = `${height}px`;
  };
  bridge.onsandboxready = () => bridge.sendSandboxResourceReady({ html: spec.html, csp: spec.csp });
  const initialized = new Promise((resolve) => { bridge.oninitialized = resolve; });
  await bridge.connect(new PostMessageTransport(frame.contentWindow, frame.contentWindow));
  frame.src = "SANDBOX/sandbox.html";
  await initialized;
  await bridge.sendToolInput({ arguments: spec.args });
  await bridge.sendToolResult(spec.result);
  window.host.bridge = bridge;
};
window.hostReady = true;
</script></body></html>
"""

# The sandbox proxy (ext-apps "Sandbox proxy"): another origin than the host's; it loads the
# view into an inner frame without allow-same-origin, under the CSP of its metadata, and
# relays every message both ways.
SANDBOX_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sandbox</title>
<style>html, body { margin: 0; height: 100%; } iframe { border: 0; width: 100%; height: 100%;
display: block; }</style></head><body><script>
const host = window.parent;
let inner = null;
const list = (domains, none) => (domains && domains.length ? domains.join(" ") : none);
function policy(csp) {
  csp = csp || {};
  const from = list(csp.resourceDomains, "");
  return [
    "default-src 'none'",
    `script-src 'unsafe-inline' ${from}`.trim(),
    `style-src 'unsafe-inline' ${from}`.trim(),
    `img-src data: ${from}`.trim(),
    `font-src data: ${from}`.trim(),
    `connect-src ${list(csp.connectDomains, "'none'")}`,
    `frame-src ${list(csp.frameDomains, "'none'")}`,
    "base-uri 'none'",
    "form-action 'none'",
  ].join("; ");
}
window.addEventListener("message", (event) => {
  const message = event.data;
  if (event.source === host) {
    if (message && message.method === "ui/notifications/sandbox-resource-ready") {
      const { html, csp, sandbox } = message.params;
      const meta = `<meta http-equiv="Content-Security-Policy" content="${policy(csp)}">`;
      inner = document.createElement("iframe");
      inner.title = "Memory view";
      inner.setAttribute("sandbox", sandbox || "allow-scripts");
      inner.srcdoc = html.replace(/<head>/i, `<head>${meta}`);
      document.body.append(inner);
    } else if (inner) {
      inner.contentWindow.postMessage(message, "*");
    }
  } else if (inner && event.source === inner.contentWindow) {
    host.postMessage(message, "HOST");
  }
});
host.postMessage({ jsonrpc: "2.0", method: "ui/notifications/sandbox-proxy-ready", params: {} },
  "HOST");
</script></body></html>
"""


@dataclass
class AppHost:
    """The host page with one view in it, and the MCP connection behind it."""

    page: Page
    client: Client
    portal: BlockingPortal
    tools: dict[str, dict[str, Any]]
    # how the host's user answers a destructive call: (tool, arguments) -> allowed
    approve: Callable[[str, dict[str, Any]], bool] = lambda _tool, _args: False
    asked: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """A tool call over the host's connection (the SDK's client), as the host sends it."""
        result = self.portal.call(lambda: self.client.call_tool(name, arguments))
        dumped: dict[str, Any] = result.model_dump(mode="json", by_alias=True, exclude_none=True)
        return dumped

    def show(self, name: str, arguments: dict[str, Any], theme: str = "light") -> FrameLocator:
        """Call ``name`` as the model would and render its view with the result; the view's
        frame once it has drawn."""
        tool = self.tools[name]
        uri = tool["_meta"]["ui"]["resourceUri"]
        read = self.portal.call(lambda: self.client.read_resource(uri))
        [content] = read.contents
        assert isinstance(content, TextResourceContents)
        assert content.mime_type == "text/html;profile=mcp-app"
        csp = (content.meta or {}).get("ui", {}).get("csp", {})
        result = self.call(name, arguments)
        self.page.evaluate(
            "spec => window.startApp(spec)",
            {
                "tool": tool,
                "tools": {
                    n: {
                        "destructive": t["annotations"]["destructiveHint"],
                        "visibility": t["_meta"].get("ui", {}).get("visibility"),
                    }
                    for n, t in self.tools.items()
                },
                "html": content.text,
                "csp": csp,
                "args": arguments,
                "result": result,
                "theme": theme,
            },
        )
        view = self.page.frame_locator("#app").frame_locator("iframe")
        view.locator("main:not([aria-busy])").wait_for()
        return view

    def frame(self) -> Frame:
        """The view's own frame (inside the sandbox proxy's)."""
        for frame in self.page.frames:
            parent = frame.parent_frame
            if parent is not None and parent.url.startswith(SANDBOX):
                return frame
        raise AssertionError("the view's frame is not in the page")

    def state(self) -> dict[str, Any]:
        found: dict[str, Any] = self.page.evaluate(
            "() => ({sizes: host.sizes, messages: host.messages, calls: host.calls})"
        )
        return found


def _serve(refused: list[str]) -> Callable[[Route], None]:
    imports = {name: f"{HOST}/modules/{path}" for name, path in IMPORTS.items()}
    host_page = HOST_PAGE.replace("IMPORT_MAP", json.dumps({"imports": imports}))
    host_page = host_page.replace("SANDBOX", SANDBOX)
    sandbox_page = SANDBOX_PAGE.replace('"HOST"', json.dumps(HOST))

    def serve(route: Route) -> None:
        url = route.request.url
        if url in (f"{HOST}/", HOST):
            route.fulfill(body=host_page, content_type="text/html")
        elif url == f"{SANDBOX}/sandbox.html":
            route.fulfill(body=sandbox_page, content_type="text/html")
        elif url.startswith(f"{HOST}/modules/"):
            path = (MODULES / url.removeprefix(f"{HOST}/modules/")).resolve()
            assert path.is_relative_to(MODULES.resolve()) and path.is_file(), url
            route.fulfill(body=path.read_bytes(), content_type="text/javascript")
        else:
            refused.append(url)
            route.abort()

    return serve


@contextmanager
def app_host(
    context: BrowserContext, server: McpServer, key: str | None = None
) -> Iterator[AppHost]:
    """The host page in ``context``, connected to ``server`` with ``key`` (the server's own
    when None); after the block, asserts nothing was requested from anywhere else."""
    refused: list[str] = []
    context.route("**/*", _serve(refused))
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(str(error)))

    # a CSP violation, or the bridge's warning of a protocol step out of order; not Chromium's
    # note on the proxy's allow-scripts with allow-same-origin, which escapes nothing here: the
    # proxy is of another origin than the host (ext-apps "Sandbox proxy")
    def console(message: ConsoleMessage) -> None:
        if message.type in ("error", "warning") and "can escape its sandboxing" not in message.text:
            problems.append(f"{message.type}: {message.text}")

    page.on("console", console)
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(server.client(key)) as client,
    ):
        listed = portal.call(client.list_tools)
        tools = {
            t["name"]: t
            for t in listed.model_dump(mode="json", by_alias=True, exclude_none=True)["tools"]
        }
        host = AppHost(page, client, portal, tools)

        def confirm(name: str, arguments: dict[str, Any]) -> bool:
            host.asked.append((name, arguments))
            return host.approve(name, arguments)

        page.expose_function("hostConfirm", confirm)
        page.expose_function("hostCall", host.call)
        page.goto(f"{HOST}/")
        page.wait_for_function("window.hostReady === true")
        yield host
    page.close()
    assert refused == [], f"requests outside the host and its sandbox: {refused}"
    assert problems == [], problems
