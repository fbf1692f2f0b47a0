-- Issue 46: reads keep their speed while the workers digest a burst of writes.
--
-- GIN indexes add new entries to a pending list that every search scans whole until it is merged (at 4 MB by default,
-- or by autovacuum minutes later). After a burst of 1,400 new index entries on 10,000 fragments the lexical search
-- read 2.6 times the buffers it reads once they are merged (259 -> 679 a query; 8.7 -> 15.6 ms p50). With a 128 kB
-- list the writers merge it as they go: 379 buffers after the same burst against 373 merged, for writes no slower
-- (bench/README.md, "Reads while the workers digest"). Turning fastupdate off instead made each insert 2.8 ms dearer.
ALTER INDEX agent_memory.fragments_tsv_idx SET (gin_pending_list_limit = 128);
ALTER INDEX agent_memory.fragments_content_trgm_idx SET (gin_pending_list_limit = 128);
ALTER INDEX agent_memory.fragments_keywords_idx SET (gin_pending_list_limit = 128);
ALTER INDEX agent_memory.fragments_linked_to_idx SET (gin_pending_list_limit = 128);
ALTER INDEX agent_memory.doc_chunks_tsv_idx SET (gin_pending_list_limit = 128);
ALTER INDEX agent_memory.doc_chunks_text_trgm_idx SET (gin_pending_list_limit = 128);

-- The evaluator's write (quality_score, utility_score, verified_at) and the access flush's (access_count,
-- accessed_at, utility_score) change no indexed column once verified_at has no index, so Postgres can update the row
-- in place (a heap-only tuple) instead of adding an entry to every one of the table's twenty indexes, the GIN ones
-- included: each fragment stored was written into every index twice. No statement reads by verified_at (the
-- evaluator reads it per row, by id). A tenth of each new page is left free for those in-place updates.
DROP INDEX agent_memory.fragments_verified_at_idx;
ALTER TABLE agent_memory.fragments SET (fillfactor = 90);
