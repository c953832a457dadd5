// Build the verifier page: bundle src/page.js (and @noble/hashes, @noble/curves, @noble/ciphers) into one script
// inside src/page.html, and write ../fairdeck/web/verifier.html, the copy the Python package ships.
//
//   node build.mjs            write it
//   node build.mjs --check    exit 1 when the committed copy differs from a fresh build
//   node build.mjs --out F    write it to F instead
import { build } from "esbuild";
import { readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const target = join(here, "..", "fairdeck", "web", "verifier.html");
const args = process.argv.slice(2);
// Nothing but the three forms above: a mistyped `--chek` wrote over the committed page, and
// `--out` without a file ended in a TypeError stack trace.
const known = args.length === 0 || (args.length === 1 && args[0] === "--check") || (args.length === 2 && args[0] === "--out" && args[1]);
if (!known) {
  console.error(`build.mjs: unexpected arguments ${JSON.stringify(args)}: give none (write), --check, or --out FILE`);
  process.exit(2);
}

const lock = JSON.parse(readFileSync(join(here, "package-lock.json"), "utf8"));
const versions = ["@noble/hashes", "@noble/curves", "@noble/ciphers", "esbuild"]
  .map((name) => `${name} ${lock.packages[`node_modules/${name}`].version}`)
  .join(", ");

const result = await build({
  entryPoints: [join(here, "src", "page.js")],
  // Module paths in the bundle's comments are relative to this: the same bytes from any directory.
  absWorkingDir: here,
  bundle: true,
  format: "iife",
  target: ["es2020", "chrome100", "firefox100", "safari15"],
  minify: false,
  legalComments: "inline",
  write: false,
  logLevel: "error",
});
let script = result.outputFiles[0].text;
// The script sits inside <script>: no "</script" may end it early.
script = script.replaceAll("</script", "<\\/script");
const template = readFileSync(join(here, "src", "page.html"), "utf8");
const page = template
  .replace("@@VERSION@@", versions)
  .replace("<!-- SCRIPT -->", () => `<script>\n${script}</script>`);

if (args[0] === "--check") {
  let committed = "";
  try {
    committed = readFileSync(target, "utf8");
  } catch {}
  if (committed !== page) {
    console.error(`${target} is stale: run \`npm run build\` in client/web and commit it`);
    process.exit(1);
  }
  console.log("verifier.html is up to date");
} else {
  const out = args[0] === "--out" ? args[1] : target;
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(out, page);
  console.log(`wrote ${out} (${page.length} bytes)`);
}
