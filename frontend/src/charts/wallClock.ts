/**
 * Maps env steps to wall time (epoch seconds), learnt from the stream's metrics events,
 * so that the history (which has steps only) can be drawn against wall time too.
 */
export class WallClock {
  private readonly steps: number[] = [];
  private readonly times: number[] = [];

  /** Records that `step` was reached at `wallTime`. Steps arrive in increasing order;
   * one at or before the last is ignored. */
  record(step: number, wallTime: number): void {
    const last = this.steps[this.steps.length - 1];
    if (last !== undefined && step <= last) return;
    this.steps.push(step);
    this.times.push(wallTime);
  }

  get start(): number | null {
    return this.times[0] ?? null;
  }

  /** The wall time at `step`: exact, or interpolated between the nearest known steps;
   * null outside the known range. */
  at(step: number): number | null {
    const { steps, times } = this;
    if (!steps.length || step < (steps[0] as number) || step > (steps[steps.length - 1] as number)) {
      return null;
    }
    let lo = 0;
    let hi = steps.length - 1;
    while (hi - lo > 1) {
      const mid = (lo + hi) >> 1;
      if ((steps[mid] as number) <= step) lo = mid;
      else hi = mid;
    }
    const s0 = steps[lo] as number;
    const s1 = steps[hi] as number;
    const t0 = times[lo] as number;
    const t1 = times[hi] as number;
    if (step === s0) return t0;
    if (step === s1) return t1;
    return t0 + ((t1 - t0) * (step - s0)) / (s1 - s0);
  }
}
