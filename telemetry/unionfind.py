"""Disjoint sets over the integers 0..n-1 (union-find with path halving): which items end up
connected once pairs of them are joined. Used to group findings into incidents and scalable units
into the components a fabric layer joins."""

from __future__ import annotations


class DisjointSets:
    def __init__(self, n: int) -> None:
        self.parent = list(range(n))

    def find(self, i: int) -> int:
        """The representative of i's set (the same for every member)."""
        parent = self.parent
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def union(self, i: int, j: int) -> None:
        """Join i's set into j's."""
        self.parent[self.find(i)] = self.find(j)
