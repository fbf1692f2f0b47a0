-- 0011: the row every dialect shares (docs/dialects.md "Rules for every dialect"). Seed 002's memories and seed 003's are
-- fragments too: `confidence` (0-1, 1.0 unless given; older rows hold NULL, read as 1.0, so no table rewrite),
-- `supersedes` beside `superseded_by` (seed 002's Memory carries both), and the type domain widened with seed 003's
-- `observation` and `instruction` (each tool still accepts only its own seed's types). `expires_at` and
-- `updated_at` already exist; an expired row is left out of every search from now on.
ALTER TABLE agent_memory.fragments ALTER COLUMN confidence SET DEFAULT 1.0;
ALTER TABLE agent_memory.fragments ADD CONSTRAINT fragments_confidence_check
    CHECK (confidence IS NULL OR (confidence >= 0 AND confidence <= 1)) NOT VALID;
ALTER TABLE agent_memory.fragments VALIDATE CONSTRAINT fragments_confidence_check;

ALTER TABLE agent_memory.fragments DROP CONSTRAINT fragments_type_check;
ALTER TABLE agent_memory.fragments ADD CONSTRAINT fragments_type_check
    CHECK (type IN ('fact', 'decision', 'error', 'preference', 'procedure', 'relation', 'observation', 'instruction'))
    NOT VALID;
ALTER TABLE agent_memory.fragments VALIDATE CONSTRAINT fragments_type_check;

ALTER TABLE agent_memory.fragments ADD COLUMN supersedes text;
-- deleting a memory clears `supersedes` where it names it (repositories.fragments.delete): found through this index
CREATE INDEX fragments_supersedes_idx ON agent_memory.fragments (supersedes) WHERE supersedes IS NOT NULL;
