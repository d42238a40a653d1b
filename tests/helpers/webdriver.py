"""Just enough W3C WebDriver to drive Debian's headless Chromium through
`chromedriver` (no selenium dependency): a session, navigation, running a
script in the page, a screenshot, and Chrome DevTools commands."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import urllib.request

from tests.helpers.redis_process import free_port
from tests.helpers.stack import stop, wait_until


def chromium_binaries() -> tuple[str, str] | None:
    """(chromium, chromedriver), or None where they are not installed."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


class Browser:
    def __init__(self, browser: str, driver: str, width: int = 1100, height: int = 820) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen([driver, f"--port={self.port}"], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, start_new_session=True)
        self.base = f"http://127.0.0.1:{self.port}"
        wait_until(lambda: self._call("GET", "/status")["ready"], 30, what="chromedriver")
        args = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={width},{height}", "--hide-scrollbars"]
        caps = {"capabilities": {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": {
            "binary": browser, "args": args}}}}
        self.session = self._call("POST", "/session", caps)["sessionId"]

    def _call(self, method: str, path: str, payload: dict | None = None) -> dict:
        data = json.dumps(payload).encode() if payload is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"content-type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as r:
            return json.loads(r.read())["value"]

    def _session(self, method: str, path: str, payload: dict | None = None) -> dict:
        return self._call(method, f"/session/{self.session}{path}", payload)

    def cdp(self, cmd: str, **params: object) -> dict:
        return self._session("POST", "/goog/cdp/execute", {"cmd": cmd, "params": params})

    def get(self, url: str) -> None:
        self._session("POST", "/url", {"url": url})

    def run(self, script: str, *args: object):
        """`script` is a function body; its `return` value comes back as JSON."""
        return self._session("POST", "/execute/sync", {"script": script, "args": list(args)})

    def screenshot(self, path: str) -> None:
        with open(path, "wb") as f:
            f.write(base64.b64decode(self._session("GET", "/screenshot")))

    def close(self) -> None:
        try:
            self._call("DELETE", f"/session/{self.session}")
        finally:
            stop(self.proc)
