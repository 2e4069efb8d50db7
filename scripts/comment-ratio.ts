/**
 * The share of comment lines in src/, by folder, and every block of BLOCK or more comment lines in a
 * row: comments state contracts and reasons in a line or two, and measurements and history go in
 * docs. Counts TypeScript comments and the Lua comments (`--`) in the scripts' template strings.
 *
 *   npm run -s comments             the report
 *   npm run -s comments -- --check  also exits 1 when a block of BLOCK or more lines is found
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import ts from 'typescript';

const BLOCK = 8;
const ROOT = join(import.meta.dirname, '..');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

/** The character ranges of a file's comments, and of its template strings. */
function ranges(text: string): { comments: ts.TextRange[]; templates: ts.TextRange[] } {
  const file = ts.createSourceFile('file.ts', text, ts.ScriptTarget.Latest, true);
  const seen = new Set<number>();
  const comments: ts.TextRange[] = [];
  const templates: ts.TextRange[] = [];
  const visit = (node: ts.Node): void => {
    for (const range of [
      ...(ts.getLeadingCommentRanges(text, node.pos) ?? []),
      ...(ts.getTrailingCommentRanges(text, node.end) ?? []),
    ]) {
      if (!seen.has(range.pos)) comments.push(range);
      seen.add(range.pos);
    }
    if (ts.isTemplateLiteralToken(node)) templates.push({ pos: node.getStart(), end: node.end });
    node.getChildren().forEach(visit);
  };
  visit(file);
  return { comments, templates };
}

/** Whether each line of `text` holds a comment and nothing else. */
function commentLines(text: string): boolean[] {
  const { comments, templates } = ranges(text);
  const inComment = new Uint8Array(text.length);
  for (const { pos, end } of comments) inComment.fill(1, pos, end);
  const inTemplate = new Uint8Array(text.length);
  for (const { pos, end } of templates) inTemplate.fill(1, pos, end);
  const lines: boolean[] = [];
  let start = 0;
  for (const line of text.split('\n')) {
    const trimmed = line.trim();
    const first = start + line.indexOf(trimmed);
    let onlyComment = trimmed.length > 0;
    for (let i = 0; i < line.length && onlyComment; i++)
      if (!inComment[start + i] && line[i] !== ' ' && line[i] !== '\t') onlyComment = false;
    lines.push(onlyComment || (/^--( |$)/.test(trimmed) && inTemplate[first] === 1));
    start += line.length + 1;
  }
  return lines;
}

interface Tally {
  lines: number;
  comments: number;
}

const byFolder = new Map<string, Tally>();
const total: Tally = { lines: 0, comments: 0 };
const blocks: string[] = [];
for (const path of sourceFiles(join(ROOT, 'src')).sort()) {
  const name = relative(ROOT, path);
  const folder = name.split('/').slice(0, 2).join('/');
  const lines = commentLines(readFileSync(path, 'utf8'));
  const tally = byFolder.get(folder) ?? { lines: 0, comments: 0 };
  byFolder.set(folder, tally);
  let run = 0;
  [...lines, false].forEach((comment, i) => {
    if (comment) run++;
    else {
      // A run of comment lines ends at a line of code, or at the end of the file.
      if (run >= BLOCK) blocks.push(`${name}:${i + 1 - run}-${i} (${run} lines)`);
      run = 0;
    }
    if (i === lines.length) return;
    tally.lines++;
    total.lines++;
    if (comment) {
      tally.comments++;
      total.comments++;
    }
  });
}

const percent = (t: Tally) => `${((100 * t.comments) / t.lines).toFixed(1)}%`.padStart(6);
console.log('folder              lines  comment lines  ratio');
for (const [folder, tally] of [...byFolder].sort()) {
  console.log(
    `${folder.padEnd(18)} ${String(tally.lines).padStart(6)}  ${String(tally.comments).padStart(13)} ${percent(tally)}`,
  );
}
console.log(
  `${'src'.padEnd(18)} ${String(total.lines).padStart(6)}  ${String(total.comments).padStart(13)} ${percent(total)}`,
);
console.log(`\nblocks of ${BLOCK} or more comment lines: ${blocks.length}`);
for (const block of blocks.sort()) console.log(`  ${block}`);
if (process.argv.includes('--check') && blocks.length > 0) process.exitCode = 1;
