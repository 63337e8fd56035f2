import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

/**
 * CHANGELOG.md keeps Keep a Changelog's form (https://keepachangelog.com/en/1.1.0/): an Unreleased
 * section on top, then released versions newest first, each with its changes under the six kinds.
 */
const text = readFileSync('CHANGELOG.md', 'utf8').replace(/^```[\s\S]*?^```/gm, '');
const sections = [...text.matchAll(/^## (.+)$/gm)].map(([, heading]) => heading!);
const kinds = ['Added', 'Changed', 'Deprecated', 'Removed', 'Fixed', 'Security'];

describe('the changelog', () => {
  it('opens with an Unreleased section, and names each released version with its date', () => {
    expect(text.startsWith('# Changelog\n')).toBe(true);
    expect(sections[0]).toBe('Unreleased');
    for (const version of sections.slice(1))
      expect(version).toMatch(/^\[?\d+\.\d+\.\d+(?:-[\w.]+)?\]? - \d{4}-\d{2}-\d{2}$/);
  });

  it('sorts every change under one of the six kinds, none of them empty', () => {
    const blocks = text.split(/^### /m).slice(1);
    expect(blocks.length).toBeGreaterThan(0);
    for (const block of blocks) {
      const [kind = '', ...body] = block.split('\n');
      expect(kinds, kind).toContain(kind);
      expect(body.join('\n').split(/^## /m)[0], kind).toMatch(/^- \S/m);
    }
  });
});
