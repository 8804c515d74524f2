// prepare-corpus.mjs: turns work/raw/<book>.txt (written by extract-corpus.R) into
// work/corpus.json, the one place where the text is cleaned and the train/held-out
// split is defined. It must never look at tokens: it deals in text only.
//
// Cleaning (deterministic, documented in README.md):
//   - paragraphs are runs of non-blank lines; they are joined by "\n\n";
//   - a prose paragraph (no line starts with a space) is reflowed into one line, and
//     runs of spaces inside it become one space (two of the novels use two spaces
//     after a full stop);
//   - a paragraph with an indented line (verse, letters' headings) keeps its line
//     breaks and spaces exactly.
// Units and split:
//   - a book is cut into units at its chapter headings ("CHAPTER I", "Chapter 1");
//     a "VOLUME I" heading just before a chapter heading opens that chapter's unit;
//   - text before the first chapter (title page) is a unit of its own, always train;
//   - chapters are numbered 0, 1, 2, ... across the six books in publication order;
//     chapter k is held out when k % 20 === 10, every other unit is train.
//
// Usage (from the repository root): node tools/train-demo/prepare-corpus.mjs
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const WORK = join('tools', 'train-demo', 'work');
const BOOKS = ['sensesensibility', 'prideprejudice', 'mansfieldpark', 'emma', 'northangerabbey', 'persuasion'];
const CHAPTER = /^chapter\s+([0-9]+|[ivxlc]+)\.?$/i;
const VOLUME = /^volume\s+([0-9]+|[ivxlc]+)\.?$/i;
const HELD_OUT_EVERY = 20;
const HELD_OUT_AT = 10;

/** Reflows a list of source lines into paragraphs joined by a blank line. */
function reflow(lines) {
  const paragraphs = [];
  let current = [];
  const flush = () => {
    if (current.length === 0) return;
    const verbatim = current.some((line) => /^\s/.test(line));
    paragraphs.push(
      verbatim
        ? current.map((line) => line.trimEnd()).join('\n')
        : current
            .map((line) => line.trim())
            .join(' ')
            .replace(/ {2,}/g, ' '),
    );
    current = [];
  };
  for (const line of lines) {
    if (line.trim() === '') flush();
    else current.push(line);
  }
  flush();
  return paragraphs.join('\n\n');
}

/** Cuts a book's lines into [start, end) line ranges, one per unit. */
function unitStarts(lines) {
  const starts = [0];
  for (let i = 0; i < lines.length; i++) {
    if (!CHAPTER.test(lines[i].trim())) continue;
    let start = i;
    let j = i - 1;
    while (j >= 0 && lines[j].trim() === '') j--;
    if (j >= 0 && VOLUME.test(lines[j].trim())) start = j;
    if (start > starts[starts.length - 1]) starts.push(start);
  }
  return starts;
}

const units = [];
let chapter = 0;
for (const book of BOOKS) {
  const raw = readFileSync(join(WORK, 'raw', `${book}.txt`), 'utf8');
  const lines = raw.replace(/\n$/, '').split('\n');
  const starts = unitStarts(lines);
  for (let u = 0; u < starts.length; u++) {
    const text = reflow(lines.slice(starts[u], starts[u + 1] ?? lines.length));
    if (text === '') continue;
    const isFront = u === 0 && !CHAPTER.test(lines[0].trim());
    const index = isFront ? null : chapter++;
    const split = index !== null && index % HELD_OUT_EVERY === HELD_OUT_AT ? 'heldout' : 'train';
    units.push({ book, chapter: index, heading: text.split('\n')[0].slice(0, 40), split, text });
  }
}

const count = (split) => units.filter((u) => u.split === split);
const chars = (list) => list.reduce((n, u) => n + u.text.length, 0);
writeFileSync(join(WORK, 'corpus.json'), JSON.stringify({ units }, null, 1));
for (const split of ['train', 'heldout']) {
  const list = count(split);
  // Human-readable copies; the pipeline reads corpus.json only.
  writeFileSync(join(WORK, `${split}.txt`), list.map((u) => u.text).join('\n\n') + '\n');
  console.log(`${split.padEnd(8)} ${String(list.length).padStart(4)} units ${String(chars(list)).padStart(9)} chars`);
}
console.log(
  'held out:',
  count('heldout')
    .map((u) => `${u.book}:${u.heading}`)
    .join(', '),
);
