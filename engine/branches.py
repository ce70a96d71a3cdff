"""Every continuation a session has taken, kept as a tree of steps: its branches. Imports no torch.

A node is one step: a StepRecord, whose ``chosen`` token the next step reads. A prefill node hangs
from ``ROOT`` (the prompt); a decode step's node hangs from the step before it. Two children of one
node never hold the same chosen token, so taking a token already taken at that step (a click, a
re-draw, Back then Step) returns to its node and keeps everything below it, and taking another one
adds a sibling: the earlier continuation stays as a branch. Siblings come from the same forward pass
and share its arrays, so a branch costs memory only from its split on.

A *branch* is the path from the prompt to a leaf. Memory is bounded: when the nodes off the
current path hold more than ``budget_bytes`` of arrays, whole branches are dropped, the one visited
longest ago first, down to the node where they split from a branch that stays (``dropped`` counts
the nodes dropped). The current path is never dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import cached_property

import numpy as np

from .sampling import model_logprob
from .trace import StepRecord

ROOT = -1  # the prompt: the parent of every prefill node
BRANCH_BUDGET_BYTES = 1 << 30  # arrays kept for steps off the current branch (about 2,400 steps of GPT-2 small at 500 positions)


@dataclass(frozen=True)
class BranchTable:
    """The tree for drawing and comparing, without any StepRecord (it crosses to the window).

    N nodes in the order they were made: ids, parents (ROOT for a prefill), steps, tokens int64 [N];
    logprobs float64 [N], the log of the model's probability of each node's token given its path
    (``model_logprob``); chosen_by: "greedy", "sampled" or "user" per node; pieces: each token's text.
    current: the node on screen (ROOT before the prefill); path: the ids from the prefill to
    ``current``; dropped: nodes dropped so far to keep within the memory budget.
    """

    ids: np.ndarray
    parents: np.ndarray
    steps: np.ndarray
    tokens: np.ndarray
    logprobs: np.ndarray
    chosen_by: tuple[str, ...]
    pieces: tuple[str, ...]
    current: int
    path: tuple[int, ...]
    dropped: int = 0

    def __len__(self) -> int:
        return len(self.ids)

    # Lookups built once per table, on first use (the window reads a table many times; a tree of
    # thousands of nodes must not be scanned once per row).
    @cached_property
    def _rows(self) -> dict[int, int]:
        return {int(node): row for row, node in enumerate(self.ids.tolist())}

    @cached_property
    def _children(self) -> dict[int, list[int]]:
        children: dict[int, list[int]] = {}
        for node, parent in zip(self.ids.tolist(), self.parents.tolist()):
            children.setdefault(parent, []).append(node)
        return children

    @cached_property
    def _newest_leaf(self) -> dict[int, int]:
        newest: dict[int, int] = {}
        for node in sorted(self.ids.tolist(), reverse=True):  # a child is made after its parent
            below = self._children.get(node)
            newest[node] = max(newest[c] for c in below) if below else node
        return newest

    def index(self, node: int) -> int:
        return self._rows[node]

    def parent(self, node: int) -> int:
        return int(self.parents[self._rows[node]])

    def children(self, node: int) -> list[int]:
        return list(self._children.get(node, []))

    def leaves(self) -> list[int]:
        """Every branch's last node, in the order the nodes were made."""
        return [n for n in self.ids.tolist() if n not in self._children]

    def path_to(self, node: int) -> list[int]:
        """The ids from the prefill down to ``node`` (empty for ROOT)."""
        out = []
        while node != ROOT:
            out.append(node)
            node = self.parent(node)
        return out[::-1]

    def leaf_of(self, node: int) -> int:
        """The branch ``node`` lies on: its newest descendant leaf (``node`` itself when a leaf)."""
        return self._newest_leaf.get(node, node)

    def split(self, a: int, b: int) -> int:
        """The last node the paths to ``a`` and ``b`` share (ROOT when they differ from the prefill on)."""
        shared = ROOT
        for x, y in zip(self.path_to(a), self.path_to(b)):
            if x != y:
                break
            shared = x
        return shared


