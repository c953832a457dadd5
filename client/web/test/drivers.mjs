// One small interface over the two engines the page is tested in, so that every job runs the same
// steps in both: Chromium through Playwright (CDP), Firefox ESR through puppeteer-core over
// WebDriver BiDi. A browser handle has open (a page, in a browser context of its own), alive and
// close; a page handle has evaluate, fill, edit, setFile, waitFor, reopen and close. `reopen` navigates
// the same tab to a page afresh (a new document, at another screen size): a new tab or context cost a
// renderer process each, about half a UI case's CPU. `edit` replaces a range of a text box's value as
// a player's edit does, with one input event: Playwright's fill of a text of N lines makes 2N input
// events in Chromium, each seeing the whole text (the page verified a hand 200 times for one edit).
// Each engine's driver is imported by its launch alone (a harness serving one engine loads one).
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
import { createHash } from "node:crypto";
import { closeSync, existsSync, openSync, realpathSync, statSync } from "node:fs";
import { cp, mkdtemp, readdir, rename, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

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
  const { chromium } = await import("playwright-core");
  const browser = await chromium.launch({ ...tied(executablePath), args: ["--no-sandbox", "--disable-dev-shm-usage"] });
  return {
    async open(url, { viewport, onRequest, onError, ...own }) {
      const colorScheme = own.colorScheme ?? launchScheme;
      const fontSize = own.fontSize ?? launchSize;
      const context = await browser.newContext({ serviceWorkers: "block", ...(colorScheme ? { colorScheme } : {}) });
      let at = url; // the page's own file, let through
      await context.route("**/*", (route) => {
        const u = route.request().url();
        if (u === at || u.startsWith("data:")) return route.continue();
        onRequest(u);
        return route.abort("blockedbyclient");
      });
      const page = await context.newPage();
      const plain = page.viewportSize(); // the context's own, for a reopen without a viewport
      if (viewport) await page.setViewportSize(viewport);
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
      const handle = {
        evaluate: (fn, arg) => page.evaluate(fn, arg),
        fill: (selector, value) => page.fill(selector, value),
        async edit(selector, from, to, text) {
          await page.locator(selector).evaluate((el, [a, b]) => (el.focus(), el.setSelectionRange(a, b)), [from, to]);
          await (text ? page.keyboard.insertText(text) : page.keyboard.press("Delete"));
        },
        setFile: (selector, path) => page.setInputFiles(selector, path),
        waitFor: (fn, arg) => page.waitForFunction(fn, arg),
        async reopen(next, { viewport } = {}) {
          if (viewport ?? plain) await page.setViewportSize(viewport ?? plain);
          at = next;
          await page.goto(next);
          return handle;
        },
        close: () => context.close(),
      };
      return handle;
    },
    alive: () => browser.isConnected(),
    close: () => browser.close(),
  };
}

// What a Firefox builds at the first start of a profile and reuses at the next: its compiled scripts
// and its built-in add-ons' registry, about 1.5 s of a launch's 4 s CPU. One Firefox a machine (per
// binary and build: the first to take the lock) starts once with an empty profile to make them; every
// launch then gets a new profile holding a copy of these files alone (no prefs, no storage), and a
// launch that finds none yet starts cold. Firefox checks compatibility.ini and rebuilds its caches
// where they are another build's.
const WARM = ["startupCache", "compatibility.ini", "addonStartup.json.lz4", "extensions.json", "extension-preferences.json"];

