-- 0004: what the workers need (issue 5): embedding profile lifecycle, the evaluator's quality score, decay
-- bookkeeping, dead-letter replays and consolidation runs.

-- Embedding profiles: 'active' serves search, 'building' is being filled in the background, 'standby' is kept
-- (its vectors stay) until an operator drops it. is_active stays for readers that only need the active one.
ALTER TABLE agent_memory.embedding_profiles
    ADD COLUMN IF NOT EXISTS status text NOT NULL DEFAULT 'standby'
        CONSTRAINT embedding_profiles_status_check CHECK (status IN ('active', 'building', 'standby')),
    ADD COLUMN IF NOT EXISTS base_url text,
    ADD COLUMN IF NOT EXISTS build_started_at timestamptz,
    ADD COLUMN IF NOT EXISTS build_total bigint,
    ADD COLUMN IF NOT EXISTS build_done bigint,
    ADD COLUMN IF NOT EXISTS activated_at timestamptz;
UPDATE agent_memory.embedding_profiles SET status = 'active', activated_at = created_at WHERE is_active;
ALTER TABLE agent_memory.embedding_profiles
    ADD CONSTRAINT embedding_profiles_active_status_check CHECK (is_active = (status = 'active')),
    -- the index name is derived from the id and must fit in 63 bytes
    ADD CONSTRAINT embedding_profiles_id_length_check CHECK (length(id) <= 38);
CREATE UNIQUE INDEX IF NOT EXISTS embedding_profiles_one_building
    ON agent_memory.embedding_profiles ((true)) WHERE status = 'building';

-- A profile added, cut over or dropped tells everyone listening (memory-api re-reads the active profile on this);
-- progress updates during a build do not.
CREATE OR REPLACE FUNCTION agent_memory.notify_profile() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('memento_profile', '');
    RETURN NULL;
END $$;
CREATE TRIGGER embedding_profiles_notify
    AFTER INSERT OR DELETE OR UPDATE OF status, is_active ON agent_memory.embedding_profiles
    FOR EACH STATEMENT EXECUTE FUNCTION agent_memory.notify_profile();

-- The service role owns no table, so it cannot create or drop indexes itself. These two functions run as the
-- schema owner, do exactly one thing each, and only for a caller acting as 'system' (the workers).
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
    -- Created while the profile has no vectors yet, so the build is quick; rows are then inserted into it.
    EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON agent_memory.fragment_embeddings'
                   ' USING hnsw ((embedding::vector(%s)) vector_cosine_ops) WITH (m = 16, ef_construction = 64)'
                   ' WHERE profile_id = %L', idx, dim, p_id);
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
    DELETE FROM agent_memory.fragment_embeddings WHERE profile_id = p_id;
    GET DIAGNOSTICS removed = ROW_COUNT;
    DELETE FROM agent_memory.embedding_profiles WHERE id = p_id;
    RETURN removed;
END $$;

-- The evaluator's judgement (0..1) kept apart from utility_score, which consolidation recomputes from it and
-- from use; decayed_at makes importance decay idempotent (once per interval, however often the stage runs).
ALTER TABLE agent_memory.fragments
    ADD COLUMN IF NOT EXISTS quality_score real
        CONSTRAINT fragments_quality_score_check CHECK (quality_score >= 0 AND quality_score <= 1),
    ADD COLUMN IF NOT EXISTS decayed_at timestamptz;

-- utility = quality x (1/2 + 1/2 x importance x recency x usage'), rounded to 3 decimals. recency halves every
-- half_life days since last use, counted in whole weeks, so a fragment's score moves once a week at most and a
-- daily consolidation rewrites about a seventh of the store rather than all of it; usage' = 1/2 + 1/2 x
-- min(1, ln(1+n)/ln(11)). An unevaluated fragment counts as quality 1 (seed 000 keeps utility 1.0 until judged).
CREATE OR REPLACE FUNCTION agent_memory.utility_score(
    quality real, importance real, access_count integer, last_used timestamptz, half_life_days double precision
) RETURNS real LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT round((coalesce(quality, 1.0) * (0.5 + 0.5 * importance
        * exp(-ln(2) * 7 * floor(greatest(0, extract(epoch FROM now() - last_used)) / 604800.0)
              / greatest(half_life_days, 0.001))
        * (0.5 + 0.5 * least(1.0, ln(1 + greatest(access_count, 0)) / ln(11.0)))))::numeric, 3)::real
$$;

-- Consolidation's dedup key (stage 5): the content with case, whitespace and punctuation normalised, kept with the
-- row so finding duplicates is an index scan rather than a regular expression over every row of the workspace.
ALTER TABLE agent_memory.fragments ADD COLUMN IF NOT EXISTS content_key text
    GENERATED ALWAYS AS (md5(btrim(regexp_replace(lower(content), '[[:space:][:punct:]]+', ' ', 'g')))) STORED;
CREATE INDEX IF NOT EXISTS fragments_content_key_idx
    ON agent_memory.fragments (tenant_id, workspace, agent_id, content_key);

-- Workers and recall rewrite fragments often (access counts, utility, tiers); room on each page lets the rows
-- that change no indexed column be updated in place (HOT) instead of touching all of the table's indexes.
-- Applies to pages written from now on.
ALTER TABLE agent_memory.fragments SET (fillfactor = 85);

-- Dead letters can be replayed more than once (a replay that fails again comes back here).
ALTER TABLE agent_memory.dead_letters ADD COLUMN IF NOT EXISTS replay_count integer NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS dead_letters_open_idx ON agent_memory.dead_letters (created_at) WHERE replayed_at IS NULL;

-- One row per consolidation run of a (tenant, workspace): its result, and where the next run's incremental
-- stages (contradiction candidates) start from.
CREATE TABLE IF NOT EXISTS agent_memory.consolidation_runs (
    id           bigserial PRIMARY KEY,
    tenant_id    text NOT NULL,
    workspace    text NOT NULL,
    trigger      text NOT NULL CONSTRAINT consolidation_runs_trigger_check CHECK (trigger IN ('cron', 'on_demand')),
    started_at   timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz,
    result       jsonb
);
CREATE INDEX IF NOT EXISTS consolidation_runs_scope_idx
    ON agent_memory.consolidation_runs (tenant_id, workspace, started_at DESC);
ALTER TABLE agent_memory.consolidation_runs ENABLE ROW LEVEL SECURITY;
ALTER TABLE agent_memory.consolidation_runs FORCE ROW LEVEL SECURITY;
CREATE POLICY consolidation_runs_isolation ON agent_memory.consolidation_runs
    USING (agent_memory.row_in_workspace(tenant_id, workspace))
    WITH CHECK (agent_memory.row_in_workspace(tenant_id, workspace));
