-- Every embedding profile gets a partial HNSW index on document chunk vectors, as it has one on fragment vectors
-- (0016 made only the offline profile's). ensure_profile_index, which the embedder calls when it starts building a
-- profile, now makes both; drop_embedding_profile drops both. Seed 001 Part 1 sets m / ef_construction by
-- dimension: 16 / 64 for 1024-dimension vectors and above, 12 / 48 for 768-dimension ones (Jina v3); below 512 the
-- fragments' 16 / 64, as the offline profile's index already has.
CREATE OR REPLACE FUNCTION agent_memory.chunk_index_params(dim integer) RETURNS text
    LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN dim >= 512 AND dim < 1024 THEN 'm = 12, ef_construction = 48'
                ELSE 'm = 16, ef_construction = 64' END
$$;

CREATE OR REPLACE FUNCTION agent_memory.ensure_profile_index(p_id text) RETURNS text
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = agent_memory, public AS $$
DECLARE
    dim integer;
    idx text := 'fragment_embeddings_hnsw_' || p_id;
BEGIN
    IF agent_memory.current_access() <> 'system' THEN
        RAISE EXCEPTION 'ensure_profile_index needs system access';
    END IF;
    SELECT dimension INTO dim FROM agent_memory.embedding_profiles WHERE id = p_id;
    IF dim IS NULL THEN
        RAISE EXCEPTION 'unknown embedding profile %', p_id;
    END IF;
    IF dim > 2000 THEN
        RAISE EXCEPTION 'pgvector HNSW indexes vectors of at most 2000 dimensions; profile % has %', p_id, dim;
    END IF;
    -- Created while the profile has no vectors yet, so the builds are quick; rows are then inserted into them.
    EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON agent_memory.fragment_embeddings'
                   ' USING hnsw ((embedding::vector(%s)) vector_cosine_ops) WITH (m = 16, ef_construction = 64)'
                   ' WHERE profile_id = %L', idx, dim, p_id);
    EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON agent_memory.chunk_embeddings'
                   ' USING hnsw ((embedding::vector(%s)) vector_cosine_ops) WITH (%s) WHERE profile_id = %L',
                   'chunk_embeddings_hnsw_' || p_id, dim, agent_memory.chunk_index_params(dim), p_id);
    RETURN idx;
END $$;

CREATE OR REPLACE FUNCTION agent_memory.drop_embedding_profile(p_id text) RETURNS bigint
    LANGUAGE plpgsql SECURITY DEFINER SET search_path = agent_memory, public AS $$
DECLARE
    current_status text;
    removed bigint;
BEGIN
    IF agent_memory.current_access() <> 'system' THEN
        RAISE EXCEPTION 'drop_embedding_profile needs system access';
    END IF;
    SELECT status INTO current_status FROM agent_memory.embedding_profiles WHERE id = p_id FOR UPDATE;
    IF current_status IS NULL THEN
        RAISE EXCEPTION 'unknown embedding profile %', p_id;
    END IF;
    IF current_status <> 'standby' THEN
        RAISE EXCEPTION 'embedding profile % is %; only a standby profile can be dropped', p_id, current_status;
    END IF;
    EXECUTE format('DROP INDEX IF EXISTS agent_memory.%I', 'fragment_embeddings_hnsw_' || p_id);
    EXECUTE format('DROP INDEX IF EXISTS agent_memory.%I', 'chunk_embeddings_hnsw_' || p_id);
    DELETE FROM agent_memory.fragment_embeddings WHERE profile_id = p_id;
    GET DIAGNOSTICS removed = ROW_COUNT;
    DELETE FROM agent_memory.embedding_profiles WHERE id = p_id;  -- its chunk vectors go by the cascade
    RETURN removed;
END $$;

-- Profiles made before this migration: their chunk index now (few chunk vectors exist for any of them yet).
DO $$
DECLARE
    p record;
BEGIN
    FOR p IN SELECT id, dimension FROM agent_memory.embedding_profiles WHERE dimension <= 2000 LOOP
        EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON agent_memory.chunk_embeddings'
                       ' USING hnsw ((embedding::vector(%s)) vector_cosine_ops) WITH (%s) WHERE profile_id = %L',
                       'chunk_embeddings_hnsw_' || p.id, p.dimension, agent_memory.chunk_index_params(p.dimension),
                       p.id);
    END LOOP;
END $$;
