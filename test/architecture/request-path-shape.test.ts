import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { clockReaders, oversizedParts } from '../helpers/source-shape.js';
import { useTempDirs } from '../helpers/temp-dirs.js';

/**
 * The request path's shape (issue 43, docs/architecture.md): files a reader takes in at once, functions
 * that do one thing, and time that enters through the clock the runtime injects, so that tests move it.
 */
const requestPathFolders = ['src/gateway', 'src/upstream', 'src/runtime'];
const dataPathFolders = ['src/gateway', 'src/upstream', 'src/limiter', 'src/quota', 'src/auth', 'src/stores'];
const limits = { maxFileLines: 400, maxFunctionLines: 80 };

describe('the shape of the request path', () => {
  const tempDirs = useTempDirs('quotagate-shape-');

  it('has no file over 400 lines and no function over 80 lines in gateway/, upstream/ and runtime/', () => {
    expect(oversizedParts(requestPathFolders, limits)).toEqual([]);
  });

  it('reads the time only through the injected clock on the data path', () => {
    expect(clockReaders(dataPathFolders)).toEqual([]);
  });

  it('names a long file, a long function of each kind, and each way of reading the time', () => {
    const root = tempDirs.make();
    const file = (name: string, text: string) => {
      mkdirSync(path.dirname(path.join(root, name)), { recursive: true });
      writeFileSync(path.join(root, name), text);
    };
    const body = (lines: number) => '  void 0;\n'.repeat(lines - 2);
    file('src/a/long.ts', 'export {};\n'.repeat(401));
    file(
      'src/a/functions.ts',
      `export function declared() {\n${body(81)}}\n` +
        `export const arrow = () => {\n${body(81)}};\n` +
        `export class Holder {\n  method() {\n${body(81)}  }\n}\n` +
        `export function short() {\n${body(80)}}\n`,
    );
    file(
      'src/b/time.ts',
      'export const a = Date.now();\nexport const b = performance.now();\nexport const c = new Date();\n' +
        'export const d = { now: Date.now };\nexport const e = new Date(0);\nexport const f = { now: 1 }.now;\n',
    );
    expect(oversizedParts([path.join(root, 'src/a')], { ...limits, root })).toEqual([
      'src/a/functions.ts:1: declared has 81 lines, over 80',
      'src/a/functions.ts:82: arrow has 81 lines, over 80',
      'src/a/functions.ts:164: method has 81 lines, over 80',
      'src/a/long.ts: 401 lines, over 400',
    ]);
    expect(clockReaders([path.join(root, 'src/b')], root)).toEqual([
      'src/b/time.ts:1: Date.now',
      'src/b/time.ts:2: performance.now',
      'src/b/time.ts:3: new Date()',
      'src/b/time.ts:4: Date.now',
    ]);
  });
});
