-- Every call of every worker, appended and never read back by a writer.
CREATE TABLE maljan_ledger (
    id               bigserial PRIMARY KEY,
    fleet_run        text,
    attempt          integer,
    writer           text NOT NULL,
    seq              bigint NOT NULL,
    job              text,
    run              text,
    step             text,
    traceparent      text,
    server           text NOT NULL,
    tool             text NOT NULL,
    arguments        jsonb NOT NULL,
    sent_arguments   jsonb,
    failed           boolean NOT NULL,
    error_code       text,
    error_message    text,
    remediation      text,
    started_at       timestamptz NOT NULL,
    duration_us      bigint NOT NULL,
    -- The whole entry as the JSON Lines ledger writes it, so readers of either store see
    -- the same entries.
    entry            jsonb NOT NULL,
    UNIQUE (writer, seq)
);

CREATE INDEX maljan_ledger_run ON maljan_ledger (run);
CREATE INDEX maljan_ledger_job ON maljan_ledger (job);
CREATE INDEX maljan_ledger_server_time ON maljan_ledger (server, started_at);
CREATE INDEX maljan_ledger_fleet_run ON maljan_ledger (fleet_run, attempt);
