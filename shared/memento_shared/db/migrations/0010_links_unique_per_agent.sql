-- 0010: an edge was unique per (from_id, to_id) across the whole store, so an agent linking two shared `default`
-- fragments that another agent had already linked got a conflict about an edge row-level security hides from it
-- (and learned it exists). Edges are rows of the agent that made them: unique per (from_id, to_id, agent_id).
ALTER TABLE agent_memory.fragment_links
    ADD CONSTRAINT fragment_links_from_to_agent_key UNIQUE (from_id, to_id, agent_id);
ALTER TABLE agent_memory.fragment_links DROP CONSTRAINT fragment_links_from_to_key;
