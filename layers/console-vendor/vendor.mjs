// Copies the pinned renderer and sanitiser (package-lock.json) into the console's static/ folder,
// where they are committed: the console keeps no build step, and `sam build` ships them with the
// rest of the engram package. Run `npm ci && npm run vendor` (or `make console-vendor`) after
// changing a version here; tests/unit/test_console_vendor.py checks the copies against
// vendored.json and the lockfile.
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const STATIC = join(here, '..', 'core', 'engram', 'console', 'static');
// package -> [file in the package, name in static/]. DOMPurify's minified build is a UMD script:
// imported as a module it defines globalThis.DOMPurify (markdown.js reads it from there).
const FILES = {
  marked: ['lib/marked.esm.js', 'marked.esm.js'],
  dompurify: ['dist/purify.min.js', 'purify.min.js'],
};

const manifest = {};
for (const [pkg, [from, to]] of Object.entries(FILES)) {
  const { version } = JSON.parse(readFileSync(join(here, 'node_modules', pkg, 'package.json'), 'utf8'));
  // The source map is not shipped, so its comment goes (a browser's devtools would ask for it).
  const text = readFileSync(join(here, 'node_modules', pkg, from), 'utf8').replace(/\n\/\/# sourceMappingURL=\S+\s*$/, '\n');
  writeFileSync(join(STATIC, to), text);
  manifest[to] = { package: pkg, version, from, sha256: createHash('sha256').update(text).digest('hex') };
}
writeFileSync(join(here, 'vendored.json'), JSON.stringify(manifest, null, 2) + '\n');
console.log(Object.entries(manifest).map(([name, m]) => `${name} <- ${m.package}@${m.version}/${m.from}`).join('\n'));
