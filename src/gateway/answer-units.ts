import type { IncomingHttpHeaders } from 'node:http';
import { bodyUnitsReader, type BodyUnitsReader } from '../quota/body-units.js';
import type { ApplicableRestriction } from '../quota/quota-index.js';
import type { UnitPaths } from '../quota/unit-paths.js';
import type { AnswerBodyWatch } from '../upstream/upstream-proxy.js';

/**
 * What the body of an answer says it cost, for the throttleunits restrictions of one exchange that read
 * their units from it (`body`): one reader for each set of paths, made when the answer's head says how
 * to read it, and handed each chunk as it passes to the client (or is read after the client left).
 */
export class AnswerBodyUnits implements AnswerBodyWatch {
  /** A reader per set of paths; null for a body that cannot say units (its type, its content coding). */
  private readonly readers = new Map<UnitPaths, BodyUnitsReader | null>();
  /** What each reader said once the answer ended: `end()` is called once. */
  private readonly said = new Map<UnitPaths, number | null>();

  constructor(private readonly paths: readonly UnitPaths[]) {}

  /** The body readers of `restrictions`, or null when none reads its units from the body. */
  static of(restrictions: readonly ApplicableRestriction[]): AnswerBodyUnits | null {
    const paths = restrictions.flatMap((restriction) => restriction.unitBody ?? []);
    return paths.length === 0 ? null : new AnswerBodyUnits([...new Set(paths)]);
  }

  head(headers: IncomingHttpHeaders): void {
    const head = { contentType: headers['content-type'], contentEncoding: headers['content-encoding'] };
    for (const paths of this.paths) this.readers.set(paths, bodyUnitsReader(paths, head));
  }

  push(chunk: Buffer): void {
    for (const reader of this.readers.values()) reader?.push(chunk);
  }

  /**
   * The units `paths` say in an answer read to its end, or (`whole` false) in what came of one cut before
   * its end; null when they say none, or it is unreadable.
   */
  unitsAt(paths: UnitPaths, whole = true): number | null {
    if (!this.said.has(paths)) {
      const reader = this.readers.get(paths);
      this.said.set(paths, (whole ? reader?.end() : reader?.saidSoFar()) ?? null);
    }
    return this.said.get(paths)!;
  }
}

/**
 * Makes the upstream request ask for an answer without a content coding: the client's Accept-Encoding
 * goes, and `identity` alone takes its place (RFC 9110 §12.5.3). The body of a compressed answer cannot
 * be read for its units, so a client asking for gzip or br would otherwise be charged only the default.
 * An upstream that compresses all the same is still charged the default.
 */
export function askForIdentity(fields: Array<string | string[]>): void {
  for (let i = fields.length - 2; i >= 0; i -= 2) {
    if (fields[i] === 'accept-encoding') fields.splice(i, 2);
  }
  fields.push('accept-encoding', 'identity');
}
