import { nearMiss } from '../kit/key-suggestions.js';

/** An API or a method of the catalog, as the config spells it. */
export interface CatalogEntry {
  id: string;
  name?: string | undefined;
}

/**
 * The ids of the catalog that restrictions may name, by their lower case: each API, and its methods.
 * Ids match in any case; messages spell them as the config does.
 */
export type CatalogIds = ReadonlyMap<
  string,
  { api: CatalogEntry; methods: ReadonlyMap<string, CatalogEntry> }
>;

export function catalogIds(
  apis: ReadonlyArray<CatalogEntry & { methods: readonly CatalogEntry[] }>,
): CatalogIds {
  return new Map(
    apis.map(({ methods, ...api }) => [
      api.id.toLowerCase(),
      { api, methods: new Map(methods.map((method) => [method.id.toLowerCase(), method])) },
    ]),
  );
}

/** How many ids a message lists before it says how many more there are. */
const listed = 10;

const shown = ({ id, name }: CatalogEntry) => (name ? `'${id}' (${name})` : `'${id}'`);

/**
 * What a client most likely meant by an id that names no entry of `entries`: one whose id it nearly
 * is, or whose name it nearly is (a name given where the id goes); else every id there is.
 */
function hint(given: string, entries: readonly CatalogEntry[], listName: string): string {
  const nearId = nearMiss(
    given,
    entries.map((entry) => entry.id),
  );
  const nearName = nearMiss(
    given,
    entries.flatMap((entry) => (entry.name ? [entry.name] : [])),
  );
  const meant =
    (nearId === undefined ? undefined : entries.find((entry) => entry.id === nearId)) ??
    (nearName === undefined ? undefined : entries.find((entry) => entry.name === nearName));
  if (meant) return `; did you mean ${shown(meant)}?`;
  if (entries.length === 0) return '';
  const more = entries.length > listed ? `, and ${entries.length - listed} more` : '';
  return `; ${listName}: ${entries.slice(0, listed).map(shown).join(', ')}${more}`;
}

/**
 * Why a restriction's `api` and `method`, as the client gave them, name nothing of the catalog, and
 * which of the two is wrong; undefined when they name something (or `*`).
 * @param catalogName how messages name the catalog (`the catalog`, `apis` in a config)
 */
export function referenceProblem(
  catalog: CatalogIds,
  api: string,
  method: string,
  catalogName = 'the catalog',
): { field: 'api' | 'method'; message: string } | undefined {
  if (api === '*') return undefined;
  const found = catalog.get(api.toLowerCase());
  if (!found) {
    const apis = [...catalog.values()].map((entry) => entry.api);
    return {
      field: 'api',
      message: `no API of ${catalogName} has id '${api}' (or use *)${hint(api, apis, 'the APIs')}`,
    };
  }
  if (method === '*' || found.methods.has(method.toLowerCase())) return undefined;
  const elsewhere = [...catalog.values()].find((entry) => entry.methods.has(method.toLowerCase()));
  const where = elsewhere ? `; it is a method of API ${shown(elsewhere.api)}` : '';
  return {
    field: 'method',
    message: `API '${api}' has no method with id '${method}' (or use *)${where || hint(method, [...found.methods.values()], 'its methods')}`,
  };
}
