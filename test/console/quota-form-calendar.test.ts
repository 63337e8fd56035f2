import { describe, expect, it } from 'vitest';
import { dtoOf, formOf, type QuotaAnswer } from '../../src/console/logic/quota-form.js';
import { limitText } from '../../src/console/logic/restriction-text.js';

const quota: QuotaAnswer = {
  id: '3f0c5a1e-9b7d-4c2a-8e6f-1d0b9a8c7e6f',
  type: 'API',
  name: 'Monthly',
  description: '',
  system: false,
  restrictions: [],
};

describe('the quota form, for a calendar window', () => {
  it('keeps a calendar window, its time zone and billing day, through the form, and says it in words', () => {
    const monthly = {
      api: '*',
      method: '*',
      type: 'throttle' as const,
      config: {
        messages: '1000',
        per: '1',
        period: 'month',
        window: 'calendar' as const,
        timeZone: 'America/New_York',
        startDay: 15,
      },
    };
    const form = formOf({ ...quota, restrictions: [monthly] });
    expect(form.restrictions[0]).toMatchObject({
      window: 'calendar',
      timeZone: 'America/New_York',
      startDay: '15',
    });
    expect(dtoOf(form).restrictions).toEqual([monthly]);
    expect(limitText(monthly)).toBe('1,000 messages per calendar month from the 15th (America/New_York)');
    const daily = {
      ...monthly,
      config: { messages: '1', per: '1', period: 'day', window: 'calendar' as const },
    };
    expect(dtoOf(formOf({ ...quota, restrictions: [daily] })).restrictions).toEqual([daily]);
    expect(limitText(daily)).toBe('1 message per calendar day (UTC)');
    // Back to sliding, the calendar's fields are left out.
    const sliding = dtoOf({ ...form, restrictions: [{ ...form.restrictions[0]!, window: 'sliding' }] });
    expect(sliding.restrictions).toEqual([
      { ...monthly, config: { messages: '1000', per: '1', period: 'month' } },
    ]);
  });
});
