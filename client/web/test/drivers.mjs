// One small interface over the two engines the page is tested in, so that every job runs the same
// steps in both: Chromium through Playwright (CDP), Firefox ESR through puppeteer-core over
// WebDriver BiDi. A browser handle has open (a page, in a browser context of its own), alive and
// close; a page handle has evaluate, fill, setFile, waitFor, renew (a new load of its page, at a
// viewport: the one it opened with where none is given) and close.
//
// `onRequest(url)` is told of every request the page makes but its own file, and each one is
// refused. (Firefox reports no event for a file:// page itself; Chromium does, and it is let through.)
// A data: URL is no request to anywhere (its bytes are in the URL) and is not reported: Firefox
// loads a font of its own that way when it leaves a page.
//
// Browsers die with the harness, and the harness with the test process that started it: puppeteer
// and Playwright start a browser in a process group of its own and kill it from the harness's exit
// handlers, which a SIGKILL skips (Firefox, reached over a port, then ran on for as long as the
// machine did; Chromium ends when its pipe closes). So every browser starts through tied.sh (the
// kernel kills it when the harness ends), and `endWithParent` ends a serving harness when its stdin
// ends or its parent is gone, even with a job in flight.
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import puppeteer from "puppeteer-core";

const TIED = fileURLToPath(new URL("./tied.sh", import.meta.url));
// What a driver launches for `executablePath`: tied.sh, which runs it.
const tied = (executablePath) => ({ executablePath: TIED, env: { ...process.env, FAIRDECK_TIED_BROWSER: executablePath } });

// Close the browsers (`closeAll`) and exit when this process's stdin ends or its parent is gone
// (it was re-parented: a child the parent forked may still hold the pipe open). A close that takes
// over `graceMs` is cut short by the exit, whose handlers kill the browsers.
export function endWithParent(closeAll, graceMs = 5000) {
  const parent = process.ppid;
  let ending = null;
  const end = () => {
    ending ??= Promise.race([closeAll().catch(() => {}), new Promise((done) => setTimeout(done, graceMs))]).then(() =>
      process.exit(0),
    );
  };
  process.stdin.on("end", end);
  setInterval(() => process.ppid !== parent && end(), 250).unref();
}

// `colorScheme` ("light" or "dark", or left out for the engine's default) is what the page's
// prefers-color-scheme reports, as a player's system setting would make it; `fontSize` (CSS px)
// is the player's default text size, the browser's own setting (16 when left out). Firefox takes
// both at launch only; Chromium takes them for each page as well (open's own colorScheme and
// fontSize, over the launch's), so one Chromium serves every scheme and size.
export const PER_PAGE = { chromium: ["colorScheme", "fontSize"], firefox: [] };
// The color scheme a page gets when none is named: Playwright's default, and what Firefox is
// launched with unless told "dark". A job that names it runs in the plain browser (one Firefox
// launch less a run).
export const DEFAULT_SCHEME = "light";

export async function launch(engine, executablePath, { colorScheme, fontSize } = {}) {
  if (engine === "chromium") return launchChromium(executablePath, colorScheme, fontSize);
  if (engine === "firefox") return launchFirefox(executablePath, colorScheme, fontSize);
  throw new Error(`unknown engine ${engine}`);
}

async function launchChromium(executablePath, launchScheme, launchSize) {
  const browser = await chromium.launch({ ...tied(executablePath), args: ["--no-sandbox", "--disable-dev-shm-usage"] });
  return {
    async open(url, { viewport, onRequest, onError, ...own }) {
      const colorScheme = own.colorScheme ?? launchScheme;
      const fontSize = own.fontSize ?? launchSize;
      const context = await browser.newContext({
        serviceWorkers: "block",
        ...(viewport ? { viewport } : {}),
        ...(colorScheme ? { colorScheme } : {}),
      });
      await context.route("**/*", (route) => {
        const u = route.request().url();
        if (u === url || u.startsWith("data:")) return route.continue();
        onRequest(u);
        return route.abort("blockedbyclient");
      });
      const page = await context.newPage();
      if (fontSize) {
        const cdp = await context.newCDPSession(page);
        await cdp.send("Page.enable");
        await cdp.send("Page.setFontSizes", { fontSizes: { standard: fontSize, fixed: Math.round((fontSize * 13) / 16) } });
      }
      page.on("pageerror", (e) => onError(String(e)));
      page.on("console", (m) => {
        if (m.type() === "error") onError(`console: ${m.text()}`);
      });
      await page.goto(url);
      const firstViewport = page.viewportSize();
      return {
        renew: async (size) => {
          await page.setViewportSize(size ?? firstViewport);
          await page.goto("about:blank");
          await page.goto(url);
        },
        evaluate: (fn, arg) => page.evaluate(fn, arg),
        fill: (selector, value) => page.fill(selector, value),
        setFile: (selector, path) => page.setInputFiles(selector, path),
        waitFor: (fn, arg) => page.waitForFunction(fn, arg),
        close: () => context.close(),
      };
    },
    alive: () => browser.isConnected(),
    close: () => browser.close(),
  };
}

async function launchFirefox(executablePath, colorScheme = DEFAULT_SCHEME, fontSize) {
  const browser = await puppeteer.launch({
    browser: "firefox",
    protocol: "webDriverBiDi",
    ...tied(executablePath),
    headless: true,
    // Firefox's own switch for what pages see of the system's theme: 0 dark, 1 light.
    extraPrefsFirefox: {
      "layout.css.prefers-color-scheme.content-override": colorScheme === "dark" ? 0 : 1,
      ...(fontSize ? { "font.size.variable.x-western": fontSize, "font.size.monospace.x-western": Math.round((fontSize * 13) / 16) } : {}),
    },
  });
  return {
    async open(url, { viewport, onRequest, onError }) {
      const context = await browser.createBrowserContext();
      const page = await context.newPage();
      if (viewport) await page.setViewport(viewport);
      await page.setRequestInterception(true);
      page.on("request", (request) => {
        const u = request.url();
        if (u === url || u.startsWith("data:")) return request.continue();
        onRequest(u);
        return request.abort("blockedbyclient");
      });
      page.on("pageerror", (e) => onError(String(e)));
      page.on("console", (m) => {
        if (m.type() === "error") onError(`console: ${m.text()}`);
      });
      await page.goto(url);
      const firstViewport = page.viewport();
      return {
        renew: async (size) => {
          await page.setViewport(size ?? firstViewport);
          await page.goto("about:blank");
          await page.goto(url);
        },
        evaluate: (fn, arg) => page.evaluate(fn, arg),
        // As Playwright's fill: the value set, then one input event, as a paste makes.
        fill: (selector, value) =>
          page.$eval(
            selector,
            (el, v) => {
              el.focus();
              el.value = v;
              el.dispatchEvent(new Event("input", { bubbles: true }));
            },
            value,
          ),
        setFile: async (selector, path) => {
          const input = await page.$(selector);
          await input.uploadFile(path);
        },
        waitFor: (fn, arg) => page.waitForFunction(fn, {}, arg),
        close: () => context.close(),
      };
    },
    alive: () => browser.connected,
    close: () => browser.close(),
  };
}
