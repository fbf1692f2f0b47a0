-- 0015: the `documents` dialect (seed 001): canonical documents with versions and structure-preserving chunks.
-- A write is one transaction: the item, its new version (only when the content changed) and its chunks with their
-- full-text vectors; a key's first answer is kept so the same request again answers the same and writes nothing.
-- All of a workspace, under forced row-level security.
CREATE TABLE agent_memory.doc_items (
    id             text PRIMARY KEY,
    tenant_id      text NOT NULL,
    workspace      text NOT NULL,
    kind           text NOT NULL CONSTRAINT doc_items_kind_check
                       CHECK (kind IN ('spec', 'plan', 'decision', 'troubleshooting', 'note')),
    title          text NOT NULL,
    canonical_key  text,
    doc_class      text CONSTRAINT doc_items_doc_class_check
                       CHECK (doc_class IN ('app_spec', 'feature_spec', 'implementation_plan')),
    is_canonical   boolean NOT NULL DEFAULT false,
    status         text NOT NULL DEFAULT 'active' CONSTRAINT doc_items_status_check
                       CHECK (status IN ('active', 'archived')),
    pinned         boolean NOT NULL DEFAULT false,
    tags           text[] NOT NULL DEFAULT '{}',
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX doc_items_canonical_key_idx ON agent_memory.doc_items (tenant_id, workspace, canonical_key)
    WHERE canonical_key IS NOT NULL;
CREATE INDEX doc_items_scope_idx ON agent_memory.doc_items (tenant_id, workspace, pinned DESC, updated_at DESC);

CREATE TABLE agent_memory.doc_versions (
    tenant_id     text NOT NULL,
    workspace     text NOT NULL,
    item_id       text NOT NULL REFERENCES agent_memory.doc_items (id) ON DELETE CASCADE,
    version_num   integer NOT NULL,
    content       text NOT NULL,
    content_hash  text NOT NULL,
    commit_id     text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT doc_versions_pkey PRIMARY KEY (item_id, version_num)
);

CREATE TABLE agent_memory.doc_chunks (
    tenant_id       text NOT NULL,
    workspace       text NOT NULL,
    item_id         text NOT NULL,
    version_num     integer NOT NULL,
    chunk_index     integer NOT NULL,
    text            text NOT NULL,
    heading_path    text[] NOT NULL DEFAULT '{}',
    anchor          text NOT NULL,
    start_char      integer NOT NULL,
    end_char        integer NOT NULL,
    token_estimate  integer NOT NULL,
    tsv             tsvector GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, text)) STORED,
    CONSTRAINT doc_chunks_pkey PRIMARY KEY (item_id, version_num, chunk_index),
    CONSTRAINT doc_chunks_version_fkey FOREIGN KEY (item_id, version_num)
        REFERENCES agent_memory.doc_versions (item_id, version_num) ON DELETE CASCADE
);
CREATE INDEX doc_chunks_tsv_idx ON agent_memory.doc_chunks USING gin (tsv);

-- a write's idempotency key: the request it answered (by hash) and its answer
CREATE TABLE agent_memory.doc_commits (
    tenant_id        text NOT NULL,
    workspace        text NOT NULL,
    idempotency_key  text NOT NULL,
    tool             text NOT NULL,
    request_hash     text NOT NULL,
    answer           jsonb NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT doc_commits_pkey PRIMARY KEY (tenant_id, workspace, idempotency_key)
);

DO $$
DECLARE
    t text;
    in_workspace text := '(SELECT agent_memory.current_access()) = ''system'''
        ' OR (tenant_id = (SELECT agent_memory.current_tenant())'
        ' AND workspace = (SELECT agent_memory.current_workspace()))';
BEGIN
    FOREACH t IN ARRAY ARRAY['doc_items', 'doc_versions', 'doc_chunks', 'doc_commits']
    LOOP
        EXECUTE format('ALTER TABLE agent_memory.%I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE agent_memory.%I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format('CREATE POLICY %I ON agent_memory.%I USING (%s) WITH CHECK (%s)',
                       t || '_isolation', t, in_workspace, in_workspace);
    END LOOP;
END $$;
