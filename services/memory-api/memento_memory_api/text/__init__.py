"""Text analysis only memory-api uses: the write path's annotation (place, time, names, expansion) and the date and
name extraction behind it and behind recall. What other services share (chunking, keywords, stems, tokens) stays in
memento_shared.text."""
