// Collects the assertions of one scenario and turns them into its RESULT line.
// A scenario never stops at its first mismatch: it records all of them, so one run shows
// every difference, and the line's detail names the first few.
"use strict";
const { isDeepStrictEqual, inspect } = require("node:util");

const show = (v) => inspect(v, { depth: 6, breakLength: Infinity, maxStringLength: 120 });

class Checks {
  constructor(name) {
    this.name = name;
    this.count = 0; // items whose values were compared (jobs, entries, workers)
    this.failures = [];
    this.notes = [];
    this.knownLimitation = null; // a documented peer bug this scenario reproduces
  }

  /**
   * Marks this scenario as reproducing a documented limitation of the peer (not of resq):
   * its mismatches are reported as KNOWN, and a run where they vanish is a FAIL, so the
   * matrix is revisited when the peer changes.
   */
  peerLimitation(reason) {
    this.knownLimitation = reason;
    return this;
  }

  /** Records an item as checked; returns this for chaining. */
  item(n = 1) {
    this.count += n;
    return this;
  }

  ok(label, condition, info) {
    if (!condition) this.failures.push(info === undefined ? label : `${label}: ${info}`);
    return Boolean(condition);
  }

  /** Deep value equality (JSON-shaped values; expected should already be JSON-round-tripped). */
  eq(label, actual, expected) {
    return this.ok(label, isDeepStrictEqual(actual, expected), `got ${show(actual)} want ${show(expected)}`);
  }

  /** Runs one step; a throw becomes a failure of this check group only, not of the scenario. */
  async guard(what, fn) {
    try {
      return await fn();
    } catch (e) {
      this.ok(`${what} does not throw`, false, String(e && e.message ? e.message : e).slice(0, 300));
      return undefined;
    }
  }

  /** A fact worth printing even when everything passed (timings, shapes, quirks). */
  note(text) {
    this.notes.push(text);
  }

  get pass() {
    return this.failures.length === 0 && this.count > 0;
  }

  line(peer) {
    if (this.failures.length === 0 && this.count === 0) this.failures.push("nothing was checked");
    if (this.knownLimitation) {
      const seen = this.failures.length > 0 && this.count > 0;
      const detail = seen
        ? `peer limitation: ${this.knownLimitation} (observed: ${this.failures.slice(0, 2).join("; ")})`
        : `the documented peer limitation no longer reproduces, revisit the matrix: ${this.knownLimitation}`;
      return `RESULT ${peer} ${this.name} ${seen ? "KNOWN" : "FAIL"} ${this.count} ${detail.replace(/\s+/g, " ")}`;
    }
    const parts = this.pass ? this.notes : [...this.failures.slice(0, 3), ...(this.failures.length > 3 ? [`(+${this.failures.length - 3} more)`] : []), ...this.notes];
    const detail = (parts.join("; ") || "ok").replace(/\s+/g, " ");
    return `RESULT ${peer} ${this.name} ${this.pass ? "PASS" : "FAIL"} ${this.count} ${detail}`;
  }
}

/** Returns the JSON view of a value: what any peer will see after it crosses Redis. */
const viaJson = (v) => JSON.parse(JSON.stringify(v));

module.exports = { Checks, viaJson, show };
