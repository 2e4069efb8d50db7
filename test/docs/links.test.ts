import assert from 'node:assert/strict';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, it } from 'node:test';

const root = resolve(import.meta.dirname, '../..');

/** README.md and every page under docs/, as paths relative to the repository. */
function pages(): string[] {
  const under = (dir: string): string[] =>
    readdirSync(join(root, dir), { withFileTypes: true }).flatMap((entry) =>
      entry.isDirectory() ? under(join(dir, entry.name)) : entry.name.endsWith('.md') ? [join(dir, entry.name)] : [],
    );
  return ['README.md', ...under('docs')];
}

/** The page's text outside fenced code blocks, where a `#` line is a heading and `](...)` a link. */
function prose(page: string): string {
  return readFileSync(join(root, page), 'utf8').replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\S\n]*$/gm, '');
}

/**
 * The anchor GitHub gives a heading: its text as rendered (links as their text, no code or emphasis
 * marks), lower-cased, without punctuation other than `-` and `_`, each space a hyphen.
 */
function slug(heading: string): string {
  return heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/[`*]/g, '')
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
    .replace(/ /g, '-');
}

/** Every anchor a page has: its headings' (a repeated one gets -1, -2, ...) and any `id` or `name` of its HTML. */
function anchorsOf(page: string): Set<string> {
  const text = prose(page);
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const [, heading = ''] of text.matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const base = slug(heading);
    const times = seen.get(base) ?? 0;
    seen.set(base, times + 1);
    anchors.add(times === 0 ? base : `${base}-${times}`);
  }
  for (const [, id = ''] of text.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) anchors.add(id);
  return anchors;
}

describe('links between the docs', () => {
  it('slugs a heading as GitHub does', () => {
    assert.equal(
      slug("State in the key's expiry (tokenBucket and gcra)"),
      'state-in-the-keys-expiry-tokenbucket-and-gcra',
    );
    assert.equal(slug('On Redis 6.2 (without PEXPIRETIME)'), 'on-redis-62-without-pexpiretime');
    assert.equal(slug('`sluice serve` and [Envoy](https://envoyproxy.io)'), 'sluice-serve-and-envoy');
    assert.equal(slug('Budgets: a cost per unit, reserve and settle'), 'budgets-a-cost-per-unit-reserve-and-settle');
    assert.equal(slug('SLUICE_STORE_ERROR'), 'sluice_store_error');
  });

  it('every link to a page in the repository finds the page, and every #anchor a heading in it', () => {
    const broken: string[] = [];
    let checked = 0;
    for (const page of pages()) {
      for (const [, target = ''] of prose(page).matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto: and the like
        const [path = '', anchor] = target.split('#', 2);
        const file = path === '' ? page : relative(root, resolve(root, dirname(page), decodeURI(path)));
        checked++;
        if (!existsSync(join(root, file))) broken.push(`${page}: ${target} (no ${file})`);
        else if (anchor !== undefined && file.endsWith('.md') && !anchorsOf(file).has(decodeURIComponent(anchor)))
          broken.push(`${page}: ${target} (no heading in ${file} has the anchor #${anchor})`);
      }
    }
    assert.ok(checked > 100, `${checked} links found`);
    assert.deepEqual(broken, []);
  });

  it('every page that ships links only to what ships with it (package.json "files")', () => {
    const files = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { files: string[] }).files;
    const shipped = (file: string) => files.some((entry) => file === entry || file.startsWith(`${entry}/`));
    const outside: string[] = [];
    for (const page of pages()) {
      for (const [, target = ''] of prose(page).matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('#')) continue;
        const file = relative(root, resolve(root, dirname(page), decodeURI(target.split('#', 1)[0] ?? '')));
        if (!shipped(file)) outside.push(`${page}: ${target} (${file} is not in the package)`);
      }
    }
    assert.deepEqual(outside, []);
  });
});
