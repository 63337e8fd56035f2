import type { AnswerChain } from '../exchange.js';

/**
 * `next` with the exchange's body watch told of the answer's head and of each chunk of its body, the
 * client there or not (the rest of an answer is read for what it says it cost). Only the exchanges that
 * have a watch go through it (dispatch.ts).
 */
export function watched(next: AnswerChain): AnswerChain {
  return {
    head(exchange, controller, statusCode, headers, respondedAt) {
      exchange.bodyWatch!.head(headers);
      next.head(exchange, controller, statusCode, headers, respondedAt);
    },
    data(exchange, controller, chunk) {
      exchange.bodyWatch!.push(chunk);
      next.data(exchange, controller, chunk);
    },
    end: next.end,
  };
}
