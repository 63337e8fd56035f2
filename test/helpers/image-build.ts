import dockerignore from '@balena/dockerignore';
import { execFile } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { Copy, PropertyInstruction, Run } from 'dockerfile-ast';
import { readDeploy, stages, type DockerInstruction } from './deploy-files.js';

// The image's build stages, laid out and run without a Docker engine: the files `docker build -f
// deploy/Dockerfile .` would send (the checkout less what Dockerfile.dockerignore keeps out), copied where
// the stage's COPY lines put them, then the stage's RUN lines run there in order. An instruction this
// does not know how to lay out fails with its name, rather than being skipped.

const execFileAsync = promisify(execFile);
/**
 * Docker's ignore rules. The package's types declare an ES default export, but it is CommonJS: an ES
 * module importing it gets module.exports, which is the function itself.
 */
const ignore = dockerignore as unknown as typeof dockerignore.default;
/** The checkout the tests run in, which the context is taken from. */
export const repository = path.resolve('.');

/**
 * The files of the checkout an image is built from: what git tracks, and new files it does not ignore
 * (a clean clone has no others; a local dist/ or data/ must not make a build pass here that fails there).
 */
export async function checkoutFiles(): Promise<string[]> {
  const { stdout } = await execFileAsync('git', [
    'ls-files',
    '-z',
    '--cached',
    '--others',
    '--exclude-standard',
  ]);
  return stdout.split('\0').filter((file) => file !== '' && existsSync(file));
}

/** The files of `checkout` that Dockerfile.dockerignore lets into the build context (Docker's rules). */
export const contextFiles = (checkout: string[]) =>
  ignore().add(readDeploy('Dockerfile.dockerignore')).filter(checkout);

/** A file of the context and where a COPY puts it in the image. */
export interface CopiedFile {
  from: string;
  to: string;
}

/** A source as a path of the context: COPY reads `./src`, `/src` and `src` alike. */
const contextPath = (source: string) => path.posix.normalize(source).replace(/^(?:\.?\/)+/, '') || '.';

/**
 * The context files one COPY source names and where they land, as BuildKit copies: a named file goes
 * into `destination` (a folder when it ends in `/`, or when there are several sources or a wildcard)
 * or becomes it; a named folder's contents go into `destination`. Sources match as Docker matches them
 * (Go's filepath.Match, as the ignore file's patterns do). A source that names nothing fails, as
 * `docker build` does.
 */
export function copiedFiles(
  source: string,
  destination: string,
  intoFolder: boolean,
  context: string[],
): CopiedFile[] {
  const pattern = contextPath(source);
  const matches = ignore().add([pattern]);
  const copied = context.flatMap((file) => {
    const parts = file.split('/');
    // The shortest leading part of the path the source names: the file itself or a folder above it.
    const named = parts
      .map((_part, i) => parts.slice(0, i + 1).join('/'))
      .find((prefix) => pattern === '.' || matches.ignores(prefix));
    if (named === undefined) return [];
    if (pattern === '.') return [{ from: file, to: path.posix.join(destination, file) }];
    if (named !== file)
      return [{ from: file, to: path.posix.join(destination, path.posix.relative(named, file)) }];
    return [
      { from: file, to: intoFolder ? path.posix.join(destination, path.posix.basename(file)) : destination },
    ];
  });
  if (copied.length === 0)
    throw new Error(`COPY ${source}: not in the build context (docker build fails: "${source}": not found)`);
  return copied;
}

