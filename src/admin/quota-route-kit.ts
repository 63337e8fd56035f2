import type { FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { ApplicationDirectory } from '../applications/application-directory.js';
import { applicationOf } from '../applications/application-ids.js';
import type { Identification } from '../auth/authenticator.js';
import { ApplicationNames } from '../config/application-names.js';
import type { LiveConfig } from '../config/live-config.js';
import type { RejectionSource } from '../observe/rejection-history.js';
import {
  wellKnownQuotaIds,
  wellKnownQuotas,
  type Quota,
  type QuotaDto,
  type QuotaType,
  type StoredQuota,
} from '../quota/model.js';
import { isPlan, membersByPlan } from '../quota/plans.js';
import type { QuotaRepository, RefusedQuota } from '../quota/quota-repository.js';
import { catalogIds, type CatalogIds } from '../quota/catalog-references.js';
import type { QuotaUsage } from '../quota/quota-usage.js';
import { AdminError, errorResponses } from './admin-errors.js';
import { requiredEtag, setEtag } from './entity-tags.js';

export interface QuotaRoutesParts {
  /** The config in force: restrictions must name APIs and methods of its catalog. */
  live: LiveConfig;
  repository: QuotaRepository;
  usage: (quotaId: string) => Promise<QuotaUsage | null>;
  rejections: RejectionSource;
  /** The clock the rejection histories are kept by. */
  now?: () => number;
  /** The applications made through the portal API: they may have quotas too. */
  made: ApplicationDirectory;
  /** What the scheme's directory says a name stands for (ldap); undefined where the scheme cannot tell. */
  identify?: (name: string) => Promise<Identification> | undefined;
}

const etagHeader = {
  ETag: { type: 'string', description: 'The entity tag of the quota, for If-Match on PUT and DELETE' },
};
/** A quota answered with its ETag (and, for `extra`, more response fields). */
export const quotaAnswer = (description: string, extra: Record<string, unknown> = {}) => ({
  description,
  headers: { ...etagHeader, ...extra },
  $ref: 'Quota#',
});
/** The path a created quota is read at, for the `Location` of a 201. */
export const quotaLocation = (id: string) => `/api/portal/v1.3/quotas/${id}`;
/** The `Location` field of a 201 that created a quota, for the OpenAPI document. */
export const createdQuotaLocation = {
  Location: { type: 'string', description: 'The path of the created quota' },
};
export const quotaResponse = (status: number, description: string, extra: Record<string, unknown> = {}) => ({
  [status]: quotaAnswer(description, extra),
  ...errorResponses,
});
/** `If-Match` of PUT and DELETE (other fields pass through untouched). */
export const ifMatchHeaders = z.looseObject({
  'if-match': z
    .string()
    .optional()
    .meta({ description: 'The ETag the quota must still have (412 otherwise); * or none to skip' }),
});

/** What a write acts on: a stored quota, or a stored definition the quota schema refuses. */
export interface WriteTarget {
  id: string;
  /** The ETag a client's If-Match is compared with: the one its read was answered with. */
  etag: string;
  /** The ETag of the stored record, which the store compares (an application on a plan: the membership's). */
  storedEtag: string;
  system: boolean;
  /** The type the quota must keep, if any: the well-known quotas' and applications' own quotas'. */
  keepsType?: QuotaType;
  /** A well-known quota's description, kept by a PUT that sends none (clients send only restrictions). */
  keepsDescription?: string;
}

const wellKnownTypes = new Map(wellKnownQuotas().map((record) => [record.quota.id, record.quota.type]));

/** The answer to a read of a stored definition the quota schema refuses. */
export const unreadable = (refused: RefusedQuota) =>
  new AdminError(
    500,
    [
      `quota '${refused.id}' is stored in a form this gateway refuses (${refused.problems.join('; ')}); PUT a valid quota to replace it, or DELETE it`,
    ],
    { etag: `"${refused.etag}"` },
  );

export type IdRequest = FastifyRequest<{ Params: { id: string } }>;

export function requireAdmin(request: FastifyRequest): void {
  if (request.adminUser?.role !== 'admin')
    throw new AdminError(403, ['only an API Administrator may do this']);
}

/**
 * What the quota routes and the applications' quota routes share: the catalog and application names in
 * force (a reload changes them), how a stored quota is found, answered and written.
 */
export class QuotaRouteKit {
  readonly repository: QuotaRepository;
  /** The catalog restrictions must name, as of the config in force. */
  catalog: CatalogIds;
  names: ApplicationNames;

  constructor(readonly parts: QuotaRoutesParts) {
    const { live } = parts;
    this.repository = parts.repository;
    this.catalog = catalogIds(live.config.apis);
    this.names = new ApplicationNames(live.config.applications, parts.made);
    live.onChange(({ config }) => {
      this.catalog = catalogIds(config.apis);
      this.names = new ApplicationNames(config.applications, parts.made);
    });
  }

  /** A quota declared in conf/ changes there, never through the API: no reload could undo a change then. */
  requireUndeclared(id: string): void {
    const at = this.parts.live.config.quotas.findIndex((declared) => declared.id === id);
    if (at !== -1)
      throw new AdminError(403, [
        `quota '${id}' is declared in conf/ (quotas[${at}]): change it there and reload (gateway reload)`,
      ]);
  }

  /**
   * A quota as answered: an application's own quota names the application, and a plan says how many
   * applications are on it (`members`, counted once for a whole list).
   */
  shown(record: StoredQuota, members = membersByPlan(this.repository.all())) {
    const { quota, application } = record;
    return {
      ...quota,
      ...(application ? { application: { id: application, name: this.names.nameOf(application) } } : {}),
      ...(this.parts.live.config.quotas.some((declared) => declared.id === quota.id)
        ? { declared: true }
        : {}),
      ...(isPlan(record) ? { applicationCount: members.get(quota.id) ?? 0 } : {}),
    };
  }

  build(dto: QuotaDto, id: string, system: boolean): Quota {
    return {
      id,
      type: dto.type,
      name: dto.name,
      description: dto.description,
      restrictions: dto.restrictions,
      ...(dto.thresholds === undefined ? {} : { thresholds: dto.thresholds }),
      system,
    };
  }

  refusedWith(match: (refused: RefusedQuota) => boolean): RefusedQuota | undefined {
    return this.repository.refused().find(match);
  }

  /** What is stored under this id: a quota, or a definition the schema refuses; 404 when neither. */
  storedAs(id: string): { record: StoredQuota } | { refused: RefusedQuota } {
    const key = id.toLowerCase();
    const refused = this.refusedWith((candidate) => candidate.id === key);
    if (refused) return { refused };
    const record = this.repository.get(key);
    // The record that puts an application on a plan is the application's, not a quota of the list.
    if (!record || record.plan !== undefined) throw new AdminError(404, [`no quota with id '${id}'`]);
    return { record };
  }

  /** The quota with this id, to read: a stored definition the schema refuses is a 500 that says so. */
  found(id: string): StoredQuota {
    const stored = this.storedAs(id);
    if ('refused' in stored) throw unreadable(stored.refused);
    return stored.record;
  }

  targetOf(record: StoredQuota): WriteTarget {
    const { quota } = record;
    return {
      id: quota.id,
      etag: record.etag,
      storedEtag: record.etag,
      system: quota.system,
      ...(quota.system || record.application ? { keepsType: quota.type } : {}),
      ...(quota.system && quota.description !== undefined ? { keepsDescription: quota.description } : {}),
    };
  }

  refusedTarget(refused: RefusedQuota): WriteTarget {
    const keepsType = wellKnownTypes.get(refused.id) ?? (refused.application ? 'APPLICATION' : undefined);
    return {
      id: refused.id,
      etag: refused.etag,
      storedEtag: refused.etag,
      system: wellKnownQuotaIds.has(refused.id),
      ...(keepsType ? { keepsType } : {}),
    };
  }

  /** The quota with this id, to replace or delete: a stored definition the schema refuses is one too. */
  writable(id: string): WriteTarget {
    const stored = this.storedAs(id);
    return 'refused' in stored ? this.refusedTarget(stored.refused) : this.targetOf(stored.record);
  }

  answer(reply: FastifyReply, record: StoredQuota, status = 200) {
    setEtag(reply, record);
    return reply.code(status).send(this.shown(record));
  }

  /** The If-Match a write passes to the store: the stored ETag when the client's matched its read. */
  storedIfMatch(request: FastifyRequest, target: WriteTarget): string | undefined {
    return requiredEtag(request, target) === undefined ? undefined : target.storedEtag;
  }

  /**
   * The application `id` names, as principals carry it. With ldap that is the directory's identity of the
   * entry `id` names (a login name or a DN): a quota kept under any other spelling would match no one.
   */
  async application(id: string): Promise<string> {
    const named = applicationOf(this.parts.live.config, id, this.parts.made);
    if (!named) throw new AdminError(404, [`no application with id '${id}'`]);
    const asked = named.byIdentity ? this.parts.identify?.(named.id) : undefined;
    if (!asked) return named.id;
    const identification = await asked;
    if (identification === 'unavailable')
      throw new AdminError(503, ['the directory did not answer: which caller this names cannot be told']);
    if ('unknown' in identification) throw new AdminError(404, [identification.unknown]);
    return identification.identity;
  }

  /**
   * The application `id` names, to read or take away its quota: as `application` finds it, else, when
   * nothing answers to `id` any more (an application dropped from conf/, an LDAP entry gone from the
   * directory), the one whose quota is stored under exactly `id`, so that it can still be taken off its
   * plan and the plan deleted.
   */
  async applicationOrLeaver(id: string): Promise<string> {
    try {
      return await this.application(id);
    } catch (error) {
      const stored =
        this.repository.ofApplication(id) ?? this.refusedWith((candidate) => candidate.application === id);
      if (error instanceof AdminError && error.status === 404 && stored) return id;
      throw error;
    }
  }
}
