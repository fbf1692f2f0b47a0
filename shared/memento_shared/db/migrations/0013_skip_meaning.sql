-- 0013: a skip entry's vector, so memento_skip_check and memento_context match what an agent is about to do by meaning
-- as well as by words (seed 003). Kept with the profile it was computed in: a vector of another profile is recomputed
-- when next needed, never compared across profiles.
ALTER TABLE agent_memory.skip_entries
    ADD COLUMN profile_id text,
    ADD COLUMN embedding vector;
