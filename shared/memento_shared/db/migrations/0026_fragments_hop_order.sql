-- Issue 53: the second hop (memory-api recall.hops) reads the newest rows of a workspace that name a person and a kind
-- of thing. Its GIN index (fragments_entities_idx) cannot give them newest first: where the person is named in most of
-- a big workspace the planner walks fragments_created_at_idx instead, across every tenant's rows, and a workspace
-- whose rows are older than another tenant's read all of those first (201,371 rows and 114 ms on bench.hop_scale's
-- store). This index walks one workspace newest first and holds what the hop's conditions and row-level security
-- read (agent_id, superseded_by, expires_at, entities), so the hop picks its newest rows from the index alone and
-- reads the table only for the ones it keeps (1,368 index entries and 2.9 ms on the same store; bench/README.md).
-- Its cost: ~125 bytes a fragment (48.6 MB for 402,000, beside the table's 146), and no insert measurably slower.
CREATE INDEX fragments_hop_order_idx ON agent_memory.fragments (tenant_id, workspace, created_at DESC, id DESC)
    INCLUDE (agent_id, superseded_by, expires_at, entities);