async function firefoxProfile(launchFirefoxWith, executablePath) {
  const real = realpathSync(executablePath);
  const { size, mtimeMs } = statSync(real);
  const key = createHash("sha256").update(`${real}\0${size}\0${mtimeMs}`).digest("hex").slice(0, 16);
  const template = join(tmpdir(), `fairdeck-firefox-warm-${key}`);
  if (!existsSync(template)) {
    const lock = `${template}.lock`;
    // A lock left by a process killed while it made the files is taken over after two minutes.
    if (existsSync(lock) && Date.now() - statSync(lock).mtimeMs > 120000) await rm(lock, { force: true });
    try {
      closeSync(openSync(lock, "wx")); // the first launch to get here makes it
    } catch {
      return undefined; // another is making it: this one starts cold
    }
    const part = await mkdtemp(`${template}.part-`);
    try {
      await (await launchFirefoxWith(part)).close();
      for (const name of await readdir(part)) if (!WARM.includes(name)) await rm(join(part, name), { recursive: true, force: true });
      await rename(part, template);
    } finally {
      await rm(part, { recursive: true, force: true });
      await rm(lock, { force: true });
    }
  }
  const profile = await mkdtemp(join(tmpdir(), "fairdeck-firefox-"));
  for (const name of WARM) await cp(join(template, name), join(profile, name), { recursive: true }).catch(() => {});
  return profile;
}

async function launchFirefox(executablePath, colorScheme = DEFAULT_SCHEME, fontSize) {
  const { default: puppeteer } = await import("puppeteer-core");
  const launchWith = (userDataDir) =>
    puppeteer.launch({
      browser: "firefox",
      protocol: "webDriverBiDi",
      ...tied(executablePath),
      headless: true,
      ...(userDataDir ? { userDataDir } : {}),
      // Firefox's own switch for what pages see of the system's theme: 0 dark, 1 light.
      extraPrefsFirefox: {
        "layout.css.prefers-color-scheme.content-override": colorScheme === "dark" ? 0 : 1,
        ...(fontSize ? { "font.size.variable.x-western": fontSize, "font.size.monospace.x-western": Math.round((fontSize * 13) / 16) } : {}),
      },
    });
  const profile = await firefoxProfile(launchWith, executablePath).catch(() => undefined);
  let browser;
  try {
    browser = await launchWith(profile);
  } catch (e) {
    if (profile) await rm(profile, { recursive: true, force: true });
    throw e;
  }
  // The profile goes with the browser, however it ends (closed, or died).
  if (profile) browser.once("disconnected", () => rm(profile, { recursive: true, force: true }).catch(() => {}));
  return {
    async open(url, { viewport, onRequest, onError }) {
      const context = await browser.createBrowserContext();
      const page = await context.newPage();
      const plain = page.viewport(); // puppeteer's default, for a reopen without a viewport
      if (viewport) await page.setViewport(viewport);
      let at = url; // the page's own file, let through
      await page.setRequestInterception(true);
      page.on("request", (request) => {
        const u = request.url();
        if (u === at || u.startsWith("data:")) return request.continue();
        onRequest(u);
        return request.abort("blockedbyclient");
      });
      page.on("pageerror", (e) => onError(String(e)));
      page.on("console", (m) => {
        if (m.type() === "error") onError(`console: ${m.text()}`);
      });
      await page.goto(url);
      const handle = {
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
        // As its fill, on the range: the value set, then one input event.
        edit: (selector, from, to, text) =>
          page.$eval(
            selector,
            (el, a, b, t) => {
              el.focus();
              el.value = el.value.slice(0, a) + t + el.value.slice(b);
              el.dispatchEvent(new Event("input", { bubbles: true }));
            },
            from,
            to,
            text,
          ),
        setFile: async (selector, path) => {
          const input = await page.$(selector);
          await input.uploadFile(path);
        },
        waitFor: (fn, arg) => page.waitForFunction(fn, {}, arg),
        async reopen(next, { viewport } = {}) {
          if (viewport ?? plain) await page.setViewport(viewport ?? plain);
          at = next;
          await page.goto(next);
          return handle;
        },
        close: () => context.close(),
      };
      return handle;
    },
    alive: () => browser.connected,
    async close() {
      await browser.close();
      if (profile) await rm(profile, { recursive: true, force: true });
    },
  };
}
