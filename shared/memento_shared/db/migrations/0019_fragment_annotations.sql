-- Issue 28: what a fragment says about its place and its time, written on insert (memento_shared.text.annotate) and
-- read by recall.relevance.
--   thread, seq:      the conversation or session a fragment was written in and its place there (source "D1:3" is
--                     thread "D1", place 3; otherwise the MCP session, places in write order): recall reads a hit's
--                     neighbours by this index, so an ordering needs no link row per pair.
--   event_from/_to:   the time the text is about ("yesterday", "last May"), resolved against the text's own dated
--                     header or its writing time (event_said).
--   expansion:        words searched beside the content but weighed least: the speaker, names, dates spelled out.
--   facts:            short facts an LLM drew from the text (the evaluator, when LLM_PROVIDER is set), searched the same
--                     way.
ALTER TABLE agent_memory.fragments
    ADD COLUMN thread text,
    ADD COLUMN seq bigint,
    ADD COLUMN event_from timestamptz,
    ADD COLUMN event_to timestamptz,
    ADD COLUMN event_said timestamptz,
    ADD COLUMN expansion text,
    ADD COLUMN facts text;

-- the full-text vector again, now with the expansion and the facts at weight D (a generated column cannot change its
-- expression in place)
ALTER TABLE agent_memory.fragments DROP COLUMN tsv;
ALTER TABLE agent_memory.fragments ADD COLUMN tsv tsvector GENERATED ALWAYS AS (
    setweight(to_tsvector('simple'::regconfig, coalesce(topic, '')), 'B')
    || setweight(to_tsvector('simple'::regconfig, coalesce(content, '')), 'A')
    || setweight(to_tsvector('simple'::regconfig, agent_memory.keywords_text(keywords)), 'A')
    || setweight(to_tsvector('simple'::regconfig, coalesce(expansion, '') || ' ' || coalesce(facts, '')), 'D'))
    STORED;
CREATE INDEX fragments_tsv_idx ON agent_memory.fragments USING gin (tsv);

CREATE INDEX fragments_thread_idx ON agent_memory.fragments (tenant_id, workspace, thread, seq, id)
    WHERE thread IS NOT NULL;

-- memento:vacuum agent_memory.fragments
