// Names shared by the admin scenario's steps.
"use strict";

const QA = "adm_a"; // the queue the jobs go to
const QB = "adm_b"; // second queue in the slots' list, so ids carry a comma-separated list
const SLEEP_MS = 3000; // long enough to observe a busy slot

module.exports = { QA, QB, SLEEP_MS };
