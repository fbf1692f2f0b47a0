-- 0022: every tenant table distributable by tenant_id (docs/scaling.md: Citus). A distributed PostgreSQL can enforce
-- a primary key, a unique constraint or a foreign key only when it includes the distribution column, since each is
-- checked inside one shard. Most tables had a primary key of `id` alone, links and dead letters unique constraints
-- without the tenant, and every foreign key between tenant tables joined on ids alone. Each now also names tenant_id:
-- appended last, so lookups by id (the leading column) use the same index as before, and ids (uuids, sequences) stay
-- unique as they were. Names are kept: code matches `fragments_content_hash_key` and the loader reads them.
-- tests/integration/test_distribution_catalog.py keeps it so for every table, present and future.
-- Time and locks: every primary key's index is rebuilt (one pass per table; at a million fragments a few seconds
-- each) and each foreign key is validated (a scan of the referencing table), all in the one transaction the migrator
-- runs a file in, holding ACCESS EXCLUSIVE on every table it alters until it commits: reads wait as well as writes.
-- Run it as the maintenance it is (docs/operations.md, "Deploy with Docker Compose"): the services stopped.

-- foreign keys first: they depend on the keys they reference
ALTER TABLE agent_memory.fragment_embeddings DROP CONSTRAINT fragment_embeddings_fragment_id_fkey;
ALTER TABLE agent_memory.fragment_links DROP CONSTRAINT fragment_links_from_id_fkey;
ALTER TABLE agent_memory.fragment_links DROP CONSTRAINT fragment_links_to_id_fkey;
ALTER TABLE agent_memory.fragment_versions DROP CONSTRAINT fragment_versions_fragment_id_fkey;
ALTER TABLE agent_memory.doc_versions DROP CONSTRAINT doc_versions_item_id_fkey;
ALTER TABLE agent_memory.doc_chunks DROP CONSTRAINT doc_chunks_version_fkey;
ALTER TABLE agent_memory.chunk_embeddings DROP CONSTRAINT chunk_embeddings_chunk_fkey;

-- primary keys of `id` alone (or of ids without the tenant)
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['fragments', 'fragment_links', 'tool_feedback', 'task_feedback', 'fragment_versions',
                             'outbox', 'dead_letters', 'api_keys', 'consolidation_runs', 'wm_items', 'skip_entries',
                             'identity_snapshots', 'session_events', 'doc_items', 'console_audit']
    LOOP
        EXECUTE format('ALTER TABLE agent_memory.%I DROP CONSTRAINT %I', t, t || '_pkey');
        EXECUTE format('ALTER TABLE agent_memory.%I ADD CONSTRAINT %I PRIMARY KEY (id, tenant_id)', t, t || '_pkey');
    END LOOP;
END
$$;
ALTER TABLE agent_memory.fragment_embeddings DROP CONSTRAINT fragment_embeddings_pkey,
    ADD CONSTRAINT fragment_embeddings_pkey PRIMARY KEY (fragment_id, profile_id, tenant_id);
ALTER TABLE agent_memory.doc_versions DROP CONSTRAINT doc_versions_pkey,
    ADD CONSTRAINT doc_versions_pkey PRIMARY KEY (item_id, version_num, tenant_id);
ALTER TABLE agent_memory.doc_chunks DROP CONSTRAINT doc_chunks_pkey,
    ADD CONSTRAINT doc_chunks_pkey PRIMARY KEY (item_id, version_num, chunk_index, tenant_id);
ALTER TABLE agent_memory.chunk_embeddings DROP CONSTRAINT chunk_embeddings_pkey,
    ADD CONSTRAINT chunk_embeddings_pkey PRIMARY KEY (item_id, version_num, chunk_index, profile_id, tenant_id);

-- unique constraints without the tenant
ALTER TABLE agent_memory.fragment_links DROP CONSTRAINT fragment_links_from_to_agent_key,
    ADD CONSTRAINT fragment_links_from_to_agent_key UNIQUE (from_id, to_id, agent_id, tenant_id);
ALTER TABLE agent_memory.dead_letters DROP CONSTRAINT dead_letters_event_queue_key,
    ADD CONSTRAINT dead_letters_event_queue_key UNIQUE (event_id, queue, tenant_id);

-- the foreign keys again, each carrying the tenant: a row can only point at a row of its own tenant
ALTER TABLE agent_memory.fragment_embeddings ADD CONSTRAINT fragment_embeddings_fragment_id_fkey
    FOREIGN KEY (fragment_id, tenant_id) REFERENCES agent_memory.fragments (id, tenant_id) ON DELETE CASCADE;
ALTER TABLE agent_memory.fragment_links ADD CONSTRAINT fragment_links_from_id_fkey
    FOREIGN KEY (from_id, tenant_id) REFERENCES agent_memory.fragments (id, tenant_id) ON DELETE CASCADE;
ALTER TABLE agent_memory.fragment_links ADD CONSTRAINT fragment_links_to_id_fkey
    FOREIGN KEY (to_id, tenant_id) REFERENCES agent_memory.fragments (id, tenant_id) ON DELETE CASCADE;
ALTER TABLE agent_memory.fragment_versions ADD CONSTRAINT fragment_versions_fragment_id_fkey
    FOREIGN KEY (fragment_id, tenant_id) REFERENCES agent_memory.fragments (id, tenant_id) ON DELETE CASCADE;
ALTER TABLE agent_memory.doc_versions ADD CONSTRAINT doc_versions_item_id_fkey
    FOREIGN KEY (item_id, tenant_id) REFERENCES agent_memory.doc_items (id, tenant_id) ON DELETE CASCADE;
ALTER TABLE agent_memory.doc_chunks ADD CONSTRAINT doc_chunks_version_fkey
    FOREIGN KEY (item_id, version_num, tenant_id) REFERENCES agent_memory.doc_versions (item_id, version_num, tenant_id)
    ON DELETE CASCADE;
ALTER TABLE agent_memory.chunk_embeddings ADD CONSTRAINT chunk_embeddings_chunk_fkey
    FOREIGN KEY (item_id, version_num, chunk_index, tenant_id)
    REFERENCES agent_memory.doc_chunks (item_id, version_num, chunk_index, tenant_id) ON DELETE CASCADE;
