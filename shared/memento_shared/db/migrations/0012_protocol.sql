-- 0012: the `protocol` dialect (seed 003, Memento Protocol). Its memories are fragments (docs/dialects.md "One store");
-- what it adds to the row: the seed's linkages (a JSON array of {type, id?, path?, label?}) and the stored relevance
-- the decay job keeps. A consolidated source is a superseded row (superseded_by names the consolidation), so every
-- dialect hides it and it stays traceable. Working memory, the skip list and identity crystals are the workspace's
-- own tables, under forced row-level security like every table.
ALTER TABLE agent_memory.fragments
    ADD COLUMN linkages jsonb NOT NULL DEFAULT '[]',
    ADD COLUMN relevance real NOT NULL DEFAULT 1.0;

-- the legacy markdown sections (memento_read / memento_update), created on a workspace's first use
CREATE TABLE agent_memory.wm_sections (
    tenant_id    text NOT NULL,
    workspace    text NOT NULL,
    section_key  text NOT NULL,
    heading      text NOT NULL,
    content      text NOT NULL DEFAULT '',
    updated_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT wm_sections_pkey PRIMARY KEY (tenant_id, workspace, section_key)
);

-- structured working-memory items (memento_item_*)
CREATE TABLE agent_memory.wm_items (
    id           text PRIMARY KEY,
    tenant_id    text NOT NULL,
    workspace    text NOT NULL,
    category     text NOT NULL CONSTRAINT wm_items_category_check
                     CHECK (category IN ('active_work', 'standing_decision', 'skip_list', 'waiting_for', 'session_note')),
    title        text NOT NULL,
    content      text NOT NULL DEFAULT '',
    status       text NOT NULL DEFAULT 'active' CONSTRAINT wm_items_status_check
                     CHECK (status IN ('active', 'paused', 'completed', 'archived')),
    priority     integer NOT NULL DEFAULT 0 CONSTRAINT wm_items_priority_check CHECK (priority BETWEEN 0 AND 10),
    tags         text[] NOT NULL DEFAULT '{}',
    next_action  text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX wm_items_list_idx ON agent_memory.wm_items (tenant_id, workspace, status, priority DESC, created_at DESC);

-- things not to do, each until it expires (memento_skip_*)
CREATE TABLE agent_memory.skip_entries (
    id          text PRIMARY KEY,
    tenant_id   text NOT NULL,
    workspace   text NOT NULL,
    item        text NOT NULL,
    reason      text NOT NULL,
    expires_at  timestamptz NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX skip_entries_scope_idx ON agent_memory.skip_entries (tenant_id, workspace, expires_at);

-- identity crystals: every update a snapshot, the newest is the identity
CREATE TABLE agent_memory.identity_snapshots (
    id            text PRIMARY KEY,
    tenant_id     text NOT NULL,
    workspace     text NOT NULL,
    crystal       text NOT NULL,
    source_count  integer NOT NULL DEFAULT 0,
    created_at    timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX identity_snapshots_scope_idx ON agent_memory.identity_snapshots (tenant_id, workspace, created_at DESC);

-- when the consolidator's decay job last stored the relevance of a workspace's memories (memento_health)
CREATE TABLE agent_memory.protocol_decay (
    tenant_id   text NOT NULL,
    workspace   text NOT NULL,
    decayed_at  timestamptz NOT NULL,
    memories    integer NOT NULL,
    CONSTRAINT protocol_decay_pkey PRIMARY KEY (tenant_id, workspace)
);

-- A workspace's own rows (0006's workspace policy, settings read once per query): every agent of the workspace
-- shares its working memory, as seed 003 keeps one per workspace.
DO $$
DECLARE
    t text;
    in_workspace text := '(SELECT agent_memory.current_access()) = ''system'''
        ' OR (tenant_id = (SELECT agent_memory.current_tenant())'
        ' AND workspace = (SELECT agent_memory.current_workspace()))';
BEGIN
    FOREACH t IN ARRAY ARRAY['wm_sections', 'wm_items', 'skip_entries', 'identity_snapshots', 'protocol_decay']
    LOOP
        EXECUTE format('ALTER TABLE agent_memory.%I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE agent_memory.%I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format('CREATE POLICY %I ON agent_memory.%I USING (%s) WITH CHECK (%s)',
                       t || '_isolation', t, in_workspace, in_workspace);
    END LOOP;
END $$;

-- Seed 003's decayed relevance without the query's term: recency (7-day half-life) × access boost (at most 2) ×
-- last-access boost (1.5 just after a use, fading towards 1 with a 48-hour half-life). The same formula as
-- memento_shared.domain.decay, which recall applies per query; the consolidator's decay job stores this one.
CREATE OR REPLACE FUNCTION agent_memory.protocol_relevance(
    created timestamptz, accesses integer, accessed timestamptz, at timestamptz
) RETURNS real LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    -- exponents capped at 120 half-lives: 0.5^120 (about 7.5e-37) still fits a real, where a memory some years old
    -- would underflow it (an error, not a zero)
    SELECT (CASE WHEN at <= created THEN 1.0
                 ELSE power(0.5::float8, least(extract(epoch FROM at - created)::float8 / 3600.0 / 168.0, 120.0)) END
          * least(2.0, 1.0 + ln(1.0 + greatest(accesses, 0)) / ln(2.0) * 0.3)
          * CASE WHEN accessed IS NULL THEN 1.0
                 WHEN at <= accessed THEN 1.5
                 ELSE 1.0 + 0.5 * power(0.5::float8,
                                        least(extract(epoch FROM at - accessed)::float8 / 3600.0 / 48.0, 120.0)) END)::real
$$;
