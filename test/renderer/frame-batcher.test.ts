import { describe, expect, it } from 'vitest';
import { FrameBatcher, type Scheduler } from '../../renderer/src/store/frame-batcher.ts';

function manualScheduler() {
  const frames: (() => void)[] = [];
  const timers: (() => void)[] = [];
  const scheduler: Scheduler = {
    frame: (cb) => { frames.push(cb); return () => frames.splice(frames.indexOf(cb), 1); },
    timer: (cb) => { timers.push(cb); return () => timers.splice(timers.indexOf(cb), 1); },
  };
  return { scheduler, frames, timers, frame: () => frames.splice(0).forEach((f) => f()), timer: () => timers.splice(0).forEach((f) => f()) };
}

describe('FrameBatcher', () => {
  it('hands over everything pushed between two frames as one batch', () => {
    const s = manualScheduler();
    const batches: number[][] = [];
    const b = new FrameBatcher<number>((items) => batches.push(items), s.scheduler);
    for (let i = 0; i < 500; i++) b.push([i]);
    expect(batches).toEqual([]);
    expect(s.frames).toHaveLength(1); // one frame requested, not 500
    s.frame();
    expect(batches).toHaveLength(1);
    expect(batches[0]).toHaveLength(500);
    expect(batches[0]![499]).toBe(499);
    expect(s.timers).toHaveLength(0); // the fallback timer was cancelled
  });

  it('flushes on the fallback timer when frames do not run (hidden tab)', () => {
    const s = manualScheduler();
    const batches: number[][] = [];
    const b = new FrameBatcher<number>((items) => batches.push(items), s.scheduler);
    b.push([1, 2]);
    s.timer();
    expect(batches).toEqual([[1, 2]]);
    expect(s.frames).toHaveLength(0);
  });

  it('flushes at once when the queue reaches its cap', () => {
    const s = manualScheduler();
    const batches: number[][] = [];
    const b = new FrameBatcher<number>((items) => batches.push(items), s.scheduler, 250, 100);
    b.push(Array.from({ length: 150 }, (_, i) => i));
    expect(batches.map((x) => x.length)).toEqual([150]);
    expect(b.pending).toBe(0);
  });

  it('drops its queue on dispose', () => {
    const s = manualScheduler();
    const batches: number[][] = [];
    const b = new FrameBatcher<number>((items) => batches.push(items), s.scheduler);
    b.push([1]);
    b.dispose();
    s.frame();
    s.timer();
    expect(batches).toEqual([]);
  });
});
