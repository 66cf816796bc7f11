// Who failed. A broken harness (missing state, a tool of the image that is not
// there) writes no reward and exits 3: an error of the harness. Once the
// submission is in play (clean room, scan, test room), anything that goes wrong
// is the submission's: reward 0, with the reason in grade.json.

// An error of the harness, proven independent of the submission: no reward, exit 3.
export class HarnessError extends Error {}
// Something the submission caused: reward 0 with the reason.
export class SubmissionFailure extends Error {}
