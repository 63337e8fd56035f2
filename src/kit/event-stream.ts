/**
 * The events of a `text/event-stream` as its bytes arrive, after the WHATWG HTML standard's
 * "Interpreting an event stream" (§9.2.6): one leading byte order mark is dropped; lines end with CRLF,
 * LF or CR; a line that starts with `:` is a comment; `data:` (one space after the colon dropped, or a
 * bare `data` line) appends its value to the event's data, lines joined with LF; an empty line ends the
 * event, which is dispatched when it has data. Other fields (`event`, `id`, `retry`) say nothing about
 * the data and are passed over. An event the stream ends inside, before its empty line, is not
 * dispatched, as the standard says.
 *
 * It works on bytes: CR and LF never occur inside a UTF-8 sequence, so a chunk split anywhere (inside a
 * character, between CR and LF) is the same stream. The data is handed over as bytes, for the caller to
 * look into before it pays for decoding (UTF-8, as the standard says).
 */

const lf = 0x0a;
const cr = 0x0d;
const colon = 0x3a;
const space = 0x20;
const bom = Buffer.from([0xef, 0xbb, 0xbf]);
const dataField = Buffer.from('data');
const noBytes = Buffer.alloc(0);

export class EventStreamParser {
  /** The first bytes of the stream, while they may still be a byte order mark; null once it is decided. */
  private head: Buffer | null = noBytes;
  /** The previous chunk ended with CR: an LF that starts the next one ends no second line. */
  private afterCr = false;
  /** The line being read, in the pieces the chunks brought; at most `maxEventBytes` + 6 bytes kept. */
  private line: Buffer[] = [];
  private lineBytes = 0;
  /** The line is longer than what was kept of it. */
  private lineCut = false;
  /** The data lines of the event being read. */
  private data: Buffer[] = [];
  private dataBytes = 0;
  /** How many of the last data lines are still slices of the chunk being read. */
  private sliced = 0;
  /** The event's data is past `maxEventBytes`: it is skipped whole. */
  private eventCut = false;

  /**
   * @param onEvent called with each event's data (UTF-8 bytes, lines joined with LF)
   * @param maxEventBytes an event with more data than this is skipped, and costs no more memory than it
   */
  constructor(
    private readonly onEvent: (data: Buffer) => void,
    private readonly maxEventBytes: number,
  ) {}

  /** The next bytes of the stream. */
  push(chunk: Buffer): void {
    const bytes = this.withoutBom(chunk);
    let start = 0;
    if (this.afterCr && bytes.length > 0) {
      this.afterCr = false;
      if (bytes[0] === lf) start = 1;
    }
    let nextLf = -1;
    let nextCr = -1;
    while (start < bytes.length) {
      if (nextLf < start) nextLf = indexOr(bytes, lf, start);
      if (nextCr < start) nextCr = indexOr(bytes, cr, start);
      const end = Math.min(nextLf, nextCr);
      if (end === bytes.length) {
        this.keep(bytes.subarray(start));
        break;
      }
      this.endLine(bytes, start, end);
      start = end + 1;
      if (bytes[end] === cr) {
        if (start === bytes.length) this.afterCr = true;
        else if (bytes[start] === lf) start += 1;
      }
    }
    this.copySlices();
  }

  /**
   * Copies the data lines that are slices of the chunk just read: what is kept across chunks is copied,
   * so no chunk outlives its read for a few bytes of it (many small lines, each in a chunk of 64 KiB,
   * would otherwise hold many times the bound). An event within one chunk is never copied.
   */
  private copySlices(): void {
    for (let at = this.data.length - this.sliced; at < this.data.length; at += 1) {
      this.data[at] = Buffer.from(this.data[at]!);
    }
    this.sliced = 0;
  }

  /** `chunk` without the byte order mark that may start the stream, which may come a byte at a time. */
  private withoutBom(chunk: Buffer): Buffer {
    if (this.head === null) return chunk;
    const head = this.head.length === 0 ? chunk : Buffer.concat([this.head, chunk]);
    const seen = Math.min(head.length, bom.length);
    if (!head.subarray(0, seen).equals(bom.subarray(0, seen))) {
      this.head = null;
      return head;
    }
    if (head.length < bom.length) {
      this.head = head;
      return noBytes;
    }
    this.head = null;
    return head.subarray(bom.length);
  }

  /** Keeps a copy of a piece of the current line, as much as a data line within the bound needs. */
  private keep(piece: Buffer): void {
    if (piece.length === 0) return;
    const room = this.maxEventBytes + 'data: '.length - this.lineBytes;
    if (piece.length > room) {
      this.lineCut = true;
      if (room <= 0) return;
      piece = piece.subarray(0, room);
    }
    this.line.push(Buffer.from(piece));
    this.lineBytes += piece.length;
  }

  /**
   * The line that ends at `end` of `bytes`, after the pieces kept of it: bytes are sliced only for a
   * line that spans chunks and for the value of a data line.
   */
  private endLine(bytes: Buffer, start: number, end: number): void {
    let line = bytes;
    if (this.line.length > 0) {
      this.keep(bytes.subarray(start, end));
      line = Buffer.concat(this.line, this.lineBytes);
      start = 0;
      end = line.length;
    }
    const cut = this.lineCut;
    this.line = [];
    this.lineBytes = 0;
    this.lineCut = false;
    if (start === end) this.endEvent();
    else if (isDataLine(line, start, end)) {
      let value = start + dataField.length + 1;
      if (value < end && line[value] === space) value += 1;
      this.addData(line.subarray(Math.min(value, end), end), cut);
    }
  }

  private addData(value: Buffer, cut: boolean): void {
    if (this.eventCut) return;
    const bytes = this.dataBytes + (this.data.length > 0 ? 1 : 0) + value.length;
    if (cut || bytes > this.maxEventBytes) {
      this.eventCut = true;
      this.data = [];
      this.sliced = 0;
      return;
    }
    this.data.push(value);
    this.dataBytes = bytes;
    this.sliced += 1;
  }

  private endEvent(): void {
    const { data, eventCut } = this;
    this.data = [];
    this.dataBytes = 0;
    this.sliced = 0;
    this.eventCut = false;
    if (eventCut || data.length === 0) return;
    this.onEvent(data.length === 1 ? data[0]! : joinedWithLf(data));
  }
}

/** The index of `byte` in `bytes` from `start`, or the length of `bytes` when it is not there. */
function indexOr(bytes: Buffer, byte: number, start: number): number {
  const at = bytes.indexOf(byte, start);
  return at === -1 ? bytes.length : at;
}

/** The field of the line from `start` to `end` is `data`: the line is `data`, or starts with `data:`. */
function isDataLine(line: Buffer, start: number, end: number): boolean {
  const after = start + dataField.length;
  if (after > end || (after < end && line[after] !== colon)) return false;
  for (let at = 0; at < dataField.length; at += 1) if (line[start + at] !== dataField[at]) return false;
  return true;
}

function joinedWithLf(lines: readonly Buffer[]): Buffer {
  const separated: Buffer[] = [];
  for (const line of lines) {
    if (separated.length > 0) separated.push(newline);
    separated.push(line);
  }
  return Buffer.concat(separated);
}
const newline = Buffer.from([lf]);
