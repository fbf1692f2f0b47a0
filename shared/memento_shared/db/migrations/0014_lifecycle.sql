-- 0014: the `lifecycle` dialect (seed 004). Facts a turn holds are rows of the one store (fragments, with their tier
-- in `source` and their end in `expires_at`); the session's own record lives here: the turn guard (seed §7.2), the
-- turn's items as events, their daily archives once compacted, and the session's summary and bookkeeping. All of a
-- workspace (seed 004's project), under forced row-level security.
CREATE TABLE agent_memory.turn_guards (
    tenant_id   text NOT NULL,
    workspace   text NOT NULL,
    session_id  text NOT NULL,
    turn_id     text NOT NULL,
    status      text NOT NULL CONSTRAINT turn_guards_status_check CHECK (status IN ('processing', 'done')),
    claim       text NOT NULL,  -- who holds a `processing` turn: only that call may finish or release it
    updated_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT turn_guards_pkey PRIMARY KEY (tenant_id, workspace, session_id, turn_id)
);
CREATE INDEX turn_guards_session_idx ON agent_memory.turn_guards (tenant_id, workspace, session_id, updated_at DESC);

CREATE TABLE agent_memory.session_events (
    id          bigserial PRIMARY KEY,
    tenant_id   text NOT NULL,
    workspace   text NOT NULL,
    session_id  text NOT NULL,
    turn_id     text NOT NULL,
    role        text,
    item        jsonb NOT NULL,
    item_hash   text NOT NULL,
    tokens      integer NOT NULL DEFAULT 0,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX session_events_session_idx ON agent_memory.session_events (tenant_id, workspace, session_id, id DESC);

-- compacted events: one row per session and UTC day, the day's items in order
CREATE TABLE agent_memory.session_archives (
    tenant_id   text NOT NULL,
    workspace   text NOT NULL,
    session_id  text NOT NULL,
    day         date NOT NULL,
    items       jsonb NOT NULL DEFAULT '[]',
    events      integer NOT NULL DEFAULT 0,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT session_archives_pkey PRIMARY KEY (tenant_id, workspace, session_id, day)
);

CREATE TABLE agent_memory.session_meta (
    tenant_id             text NOT NULL,
    workspace             text NOT NULL,
    session_id            text NOT NULL,
    user_id               text,
    turns                 integer NOT NULL DEFAULT 0,
    last_turn_at          timestamptz,
    abstract              text,
    overview              text,
    summary_refreshed_at  timestamptz,
    maintained_at         timestamptz,
    updated_at            timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT session_meta_pkey PRIMARY KEY (tenant_id, workspace, session_id)
);

DO $$
DECLARE
    t text;
    in_workspace text := '(SELECT agent_memory.current_access()) = ''system'''
        ' OR (tenant_id = (SELECT agent_memory.current_tenant())'
        ' AND workspace = (SELECT agent_memory.current_workspace()))';
BEGIN
    FOREACH t IN ARRAY ARRAY['turn_guards', 'session_events', 'session_archives', 'session_meta']
    LOOP
        EXECUTE format('ALTER TABLE agent_memory.%I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE agent_memory.%I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format('CREATE POLICY %I ON agent_memory.%I USING (%s) WITH CHECK (%s)',
                       t || '_isolation', t, in_workspace, in_workspace);
    END LOOP;
END $$;
