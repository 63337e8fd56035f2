import type { AnswerChain } from '../exchange.js';

/**
 * `next` for an exchange of an API with a pool of targets: the proxy is told of the target's answer
 * as its head comes (outlier detection counts it), and may set it aside and send the exchange to
 * another target (a 502, 503 or 504 to an idempotent request), before anything of it is written to the
 * client. Only the exchanges of a pool go through it (dispatch.ts): the one-URL form does no more work.
 */
export function targetAnswer(next: AnswerChain): AnswerChain {
  return {
    head(exchange, controller, statusCode, headers, respondedAt) {
      if (exchange.host!.targetAnswered(exchange, controller, statusCode)) return;
      next.head(exchange, controller, statusCode, headers, respondedAt);
    },
    data: next.data,
    end: next.end,
  };
}
