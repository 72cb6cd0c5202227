-- The queue of runs: one row per sample and pack submitted; workers take rows with a lease.
CREATE TABLE maljan_runs (
    id             text PRIMARY KEY DEFAULT gen_random_uuid()::text,
    pack_origin    text NOT NULL,
    pack_text      text NOT NULL,
    sample_sha256  text NOT NULL,
    sample_name    text NOT NULL,
    state          text NOT NULL DEFAULT 'queued'
                   CHECK (state IN ('queued', 'running', 'completed', 'failed')),
    -- Times the run was taken; the number of the attempt under way.
    attempts       integer NOT NULL DEFAULT 0,
    -- Takes that a stopping worker handed back: they do not count against max_attempts.
    handed_back    integer NOT NULL DEFAULT 0,
    max_attempts   integer NOT NULL CHECK (max_attempts > 0),
    lease_owner    text,
    lease_until    timestamptz,
    submitted_at   timestamptz NOT NULL DEFAULT now(),
    finished_at    timestamptz,
    verdict        text,
    report_prefix  text,
    why            text
);

CREATE INDEX maljan_runs_waiting ON maljan_runs (submitted_at, id)
    WHERE state IN ('queued', 'running');