class BranchTree:
    """The nodes of one prompt's session (see the module docstring). Not thread-safe: its session's."""

    def __init__(self, budget_bytes: int = BRANCH_BUDGET_BYTES):
        self.budget_bytes = int(budget_bytes)
        self.clear()

    def clear(self) -> None:
        """Drop every node. Ids are not reused: a request naming a node of the old tree (sent before
        a Reset reached the window) names no node of the new one."""
        self._record: dict[int, StepRecord] = {}
        self._parent: dict[int, int] = {}
        self._children: dict[int, dict[int, int]] = {ROOT: {}}  # node -> {chosen token: child}
        self._piece: dict[int, str] = {}
        self._logprob: dict[int, float] = {}
        self._visited: dict[int, int] = {}  # node -> clock of the last time it was on the current path
        self._clock = 0
        self._next = getattr(self, "_next", 0)
        self.dropped = 0
        self._counted = 0  # bytes of every node's arrays, shared ones counted twice: a bound that is cheap to keep

    def __len__(self) -> int:
        return len(self._record)

    def __contains__(self, node: int) -> bool:
        return node in self._record

    # ------------------------------------------------------------- changing
    def put(self, parent: int, record: StepRecord, piece: str = "") -> int:
        """The node under ``parent`` that takes ``record.chosen``, now holding ``record``: the existing
        one (its branch below is kept; a re-run of the same step replaces its record) or a new one."""
        if parent != ROOT and parent not in self._record:
            raise KeyError(f"no node {parent}")
        siblings = self._children[parent]
        node = siblings.get(int(record.chosen))
        if node is None:
            node, self._next = self._next, self._next + 1
            siblings[int(record.chosen)] = node
            self._parent[node] = parent
            self._children[node] = {}
        else:
            self._counted -= self._record[node].nbytes
        self._counted += record.nbytes
        self._record[node] = record
        self._piece[node] = piece
        self._logprob[node] = model_logprob(record.logits, int(record.chosen))
        return node

    def visit(self, path: list[int]) -> None:
        """Mark the nodes of ``path`` (the current branch) as just seen."""
        self._clock += 1
        for node in path:
            self._visited[node] = self._clock

    def prune(self, keep: list[int]) -> int:
        """Drop whole branches, the one visited longest ago first, until the nodes off ``keep`` (the
        current path) hold at most ``budget_bytes``; returns how many nodes were dropped."""
        if self._counted <= self.budget_bytes:  # even counting shared arrays twice, all of it fits
            return 0
        protected = set(keep)
        spare = self.nbytes(exclude=protected)
        dropped = 0
        while spare > self.budget_bytes:
            leaves = [n for n in self._record if not self._children[n] and n not in protected]
            if not leaves:
                break
            node = min(leaves, key=lambda n: (self._visited.get(n, 0), n))
            while node != ROOT and node not in protected and not self._children[node]:
                parent = self._parent[node]
                spare -= self._own_nbytes(node)
                self._remove(node)
                dropped += 1
                node = parent
        self.dropped += dropped
        return dropped

    def _remove(self, node: int) -> None:
        parent = self._parent.pop(node)
        record = self._record.pop(node)
        self._counted -= record.nbytes
        token = int(record.chosen)
        del self._children[parent][token], self._children[node], self._piece[node], self._logprob[node]
        self._visited.pop(node, None)

    # -------------------------------------------------------------- reading
    def record(self, node: int) -> StepRecord:
        return self._record[node]

    def parent(self, node: int) -> int:
        return self._parent[node]

    def children(self, node: int) -> list[int]:
        return list(self._children[node].values())

    def path(self, node: int) -> list[int]:
        """The node ids from the prefill down to ``node`` (empty for ROOT)."""
        out = []
        while node != ROOT:
            out.append(node)
            node = self._parent[node]
        return out[::-1]

    def nodes(self) -> list[int]:
        return sorted(self._record)

    def nbytes(self, exclude: set[int] = frozenset()) -> int:
        """Bytes of arrays held by the nodes not in ``exclude``, each array counted once (siblings share
        their forward pass's arrays)."""
        seen: dict[int, int] = {}
        for node, record in self._record.items():
            if node not in exclude:
                for a in _arrays(record):
                    seen[id(a)] = a.nbytes
        if exclude:  # arrays also held by a kept node cost nothing extra
            for node in exclude:
                if node in self._record:
                    for a in _arrays(self._record[node]):
                        seen.pop(id(a), None)
        return sum(seen.values())

    def _own_nbytes(self, node: int) -> int:
        """Bytes dropping ``node`` frees: its arrays that no sibling shares."""
        shared = {id(a) for s in self._children[self._parent[node]].values() if s != node for a in _arrays(self._record[s])}
        return sum(a.nbytes for a in _arrays(self._record[node]) if id(a) not in shared)

    def table(self, current: int) -> BranchTable:
        ids = self.nodes()
        return BranchTable(
            ids=np.array(ids, dtype=np.int64),
            parents=np.array([self._parent[n] for n in ids], dtype=np.int64),
            steps=np.array([self._record[n].step for n in ids], dtype=np.int64),
            tokens=np.array([self._record[n].chosen for n in ids], dtype=np.int64),
            logprobs=np.array([self._logprob[n] for n in ids], dtype=np.float64),
            chosen_by=tuple(self._record[n].chosen_by for n in ids),
            pieces=tuple(self._piece[n] for n in ids),
            current=current,
            path=tuple(self.path(current)),
            dropped=self.dropped,
        )


def _arrays(record: StepRecord) -> list[np.ndarray]:
    arrays = [getattr(record, f.name) for f in fields(record)] + [getattr(record.kv, f.name) for f in fields(record.kv)]
    return [a for a in arrays if isinstance(a, np.ndarray)]
