"""A real headless Chromium, driven by Selenium through Debian's chromedriver: the browser
of tests/web/ and of the bench's ``web`` rows (bench/web.py).

No browser is downloaded: Chromium and chromedriver come from Debian's packages
(``apt-get install chromium chromium-driver``, which scripts/install-system-packages.sh
does), and Selenium is told where the driver is, so its own driver manager never goes to the network.
The browser keeps a performance log, from which :meth:`Browser.requests` lists every
request a page made, to prove none left 127.0.0.1. Its profile lives in a temporary
folder and it is ended by :meth:`Browser.quit` (Selenium stops the chromedriver it
started, by its PID).
"""

from __future__ import annotations

import json
import os
import shutil
import time

CHROMIUM = os.environ.get("OPAL_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("OPAL_CHROMEDRIVER", "/usr/bin/chromedriver")


def missing() -> str | None:
    """Why no browser can be started here, or None."""
    for path in (CHROMIUM, CHROMEDRIVER):
        if not (os.path.exists(path) or shutil.which(path)):
            return (f"{path} is missing: apt-get install chromium chromium-driver "
                    "(scripts/install-system-packages.sh does)")
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is missing: pip install -e '.[test]'"
    return None


class Browser:
    """One headless Chromium for a test module."""

    def __init__(self, profile: str, *, width: int = 1280, height: int = 900) -> None:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--disable-quic", "--no-first-run", "--no-default-browser-check",
                     # Chromium's own calls home (updates, sync, safe browsing, field
                     # trials): off, so the request log holds only what the page asked for.
                     "--disable-background-networking", "--disable-component-update", "--disable-sync",
                     "--disable-features=OptimizationHints,MediaRouter,Translate",
                     "--metrics-recording-only", f"--user-data-dir={profile}", f"--window-size={width},{height}"):
            options.add_argument(flag)
        options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
        self.driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
        self.driver.set_page_load_timeout(60)
        self._log: list[dict] = []

    # ------------------------------------------------------------------ pages
    def open(self, url: str, *, ready: bool = True, timeout: float = 60) -> float | None:
        """Load ``url``; with ``ready``, the seconds from the start of the load to the page drawn."""
        self.driver.get(url)
        return self.wait_ready(timeout=timeout) if ready else None

    def go(self, hash_route: str, *, timeout: float = 60) -> float:
        """Follow an in-page link (``#/state/HEAD``) as a click would, and wait for it: the
        seconds from the link followed to the page drawn."""
        # Setting the hash the page is already on fires no hashchange: send one, as a
        # click on a link to the page one is on redraws it.
        start = self.driver.execute_script(
            "document.body.dataset.ready = '0'; const t = performance.now();"
            "if (location.hash === arguments[0]) window.dispatchEvent(new HashChangeEvent('hashchange'));"
            "else location.hash = arguments[0];"
            "return t;", hash_route)
        return self.wait_ready(timeout=timeout) - float(start) / 1000

    def wait_ready(self, *, timeout: float = 60) -> float:
        """Until the page says it has drawn (``body[data-ready=1]``): the page's own
        ``performance.now()`` at that moment, in seconds (from the navigation's start
        for a page load)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            at = self.driver.execute_script(
                "return document.body && document.body.dataset.ready === '1' ? document.body.dataset.readyMs : null")
            if at is not None:
                return float(at) / 1000
            time.sleep(0.01)
        raise AssertionError(f"page not ready after {timeout}s: {self.driver.current_url} {self.error()!r}")

    def wait_for(self, css: str, *, timeout: float = 30):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            found = self.all(css)
            if found:
                return found[0]
            time.sleep(0.02)
        raise AssertionError(f"no {css} after {timeout}s on {self.driver.current_url}")

    def error(self) -> str:
        return self.driver.execute_script(
            "const e = document.getElementById('error'); return e && !e.hidden ? e.textContent : '';") or ""

    def one(self, css: str):
        from selenium.webdriver.common.by import By

        return self.driver.find_element(By.CSS_SELECTOR, css)

    def all(self, css: str) -> list:
        from selenium.webdriver.common.by import By

        return self.driver.find_elements(By.CSS_SELECTOR, css)

    def attr(self, css: str, name: str) -> list[str]:
        """One attribute of every element matching ``css``, read in one script call."""
        return self.driver.execute_script(
            "return [...document.querySelectorAll(arguments[0])].map(e => e.getAttribute(arguments[1]));", css, name)

    def texts(self, css: str) -> list[str]:
        return self.driver.execute_script(
            "return [...document.querySelectorAll(arguments[0])].map(e => e.textContent);", css)

    def page(self) -> str:
        return self.driver.execute_script("return document.body.dataset.page")

    def screenshot(self, folder: str, name: str, *, max_height: int = 2400) -> str:
        """The whole page (not just the window, up to ``max_height`` CSS pixels) as
        ``folder/name.png``, through DevTools' capture beyond the viewport."""
        import base64

        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, f"{name}.png")
        size = self.driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
        clip = {"x": 0, "y": 0, "width": size["width"], "height": min(size["height"], max_height), "scale": 1}
        shot = self.driver.execute_cdp_cmd("Page.captureScreenshot",
                                           {"format": "png", "captureBeyondViewport": True, "clip": clip})
        with open(path, "wb") as fh:
            fh.write(base64.b64decode(shot["data"]))
        return path

    # ------------------------------------------------------------------ what it sent
    def requests(self) -> list[dict]:
        """Every request the browser sent since it started: ``{url, status}``, from the
        DevTools performance log (status None for one that got no response)."""
        for entry in self.driver.get_log("performance"):
            self._log.append(json.loads(entry["message"])["message"])
        sent: dict[str, dict] = {}
        for msg in self._log:
            params = msg.get("params", {})
            if msg.get("method") == "Network.requestWillBeSent":
                sent.setdefault(params["requestId"] + params["request"]["url"],
                                {"id": params["requestId"], "url": params["request"]["url"], "status": None})
            elif msg.get("method") == "Network.responseReceived":
                for r in sent.values():
                    if r["id"] == params["requestId"] and r["url"] == params["response"]["url"]:
                        r["status"] = params["response"]["status"]
        return list(sent.values())

    def console_errors(self) -> list[str]:
        return [e["message"] for e in self.driver.get_log("browser") if e.get("level") == "SEVERE"]

    def quit(self) -> None:
        self.driver.quit()
