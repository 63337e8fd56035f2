import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import GithubSlugger from 'github-slugger';
import { describe, expect, it } from 'vitest';
import { filesUnder } from '../helpers/files-under.js';

/**
 * Every relative link of the README, the changelog, deploy/README.md and docs/ leads somewhere: the file exists, and an
 * anchor names a heading of it as GitHub spells anchors (github-slugger, duplicates numbered).
 */
const pages = [
  'README.md',
  'CHANGELOG.md',
  'deploy/README.md',
  ...readdirSync('docs')
    .filter((name) => name.endsWith('.md'))
    .map((name) => `docs/${name}`),
];

/** The anchors GitHub gives the headings of a Markdown file (code blocks left out). */
function anchorsOf(file: string): Set<string> {
  const slugger = new GithubSlugger();
  const text = readFileSync(file, 'utf8').replace(/^```[\s\S]*?^```/gm, '');
  return new Set(
    [...text.matchAll(/^#{1,6}\s+(.+?)\s*#*$/gm)].map(([, heading]) =>
      slugger.slug(heading!.replace(/`/g, '').replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')),
    ),
  );
}

/** The relative links of a page: [text](target), outside code blocks and inline code. */
function linksOf(file: string): string[] {
  const text = readFileSync(file, 'utf8')
    .replace(/^```[\s\S]*?^```/gm, '')
    .replace(/`[^`\n]*`/g, '');
  return [...text.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)]
    .map(([, target]) => target!)
    .filter((target) => !/^[a-z]+:/i.test(target));
}

/**
 * The files of this repository a page names in inline code (`test/stores/fleet.test.ts`), but for what
 * `npm run bench` writes (bench/results/, not committed).
 */
function namedFilesOf(file: string): string[] {
  const text = readFileSync(file, 'utf8').replace(/^```[\s\S]*?^```/gm, '');
  return [
    ...text.matchAll(/`((?:src|test|bench|deploy|docs|examples)\/[\w./-]+\.(?:ts|md|json|ya?ml|c?js))`/g),
  ]
    .map(([, named]) => named!)
    .filter((named) => !named.startsWith('bench/results/'));
}

describe('the README', () => {
  it('stays one page of what and why: at most 250 lines, the rest in docs/', () => {
    expect(readFileSync('README.md', 'utf8').split('\n').length).toBeLessThanOrEqual(250);
  });
});

describe('links of the documentation', () => {
  it.each(pages)('%s: every relative link and anchor resolves', (page) => {
    const broken = linksOf(page).filter((link) => {
      const [target = '', anchor] = link.split('#');
      const file = target === '' ? page : path.normalize(path.join(path.dirname(page), decodeURI(target)));
      if (!existsSync(file)) return true;
      if (anchor === undefined || statSync(file).isDirectory() || !file.endsWith('.md')) return false;
      return !anchorsOf(file).has(anchor);
    });
    expect(broken).toEqual([]);
  });
});

describe('files the documentation names', () => {
  it.each(pages)('%s: every source, test or deploy file named in inline code exists', (page) => {
    expect(namedFilesOf(page).filter((named) => !existsSync(named))).toEqual([]);
  });
});

/**
 * The files that send a reader to a section in words rather than a link, `(see deploy/README.md, "Keys
 * and their rotation")`: the pages, and every file of deploy/, conf/ and src/ (comments, manifests).
 */
const referringFiles = [
  ...pages,
  ...['deploy', 'conf', 'src'].flatMap((dir) => filesUnder(dir)).filter((file) => !file.endsWith('.md')),
];

/** `<page>, "<heading>"` as files write it; a bare `README` is the repository's. */
function sectionsNamedIn(file: string): Array<{ page: string; heading: string }> {
  const text = readFileSync(file, 'utf8').replace(/\s*\n\s*(?:#|\/\/|\*)?\s*/g, ' ');
  return [...text.matchAll(/((?:[\w.-]+\/)*README(?:\.md)?|(?:[\w.-]+\/)*[\w.-]+\.md), "([^"]+)"/g)].map(
    ([, page, heading]) => ({ page: page === 'README' ? 'README.md' : page!, heading: heading! }),
  );
}

describe('sections named in words', () => {
  it.each(referringFiles.filter((file) => sectionsNamedIn(file).length > 0))(
    '%s: every section it names in words is a heading of its page',
    (file) => {
      const slugger = new GithubSlugger();
      const missing = sectionsNamedIn(file).filter(({ page, heading }) => {
        if (!existsSync(page)) return true;
        slugger.reset();
        return !anchorsOf(page).has(slugger.slug(heading));
      });
      expect(missing).toEqual([]);
    },
  );
});
