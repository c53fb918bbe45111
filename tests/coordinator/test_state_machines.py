"""The group and transaction state machines move only along their tables (Kafka's
validPreviousStates); every other move raises IllegalStateTransition."""

from __future__ import annotations

import itertools

import pytest

from samsa.coordinator.group import GROUP_TRANSITIONS, Group, GroupState
from samsa.coordinator.state_machine import IllegalStateTransition, check_transition
from samsa.coordinator.txn_coordinator import TXN_TRANSITIONS, TxnState

G = GroupState
T = TxnState


@pytest.mark.parametrize(("old", "new"), list(itertools.product(G, G)),
                         ids=lambda s: s.name)
def test_group_moves_only_along_the_table(old: GroupState, new: GroupState) -> None:
    group = Group("g")
    group.restore(old, 1)
    if old in GROUP_TRANSITIONS[new]:
        group.transition(new, 2)
        assert (group.state, group.state_timestamp) == (new, 2)
    else:
        with pytest.raises(IllegalStateTransition, match=f"{old.name} -> {new.name}"):
            group.transition(new, 2)
        assert (group.state, group.state_timestamp) == (old, 1)


def test_group_table_is_kafkas() -> None:
    allowed = {(o, n) for n, olds in GROUP_TRANSITIONS.items() for o in olds}
    assert (G.EMPTY, G.PREPARING_REBALANCE) in allowed
    assert (G.PREPARING_REBALANCE, G.COMPLETING_REBALANCE) in allowed
    assert (G.COMPLETING_REBALANCE, G.STABLE) in allowed
    assert (G.STABLE, G.PREPARING_REBALANCE) in allowed
    assert (G.PREPARING_REBALANCE, G.EMPTY) in allowed
    assert all((s, G.DEAD) in allowed for s in G)
    for illegal in [(G.EMPTY, G.STABLE), (G.STABLE, G.EMPTY), (G.EMPTY, G.COMPLETING_REBALANCE),
                    (G.PREPARING_REBALANCE, G.STABLE), (G.DEAD, G.EMPTY),
                    (G.STABLE, G.COMPLETING_REBALANCE)]:
        assert illegal not in allowed, illegal


@pytest.mark.parametrize(("old", "new"), list(itertools.product(T, T)),
                         ids=lambda s: s.name)
def test_transaction_moves_only_along_the_table(old: TxnState, new: TxnState) -> None:
    if old in TXN_TRANSITIONS[new]:
        check_transition("t", TXN_TRANSITIONS, old, new)
    else:
        with pytest.raises(IllegalStateTransition):
            check_transition("t", TXN_TRANSITIONS, old, new)


def test_transaction_table_is_kafkas() -> None:
    allowed = {(o, n) for n, olds in TXN_TRANSITIONS.items() for o in olds}
    for legal in [(T.EMPTY, T.ONGOING), (T.ONGOING, T.ONGOING), (T.ONGOING, T.PREPARE_COMMIT),
                  (T.ONGOING, T.PREPARE_ABORT), (T.PREPARE_COMMIT, T.COMPLETE_COMMIT),
                  (T.PREPARE_ABORT, T.COMPLETE_ABORT), (T.COMPLETE_COMMIT, T.ONGOING),
                  (T.COMPLETE_ABORT, T.EMPTY), (T.ONGOING, T.PREPARE_EPOCH_FENCE),
                  (T.COMPLETE_COMMIT, T.DEAD)]:
        assert legal in allowed, legal
    for illegal in [(T.EMPTY, T.PREPARE_COMMIT), (T.PREPARE_COMMIT, T.COMPLETE_ABORT),
                    (T.PREPARE_ABORT, T.COMPLETE_COMMIT), (T.ONGOING, T.COMPLETE_COMMIT),
                    (T.ONGOING, T.EMPTY), (T.PREPARE_COMMIT, T.ONGOING), (T.ONGOING, T.DEAD),
                    (T.DEAD, T.EMPTY)]:
        assert illegal not in allowed, illegal
