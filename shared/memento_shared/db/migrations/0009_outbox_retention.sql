-- 0009: published outbox rows were kept for ever. The relay now deletes those published longer ago than
-- OUTBOX_RETENTION_HOURS, oldest first in small batches; a BRIN index on created_at (rows arrive in time order)
-- is there to find them without scanning the table (while most rows qualify the planner still prefers a sequential
-- scan: bench/README.md, eleventh pass) and costs next to nothing per insert.
CREATE INDEX IF NOT EXISTS outbox_created_brin ON agent_memory.outbox USING brin (created_at);
