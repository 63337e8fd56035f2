import { amountText, durationText, fillOf, windowText, type UsageUnit } from '../logic/format.js';
import { sparklinePoints } from '../logic/sparkline.js';
import { h, replace } from './dom.js';

/**
 * `<qg-usage-bar>`: a counter against its limit, as a bar that turns amber past 80 % and red when full,
 * with the numbers and the time until the oldest units leave the window.
 * Property: `usage`.
 */
export interface BarUsage {
  used: number;
  limit: number;
  unit: UsageUnit;
  /** 0 for requests in flight, which no window holds. */
  windowSeconds: number;
  resetSeconds: number;
  /** Whose usage it is (an application's name), when the bar needs saying. */
  label?: string;
}

export class UsageBar extends HTMLElement {
  set usage(usage: BarUsage) {
    const { percent, level } = fillOf(usage.used, usage.limit);
    const fill = h('span', { class: `fill ${level}` });
    fill.style.width = `${percent}%`;
    const track = h('span', {
      class: 'track',
      role: 'meter',
      'aria-valuemin': 0,
      'aria-valuemax': usage.limit,
      'aria-valuenow': usage.used,
      'aria-label': usage.label ?? 'usage',
    });
    track.appendChild(fill);
    const inFlight = usage.unit === 'concurrent-requests';
    const leaves = inFlight
      ? 'each freed as its request ends'
      : usage.used > 0
        ? `oldest leave the window in ${durationText(usage.resetSeconds)}`
        : 'nothing counted in the window';
    const numbers = inFlight ? usedText(usage) : `${usedText(usage)} per ${windowText(usage.windowSeconds)}`;
    replace(
      this,
      usage.label ? h('span', { class: 'who', text: usage.label }) : null,
      track,
      h('span', { class: 'numbers', text: numbers }),
      h('span', { class: 'reset', text: leaves }),
    );
    this.dataset.level = level;
    this.dataset.used = String(usage.used);
  }
}

/** "24 of 60 messages", "943 bytes of 10.2 KB", "2 of 5 requests in flight". */
function usedText({ used, limit, unit }: BarUsage): string {
  const counted =
    unit === 'messages' || unit === 'concurrent-requests'
      ? used.toLocaleString('en-US')
      : amountText(used, unit);
  return `${counted} of ${amountText(limit, unit)}`;
}

const svgNs = 'http://www.w3.org/2000/svg';

/**
 * `<qg-sparkline>`: rejections per bucket over the last minutes, oldest first, with the total beside it;
 * for a shadow restriction, the rejections it would have made.
 * Properties: `series = { counts, bucketSeconds, shadow }`.
 */
export class Sparkline extends HTMLElement {
  set series({
    counts,
    bucketSeconds,
    shadow,
  }: {
    counts: number[];
    bucketSeconds: number;
    shadow: boolean;
  }) {
    const width = 120;
    const height = 24;
    const total = counts.reduce((sum, count) => sum + count, 0);
    const minutes = Math.round((counts.length * bucketSeconds) / 60);
    const svg = document.createElementNS(svgNs, 'svg');
    svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
    svg.setAttribute('width', String(width));
    svg.setAttribute('height', String(height));
    svg.setAttribute('aria-hidden', 'true');
    const line = document.createElementNS(svgNs, 'polyline');
    line.setAttribute('points', sparklinePoints(counts, width, height - 2));
    line.setAttribute('class', total > 0 ? 'rejections' : 'rejections none');
    svg.appendChild(line);
    replace(
      this,
      svg,
      h('span', {
        class: 'total',
        text: `${total.toLocaleString('en-US')} ${shadow ? 'would have been rejected' : 'rejected'} in the last ${minutes} min`,
      }),
    );
    this.title = shadow
      ? `Requests this shadow restriction would have rejected (each went through), per ${bucketSeconds} s`
      : `Requests rejected by this restriction, per ${bucketSeconds} s`;
    this.dataset.total = String(total);
  }
}

customElements.define('qg-usage-bar', UsageBar);
customElements.define('qg-sparkline', Sparkline);
