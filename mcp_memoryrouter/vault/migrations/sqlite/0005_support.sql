-- How much of a reflection's support is gone, kept on the reflection: the sources it was built
-- from and how many of them were deleted since (search rows show both without reading lineage).
ALTER TABLE memories ADD COLUMN sources_total INTEGER NOT NULL DEFAULT 0;
ALTER TABLE memories ADD COLUMN sources_deleted INTEGER NOT NULL DEFAULT 0;
UPDATE memories SET
    sources_total = (SELECT count(*) FROM lineage l WHERE l.parent_id = memories.id),
    sources_deleted = (
        SELECT count(*) FROM lineage l
        WHERE l.parent_id = memories.id
          AND NOT EXISTS (SELECT 1 FROM memories m WHERE m.id = l.child_id)
    )
WHERE tier > 1;
