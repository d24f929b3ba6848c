"""DisjointSets: joined items share a representative, others do not."""

from telemetry.unionfind import DisjointSets


def test_joined_items_share_a_representative_and_others_do_not() -> None:
    s = DisjointSets(6)
    s.union(0, 1)
    s.union(2, 1)
    s.union(4, 5)
    groups: dict[int, list[int]] = {}
    for i in range(6):
        groups.setdefault(s.find(i), []).append(i)
    assert sorted(groups.values()) == [[0, 1, 2], [3], [4, 5]]
