import { describe, expect, it } from 'vitest';
import { KnownRooms } from '../../src/limiter/known-rooms.js';

describe('the room a process knows of on a byte counter', () => {
  it('takes every passing byte from the room its admission left, and is full once they reach it', () => {
    const rooms = new KnownRooms<string>();
    const room = rooms.join('a', 'k', 1_000, 400);
    expect(room.allowance).toBe(600);
    expect(rooms.passed(room, 599)).toBe(false);
    expect(rooms.passed(room, 1)).toBe(true);
    expect(rooms.full(room)).toBe(true);
  });

  it('is shared by the exchanges on one counter: their bytes together fill it', () => {
    const rooms = new KnownRooms<string>();
    const first = rooms.join('a', 'k', 1_000, 0);
    const same = rooms.join('b', 'k', 1_000, 0);
    expect(same).toBe(first);
    expect(rooms.passed(first, 500)).toBe(false);
    expect(rooms.passed(same, 500)).toBe(true);
    expect([...first.members]).toEqual(['a', 'b']);
  });

  it('keeps the room across a charge sent, and takes the answer as the counter total, the bytes since kept', () => {
    const rooms = new KnownRooms<string>();
    const room = rooms.join('a', 'k', 1_000, 100);
    rooms.passed(room, 300);
    rooms.charging(room, 300, 300);
    // Nothing answered yet: the bytes count as unanswered, the room is what it was.
    expect(room.allowance - room.uncharged).toBe(600);
    rooms.passed(room, 50);
    // The store counted 250 more than this process knew of (another gateway's, or the window moved).
    rooms.answered(room, 300, 650, 1_000);
    expect(room.allowance).toBe(350);
    expect(room.uncharged).toBe(50);
    expect(rooms.full(room)).toBe(false);
  });

  it('counts a refused charge given as its total, and one without an answer as added', () => {
    const rooms = new KnownRooms<string>();
    const room = rooms.join('a', 'k', 1_000, 900);
    rooms.passed(room, 200);
    rooms.charging(room, 200, 200);
    rooms.answered(room, 200, 1_100, 1_000);
    expect(room.allowance).toBe(-100);
    rooms.charging(room, 0, 30);
    rooms.answered(room, 30, null, 1_000);
    expect(room.total).toBe(1_130);
    expect(rooms.passed(room, 1)).toBe(true);
  });

  it('keeps the room it knew when the store could not decide a charge: its bytes are counted nowhere', () => {
    const rooms = new KnownRooms<string>();
    const room = rooms.join('a', 'k', 1_000, 400);
    rooms.passed(room, 600);
    rooms.charging(room, 600, 600);
    rooms.undecided(room, 600);
    // Another allowance of bytes passes before the next charge, not the next chunk.
    expect(room.total).toBe(400);
    expect(room.allowance).toBe(600);
    expect(rooms.passed(room, 599)).toBe(false);
  });

  it('gives each live gateway its share of the room it knows of', () => {
    let live = 2;
    const rooms = new KnownRooms<string>(() => live);
    const room = rooms.join('a', 'k', 1_000, 200);
    expect(room.allowance).toBe(400);
    live = 4;
    rooms.charging(room, 0, 0);
    expect(room.allowance).toBe(200);
  });

  it('adds what a leaving exchange moved uncharged, and forgets a room no exchange is on', () => {
    const rooms = new KnownRooms<string>();
    const room = rooms.join('a', 'k', 1_000, 0);
    rooms.join('b', 'k', 1_000, 0);
    rooms.passed(room, 300);
    rooms.leave(room, 'a', 300, 300);
    expect(room.total).toBe(300);
    expect(room.uncharged).toBe(0);
    expect(room.allowance).toBe(700);
    expect(rooms.size).toBe(1);
    rooms.leave(room, 'b', 0, 0);
    expect(rooms.size).toBe(0);
    expect(rooms.join('c', 'k', 1_000, 50).allowance).toBe(950);
  });

  it('brings a room up to the total a later admission saw', () => {
    const rooms = new KnownRooms<string>();
    const room = rooms.join('a', 'k', 1_000, 100);
    rooms.passed(room, 100);
    rooms.join('b', 'k', 1_000, 500);
    expect(room.allowance - room.uncharged).toBe(400);
    // An admission that said nothing of the counter (a policy admitted it) leaves it as it was.
    rooms.join('c', 'k', 1_000, null);
    expect(room.total).toBe(500);
  });
});
