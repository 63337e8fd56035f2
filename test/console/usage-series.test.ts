import { describe, expect, it } from 'vitest';
import type { Catalog } from '../../src/console/logic/catalog.js';
import type { QuotaAnswer } from '../../src/console/logic/quota-form.js';
import {
  dailyLimit,
  dailySeries,
  daysOf,
  lastDays,
  type UsageRowAnswer,
} from '../../src/console/logic/usage-series.js';

/** The History view's numbers, without a browser: the series a chart draws and the limit it draws. */

const pets = 'pets-api';
const books = 'books-api';
const catalog: Catalog = {
  apis: [
    { id: pets, name: 'Pet Store', methods: [] },
    { id: books, name: 'Books', methods: [] },
  ],
  authType: 'basic',
  server: 'http://127.0.0.1:8080',
};

const row = (
  date: string,
  application: string | null,
  api: string,
  method: string | null,
  admitted: number,
  refused: number,
): UsageRowAnswer => ({
  date,
  application,
  api,
  method,
  admitted,
  refused,
  bytesIn: 0,
  bytesOut: 0,
  units: 0,
});

type Restriction = QuotaAnswer['restrictions'][number];
const messages = (
  count: number,
  config: Partial<Restriction['config']>,
  extra: Partial<Restriction> = {},
): Restriction => ({
  api: '*',
  method: '*',
  type: 'throttle',
  config: { messages: String(count), per: '1', period: 'day', ...config },
  ...extra,
});
const quotaOf = (...restrictions: Restriction[]): QuotaAnswer => ({
  id: 'q',
  type: 'APPLICATION',
  name: 'Own',
  description: '',
  system: false,
  restrictions,
});

describe('the days of a range', () => {
  it('lists every day, both ends included, across a month end and a leap day', () => {
    expect(daysOf('2028-02-28', '2028-03-01')).toEqual(['2028-02-28', '2028-02-29', '2028-03-01']);
    expect(daysOf('2026-12-31', '2027-01-01')).toEqual(['2026-12-31', '2027-01-01']);
    expect(daysOf('2026-11-30', '2026-11-29')).toEqual([]);
  });

  it('opens on the last 30 days up to today in UTC, whatever the hour', () => {
    expect(lastDays(Date.parse('2026-11-30T23:59:59Z'), 30)).toEqual({
      from: '2026-11-01',
      to: '2026-11-30',
    });
    expect(lastDays(Date.parse('2026-03-01T00:00:00Z'), 30)).toEqual({
      from: '2026-01-31',
      to: '2026-03-01',
    });
  });
});

describe('the daily series of the rows', () => {
  const range = { from: '2026-11-28', to: '2026-11-30' };

  it('sums the methods and APIs of a day, and gives 0 to a day with no row', () => {
    const rows = [
      row('2026-11-28', 'a', pets, 'get', 3, 2),
      row('2026-11-28', 'a', pets, 'add', 1, 0),
      row('2026-11-28', 'a', books, null, 4, 1),
      row('2026-11-30', 'a', pets, 'get', 7, 0),
    ];
    expect(dailySeries(rows, range)).toEqual([
      {
        application: 'a',
        days: ['2026-11-28', '2026-11-29', '2026-11-30'],
        admitted: [8, 0, 7],
        refused: [3, 0, 0],
      },
    ]);
  });

  it('keeps one API when asked (its id in any case), and one series per application, null included', () => {
    const rows = [
      row('2026-11-29', 'a', pets, 'get', 3, 2),
      row('2026-11-29', 'a', books, 'get', 5, 5),
      row('2026-11-29', null, pets, null, 1, 0),
      row('2026-11-29', 'b', books, 'get', 9, 9),
    ];
    expect(dailySeries(rows, range, 'PETS-API')).toEqual([
      { application: 'a', days: expect.any(Array), admitted: [0, 3, 0], refused: [0, 2, 0] },
      { application: null, days: expect.any(Array), admitted: [0, 1, 0], refused: [0, 0, 0] },
    ]);
  });

  it('drops rows outside the range instead of drawing them on a wrong day', () => {
    expect(dailySeries([row('2026-11-27', 'a', pets, 'get', 3, 2)], range)).toEqual([]);
  });
});

describe('the limit a daily chart draws', () => {
  it('draws the smallest enforced daily throttle on every call shown, calendar or sliding', () => {
    const limit = dailyLimit(
      quotaOf(
        messages(500, {}),
        messages(300, { window: 'calendar', timeZone: 'UTC' }),
        messages(100, {}, { mode: 'shadow' }),
      ),
      catalog,
    );
    expect(limit.drawn).toEqual({ messages: 300, text: '300 messages per calendar day (UTC)' });
    expect(limit.stated).toEqual([
      '100 messages per 1 day on every API (not drawn: it is in shadow mode: it never refuses)',
      '500 messages per 1 day on every API (not drawn: a smaller daily limit is)',
    ]);
  });

  it('states a month, an hour or seven days in words, never as a daily line', () => {
    const limit = dailyLimit(
      quotaOf(
        messages(1_000_000, { period: 'month', window: 'calendar', startDay: 15 }),
        messages(60, { period: 'hour' }),
        messages(5000, { per: '7', period: 'day' }),
      ),
      catalog,
    );
    expect(limit.drawn).toBeNull();
    expect(limit.stated).toEqual([
      '1,000,000 messages per calendar month from the 15th (UTC) on every API (not drawn: its window is not one day)',
      '60 messages per 1 hour on every API (not drawn: its window is not one day)',
      '5,000 messages per 7 days on every API (not drawn: its window is not one day)',
    ]);
  });

  it('draws a limit on the API shown only when the chart shows that API alone', () => {
    const onPets = messages(50, {}, { api: pets });
    expect(dailyLimit(quotaOf(onPets), catalog, pets).drawn).toEqual({
      messages: 50,
      text: '50 messages per 1 day',
    });
    expect(dailyLimit(quotaOf(onPets), catalog).stated).toEqual([
      '50 messages per 1 day on Pet Store › every method (not drawn: it counts part of the calls shown)',
    ]);
    expect(dailyLimit(quotaOf(onPets), catalog, books)).toEqual({
      drawn: null,
      stated: [
        '50 messages per 1 day on Pet Store › every method (not drawn: it counts part of the calls shown)',
      ],
    });
  });

  it('never draws a limit on one method, one verb, or each caller apart, nor megabytes or units', () => {
    const limit = dailyLimit(
      quotaOf(
        messages(10, {}, { api: pets, method: 'get' }),
        messages(20, {}, { verb: 'POST' }),
        messages(30, {}, { by: 'client' }),
        { api: '*', method: '*', type: 'throttlemb', config: { mb: '5', per: '1', period: 'day' } },
        { api: '*', method: '*', type: 'concurrency', config: { connections: '2' } },
      ),
      catalog,
      pets,
    );
    expect(limit.drawn).toBeNull();
    expect(limit.stated.map((text) => text.replace(/.*\(not drawn: /, ''))).toEqual([
      'it counts part of the calls shown)',
      'it counts part of the calls shown)',
      'it counts each caller apart)',
    ]);
  });
});
