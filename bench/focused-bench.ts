import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os, { tmpdir } from 'node:os';
import path from 'node:path';
import { cpuSeconds, machineCpuSeconds } from './cpu-time.js';
import { runThenStop, type Running } from './processes.js';
import { Setups } from './setups.js';

export const say = (line: string) => process.stderr.write(`${line}\n`);

/**
 * What a focused bench (`bench:streams`, `bench:tracing`: a few rows of bench/run.ts alone, side by side)
 * shares with the others: its setups, each stopped at the end, what other tenants of the machine took
 * while it measured, and its results under bench/results/.
 */
export class FocusedBench {
  readonly setups: Setups;
  private readonly running: Running[] = [];
  private readonly work: string;

  constructor(name: string) {
    this.work = mkdtempSync(path.join(tmpdir(), `quotagate-${name}-bench-`));
    this.setups = new Setups(this.work, async (what) => {
      const started = await what;
      this.running.push(started);
      return started;
    });
  }

  /**
   * Starts counting the CPU time spent on the machine outside this bench's process tree (other tenants);
   * the function returned gives the cores they used on average since.
   */
  watchOthers(): () => number {
    const outside = () => (machineCpuSeconds() ?? NaN) - (cpuSeconds(process.pid) ?? NaN);
    const from = { cpu: outside(), wall: performance.now() };
    return () => (outside() - from.cpu) / ((performance.now() - from.wall) / 1000);
  }

  /** The first line of a report: the machine, Node, and what other processes took meanwhile. */
  machineLine(otherCores: number): string {
    return `Machine: ${os.availableParallelism()} cores (${os.cpus()[0]?.model ?? 'unknown'}), Node ${process.version}. Other processes on the machine used ${otherCores.toFixed(2)} cores on average while the bench measured.`;
  }

  /** Writes bench/results/`name`.json (every round) and `name`.md, and prints the markdown. */
  write(name: string, json: unknown, markdown: string): void {
    const resultsDir = path.resolve('bench/results');
    mkdirSync(resultsDir, { recursive: true });
    writeFileSync(path.join(resultsDir, `${name}.json`), `${JSON.stringify(json, null, 2)}\n`);
    writeFileSync(path.join(resultsDir, `${name}.md`), markdown);
    process.stdout.write(`\n${markdown}\n`);
    say(`written: bench/results/${name}.json, ${name}.md`);
  }

  /** Runs `main`, then stops every setup it started (by pid) and removes their files, whatever happened. */
  run(main: () => Promise<void>): Promise<void> {
    return runThenStop(main, () => this.stop(), say);
  }

  private async stop(): Promise<void> {
    for (const child of this.running.splice(0).reverse()) await child.stop();
    rmSync(this.work, { recursive: true, force: true });
  }
}
