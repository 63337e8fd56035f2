import { normalizeTarget } from '../../kit/normalize-path.js';
import { refuse } from '../answers/refusal.js';
import { callRefusal, upgradeRefusal, versionRefusal, type EdgeRefusal } from '../edge/http1.js';
import { screeningProblem } from '../edge/request-screening.js';
import type { ExchangeRecord } from '../record.js';
import type { StepContext } from './context.js';

const refuseFor = (record: ExchangeRecord, refusal: EdgeRefusal): false => {
  refuse(record, refusal.code, refusal.fields, refusal.detail);
  return false;
};

/**
 * Step 2: screens and normalizes the target, then matches it: the usage path, or the catalog (404, or
 * 405 to a verb no method of a declared path takes). Sets the record's routed path and upstream target;
 * `req.url` is left as the client sent it.
 */
export function route(context: StepContext, record: ExchangeRecord): boolean {
  const { req, ruleSet } = record;
  const target = normalizeTarget(req.url ?? '', req.headers.host);
  const problem = target.ok ? screeningProblem(req, target.query) : target.reason;
  if (!target.ok || problem) {
    context.logger.debug({ requestId: record.id, reason: problem }, 'request refused before routing');
    refuse(record, 'bad_request');
    return false;
  }
  const upgrade = upgradeRefusal(record);
  if (upgrade) return refuseFor(record, upgrade);
  const verb = req.method ?? 'GET';
  if (ruleSet.usage?.is(target.segments)) {
    // As for a routed request, authentication (a plugin's matchURL) sees the path it reached.
    record.routedPath = ruleSet.usage.path + target.query;
    record.readsUsage = true;
    if (verb === 'GET' || verb === 'HEAD') return true;
    refuse(record, 'method_not_allowed', ['allow', 'GET, HEAD']);
    return false;
  }
  const match = ruleSet.router.match(verb, target.segments, target.trailingSlash, target.query);
  if (!match) {
    refuse(record, 'not_found');
    return false;
  }
  record.route = match;
  record.routedPath = match.path;
  record.upstreamTarget = match.upstreamTarget;
  const version = versionRefusal(record, match.api);
  if (version) return refuseFor(record, version);
  if (!match.method && !match.api.config.passUndeclared) {
    // Only declared operations are exposed: another path is 404, another verb of a declared path 405.
    const allowed = ruleSet.router.allowedVerbs(match);
    if (allowed.length === 0) refuse(record, 'not_found');
    else refuse(record, 'method_not_allowed', ['allow', allowed.join(', ')]);
    return false;
  }
  const call = callRefusal(record, match.api, context.proxy.proxyTimeout);
  return call ? refuseFor(record, call) : true;
}
