-- 0005: `context` loads core memory as the best fragments of a few types (anchors first, then importance, then
-- recency). Without an index in that order it sorted every fragment of those types: 0.6 s per call at a million
-- fragments. Walking this index in order stops after the first few hundred matches; the tenant and workspace
-- lead it because the row-level-security policy supplies them as equalities.
CREATE INDEX IF NOT EXISTS fragments_core_memory_idx
    ON agent_memory.fragments (tenant_id, workspace, is_anchor DESC, importance DESC, created_at DESC)
    WHERE superseded_by IS NULL;
