-- How much of a reflection's support is gone, kept on the reflection: the sources it was built
-- from and how many of them were deleted since (search rows show both without reading lineage).
ALTER TABLE memories ADD COLUMN sources_total integer NOT NULL DEFAULT 0;
ALTER TABLE memories ADD COLUMN sources_deleted integer NOT NULL DEFAULT 0;
UPDATE memories r SET
    sources_total = c.total,
    sources_deleted = c.total - c.present
FROM (
    SELECT l.parent_id, count(*) AS total, count(m.id) AS present
    FROM lineage l LEFT JOIN memories m ON m.id = l.child_id
    GROUP BY l.parent_id
) c
WHERE r.id = c.parent_id;
