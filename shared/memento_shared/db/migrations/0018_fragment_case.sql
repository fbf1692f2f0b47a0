-- Seed 000 as its reference project now has it. `caseId` on remember (the task or case a fragment belongs to), a
-- recall filter that reads this index within the caller's namespace.
ALTER TABLE agent_memory.fragments ADD COLUMN case_id text;
CREATE INDEX fragments_case_idx ON agent_memory.fragments (tenant_id, workspace, case_id) WHERE case_id IS NOT NULL;

-- fragment_history walks the supersede chain backwards (what a fragment replaced): superseded_by = its id
CREATE INDEX fragments_superseded_by_idx ON agent_memory.fragments (superseded_by) WHERE superseded_by IS NOT NULL;

-- keywords the caller gave (remember's or amend's `keywords`) survive an amend of the content; extracted ones are
-- extracted again from the new content
ALTER TABLE agent_memory.fragments ADD COLUMN keywords_given boolean NOT NULL DEFAULT false;
