/**
 * Bytes of a request body kept while it is sent, so that a call its target refused may be sent again:
 * a gRPC request's messages are most often a few hundred bytes, and a target that refuses a stream
 * (REFUSED_STREAM, or a GOAWAY below it) does so at its HEADERS, before the gateway has read much more
 * than the first message. Past this, the body is only streamed, and a refused call is not sent again.
 */
export const replayBytes = 65_536;

/**
 * A request body read once from its client, which each call that sends it reads from its start: its
 * chunks are kept while they total at most `limit` bytes, so that a call refused by its target (the
 * stream was not processed, RFC 9113 §8.7) can be sent again to another without reading the client
 * twice. A call that may send it `hold`s it and `release`s it once done; when none holds it, its
 * source is stopped (its reader drops the rest of the request).
 */
export class ReplayableBody {
  private readonly source: AsyncIterator<Buffer>;
  private kept: Buffer[] = [];
  private keptBytes = 0;
  /** More than `limit` bytes were read: chunks are no longer kept. */
  private overflowed = false;
  private ended = false;
  /** The read of the source under way, shared by every reader waiting for the next chunk. */
  private pulling: Promise<Buffer | null> | null = null;
  private holders = 0;

  constructor(
    source: AsyncIterable<Buffer>,
    private readonly limit = replayBytes,
  ) {
    this.source = source[Symbol.asyncIterator]();
  }

  /** Whether every byte read so far is kept: the body can be sent again from its start. */
  get replayable(): boolean {
    return !this.overflowed;
  }

  hold(): void {
    this.holders += 1;
  }

  release(): void {
    this.holders -= 1;
    if (this.holders === 0 && !this.ended) void this.source.return?.();
  }

  /** The body from its start: the chunks kept, then the rest as the client sends it. */
  async *read(): AsyncGenerator<Buffer> {
    let at = 0;
    for (;;) {
      if (at < this.kept.length) {
        yield this.kept[at++]!;
        continue;
      }
      if (this.ended) return;
      const chunk = await this.pull();
      if (chunk === null) return;
      // A chunk kept is handed on by the loop, to each reader once; one past the limit only as it comes.
      if (this.overflowed) yield chunk;
    }
  }

  private pull(): Promise<Buffer | null> {
    this.pulling ??= this.source.next().then(
      (result) => this.took(result),
      (error: unknown) => {
        this.pulling = null;
        throw error;
      },
    );
    return this.pulling;
  }

  /** Keeps the chunk read, while the chunks kept stay within the limit; null at the body's end. */
  private took({ done, value }: IteratorResult<Buffer>): Buffer | null {
    this.pulling = null;
    if (done) {
      this.ended = true;
      return null;
    }
    if (!this.overflowed && this.keptBytes + value.length <= this.limit) {
      this.kept.push(value);
      this.keptBytes += value.length;
    } else if (!this.overflowed) {
      this.overflowed = true;
      this.kept = [];
    }
    return value;
  }
}
