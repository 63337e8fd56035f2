import { readFileSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { filesUnder } from './files-under.js';

/**
 * Measures of the request path's shape that the layers alone do not hold (docs/architecture.md): how long
 * its files and functions are, and where it reads the time. Each answer is one sentence per finding.
 */

const sourcesUnder = (dirs: readonly string[]): string[] =>
  dirs.flatMap((dir) => filesUnder(dir)).filter((file) => /\.ts$/.test(file) && !file.endsWith('.d.ts'));

const parse = (file: string): ts.SourceFile =>
  ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);

const lineOf = (source: ts.SourceFile, position: number): number =>
  source.getLineAndCharacterOfPosition(position).line + 1;

const where = (file: string, root: string): string => path.relative(root, file).split(path.sep).join('/');

function visit(node: ts.Node, each: (node: ts.Node) => void): void {
  each(node);
  ts.forEachChild(node, (child) => visit(child, each));
}

/** The name a function is known by: its own, or the property or variable it is assigned to. */
function functionName(node: ts.FunctionLikeDeclaration): string {
  if (node.name && ts.isIdentifier(node.name)) return node.name.text;
  if (node.name) return node.name.getText();
  const parent = node.parent;
  if ((ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent)) && ts.isIdentifier(parent.name)) {
    return parent.name.text;
  }
  if (ts.isPropertyDeclaration(parent)) return parent.name.getText();
  return '(anonymous)';
}

/** Files over `maxFileLines` and functions (of any kind) over `maxFunctionLines` lines under `dirs`. */
export function oversizedParts(
  dirs: readonly string[],
  {
    maxFileLines,
    maxFunctionLines,
    root = process.cwd(),
  }: { maxFileLines: number; maxFunctionLines: number; root?: string },
): string[] {
  const problems: string[] = [];
  for (const file of sourcesUnder(dirs)) {
    const source = parse(file);
    const lines =
      source.getLineAndCharacterOfPosition(source.end).line + (source.text.endsWith('\n') ? 0 : 1);
    if (lines > maxFileLines) problems.push(`${where(file, root)}: ${lines} lines, over ${maxFileLines}`);
    visit(source, (node) => {
      if (!ts.isFunctionLike(node) || !('body' in node) || !node.body) return;
      const span = lineOf(source, node.body.end) - lineOf(source, node.getStart(source)) + 1;
      if (span > maxFunctionLines) {
        problems.push(
          `${where(file, root)}:${lineOf(source, node.getStart(source))}: ${functionName(node as ts.FunctionLikeDeclaration)} has ${span} lines, over ${maxFunctionLines}`,
        );
      }
    });
  }
  return problems;
}

/**
 * Where code under `dirs` reads the time itself instead of through the injected clock: `Date.now` and
 * `performance.now` (called or handed on), and `new Date()` without an argument.
 */
export function clockReaders(dirs: readonly string[], root = process.cwd()): string[] {
  const found: string[] = [];
  for (const file of sourcesUnder(dirs)) {
    const source = parse(file);
    visit(source, (node) => {
      const at = () => `${where(file, root)}:${lineOf(source, node.getStart(source))}`;
      if (ts.isPropertyAccessExpression(node) && node.name.text === 'now') {
        const owner = node.expression.getText(source);
        if (owner === 'Date' || owner === 'performance') found.push(`${at()}: ${owner}.now`);
      } else if (ts.isNewExpression(node) && node.expression.getText(source) === 'Date') {
        if ((node.arguments?.length ?? 0) === 0) found.push(`${at()}: new Date()`);
      }
    });
  }
  return found;
}