/** The files one COPY instruction (not `--from`) takes from the context, in the image's absolute paths. */
export function filesOfCopy(
  instruction: DockerInstruction,
  workdir: string,
  context: string[],
): CopiedFile[] {
  const sources = instruction.words.slice(0, -1);
  const target = instruction.words.at(-1) ?? '';
  const destination = path.posix.resolve(workdir, target);
  const intoFolder = target.endsWith('/') || sources.length > 1 || sources.some((each) => /[*?[]/.test(each));
  return sources.flatMap((source) => copiedFiles(source, destination, intoFolder, context));
}

/** `FROM … AS name`: the stage's name, if it has one. */
const stageName = (stage: DockerInstruction[]) => /\bAS\s+(\S+)$/i.exec(stage[0]!.args)?.[1];
const stageNames = new Set(stages.map(stageName).filter((name) => name !== undefined));

/** COPY flags that change no file's content or place. */
const harmlessCopyFlags = new Set(['chown', 'chmod', 'link']);

/** Why this layout cannot stand in for BuildKit on `instruction`, or undefined when it can. */
function unsupported(instruction: DockerInstruction): string | undefined {
  const { keyword, flags, args, node } = instruction;
  if (!['FROM', 'WORKDIR', 'ARG', 'ENV', 'LABEL', 'COPY', 'RUN'].includes(keyword)) return keyword;
  if (keyword === 'COPY' && Object.keys(flags).some((flag) => !harmlessCopyFlags.has(flag)))
    return `COPY --${Object.keys(flags).join(' --')}`;
  if (keyword === 'RUN' && Object.keys(flags).length > 0) return `RUN --${Object.keys(flags).join(' --')}`;
  if ((keyword === 'COPY' || keyword === 'WORKDIR') && args.includes('$'))
    return `${keyword} with a variable`;
  if ((node instanceof Copy || node instanceof Run) && node.getHeredocs().length > 0)
    return 'a here-document';
  if (keyword === 'FROM' && stageNames.has(instruction.words[0]!)) return 'FROM another stage';
  return undefined;
}

/** The stages the last one copies from (`COPY --from=NAME`): what must build for the image to build. */
export function buildStages(): Array<{ name: string; instructions: DockerInstruction[] }> {
  const runtime = stages.at(-1) ?? [];
  const names = new Set(runtime.map((instruction) => instruction.flags.from).filter((name) => name != null));
  return [...names].map((name) => {
    const instructions = stages.find((stage) => stageName(stage) === name);
    if (!instructions) throw new Error(`COPY --from=${name}: no stage of deploy/Dockerfile has that name`);
    return { name, instructions };
  });
}

/** A RUN, and what it printed; `exitCode` 0 when it succeeded. */
export interface RunResult {
  command: string;
  exitCode: number;
  output: string;
}

/**
 * Lays `instructions` (one stage) out under `root` (the image's `/`) from `context` and runs its RUN
 * lines there with this machine's Node and npm in place of the base image's; stops at the first RUN
 * that fails. `standIn` may replace a RUN's command (the caller says why).
 */
export async function buildStage(
  instructions: DockerInstruction[],
  context: string[],
  root: string,
  standIn: (command: string) => string = (command) => command,
): Promise<RunResult[]> {
  let workdir = '/';
  const env: Record<string, string> = {};
  const runs: RunResult[] = [];
  for (const instruction of instructions) {
    const reason = unsupported(instruction);
    if (reason) throw new Error(`deploy/Dockerfile: ${reason} in a build stage is not laid out by this test`);
    const onDisk = (imagePath: string) => path.join(root, imagePath);
    if (instruction.keyword === 'WORKDIR') {
      workdir = path.posix.resolve(workdir, instruction.words[0]!);
      mkdirSync(onDisk(workdir), { recursive: true });
    } else if (instruction.node instanceof PropertyInstruction && instruction.keyword !== 'LABEL') {
      for (const property of instruction.node.getProperties()) {
        const value = property.getValue();
        if (value !== null) env[property.getName()] = value;
      }
    } else if (instruction.keyword === 'COPY') {
      for (const { from, to } of filesOfCopy(instruction, workdir, context)) {
        mkdirSync(path.dirname(onDisk(to)), { recursive: true });
        copyFileSync(path.join(repository, from), onDisk(to));
      }
    } else if (instruction.keyword === 'RUN') {
      const command = standIn(
        instruction.execForm ? instruction.words.map(shellWord).join(' ') : instruction.args,
      );
      const result = await runCommand(command, onDisk(workdir), { ...env, HOME: onDisk('/root') });
      runs.push(result);
      if (result.exitCode !== 0) break;
    }
  }
  return runs;
}

/** A word quoted for sh: an exec-form RUN runs as the same words would through `sh -c`. */
const shellWord = (word: string) => `'${word.replaceAll("'", `'\\''`)}'`;

async function runCommand(command: string, cwd: string, env: Record<string, string>): Promise<RunResult> {
  mkdirSync(env.HOME!, { recursive: true });
  try {
    const { stdout, stderr } = await execFileAsync('sh', ['-c', command], {
      cwd,
      // A clean environment, as a build container has: no npm_* of the npm that runs the tests.
      // npm would also ask the registry whether it is the newest npm: a build step needs no network here.
      env: { PATH: process.env.PATH ?? '', npm_config_update_notifier: 'false', ...env },
      maxBuffer: 16 * 1024 * 1024,
    });
    return { command, exitCode: 0, output: stdout + stderr };
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string };
    return {
      command,
      exitCode: Number(failed.code ?? 1),
      output: `${failed.stdout ?? ''}${failed.stderr ?? ''}`,
    };
  }
}
