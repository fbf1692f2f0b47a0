-- Issue 47: a search reads the caller's newest written rows (inserted or whose content was amended: updated_at) to
-- score those still without a vector in the active profile (memory-api recall.fresh). Walked newest first per agent
-- namespace, it reads a handful of index entries however large the store is.
CREATE INDEX fragments_scope_updated_idx ON agent_memory.fragments (tenant_id, workspace, agent_id, updated_at DESC);
