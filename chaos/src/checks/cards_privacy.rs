//! cards_privacy: every gamer card a player read shows what the model of the contract allows
//! that viewer while the call was under way (chaos-plan v1.2):
//!
//! - the viewer's own card is there, its relation `self` (full or limited: the contract
//!   does not say whether one's own privacy hides one's card from oneself);
//! - `missing` only when the card's account may have blocked the viewer (or is no account
//!   of the run), and nothing else while it surely had;
//! - full only when the account may have been public, or friends-only while they may have
//!   been friends; limited only when it may have been private, or not surely public while
//!   they were not surely friends;
//! - the relation only one that may have held (`friend`, `incoming`, `outgoing`), `none`
//!   only when none surely held, and never another than `friend` while they surely were.
//!
//! A card is judged over its call, from the send to the answer: a write in flight with it
//! may have landed on either side, so only a card no moment of the call allows fails.

use std::collections::{BTreeMap, HashSet};

use super::fault_table::fmt_num;
use super::model::{Model, Relation};
use super::{some, CheckResult, Quantity};
use crate::events::{CardRelation, CardSeen, CardView, History, PlayerFact, Privacy};

pub const NAME: &str = "cards_privacy";

/// What the model allows one card read by `viewer` during `[from, until]`.
struct Viewing<'a> {
    model: &'a Model,
    viewer: u64,
    from: f64,
    until: f64,
}

impl Viewing<'_> {
    fn may(&self, relation: Relation) -> bool {
        self.model.may_hold(&relation, self.from, self.until)
    }

    fn sure(&self, relation: Relation) -> bool {
        self.model.surely_held(&relation, self.from, self.until)
    }

    /// Why the card of `id` may not look as it does, if it may not.
    fn wrong(&self, card: &CardSeen, known: bool) -> Option<&'static str> {
        let (v, CardSeen(id, view, relation)) = (self.viewer, *card);
        let x = id.0;
        if x == v {
            return (view == CardView::Missing || relation != Some(CardRelation::Me))
                .then_some("own card missing or not self");
        }
        if view == CardView::Missing {
            return (known && !self.may(Relation::Blocked(x, v)))
                .then_some("missing without a block");
        }
        if self.sure(Relation::Blocked(x, v)) {
            return Some("shown through a block");
        }
        let friends = Relation::friends(v, x);
        let shape_allowed = match view {
            CardView::Full => {
                self.may(Relation::Privacy(x, Privacy::Public))
                    || (!self.sure(Relation::Privacy(x, Privacy::Private))
                        && self.may(friends.clone()))
            }
            _ => {
                self.may(Relation::Privacy(x, Privacy::Private))
                    || (!self.sure(Relation::Privacy(x, Privacy::Public))
                        && !self.sure(friends.clone()))
            }
        };
        if !shape_allowed {
            return Some(if view == CardView::Full {
                "full beyond its privacy"
            } else {
                "limited within its privacy"
            });
        }
        let relation_allowed = match relation {
            Some(CardRelation::Friend) => self.may(friends),
            Some(CardRelation::Incoming) => {
                self.may(Relation::Request(x, v)) && !self.sure(friends)
            }
            Some(CardRelation::Outgoing) => {
                self.may(Relation::Request(v, x)) && !self.sure(friends)
            }
            Some(CardRelation::None) => {
                !self.sure(friends)
                    && !self.sure(Relation::Request(x, v))
                    && !self.sure(Relation::Request(v, x))
            }
            Some(CardRelation::Me) | None => false,
        };
        (!relation_allowed).then_some("wrong relation")
    }
}

fn view_name(view: CardView) -> &'static str {
    match view {
        CardView::Full => "full",
        CardView::Limited => "limited",
        CardView::Missing => "missing",
    }
}

pub fn check(history: &History, model: &Model, limit: u64) -> CheckResult {
    // The run's accounts: a card of any other id is rightly missing.
    let known: HashSet<u64> = history
        .facts()
        .filter(|(_, _, fact)| matches!(fact, PlayerFact::Welcome { .. } | PlayerFact::Write(_)))
        .map(|(_, account, _)| account)
        .collect();
    let (mut reads, mut by_view) = (0u64, BTreeMap::<&str, u64>::new());
    let mut wrong = Vec::new();
    for (t, account, fact) in history.facts() {
        let PlayerFact::CardsRead { sent, cards } = fact else {
            continue;
        };
        reads += 1;
        let viewing = Viewing {
            model,
            viewer: account,
            from: *sent,
            until: t,
        };
        for card in cards {
            *by_view.entry(view_name(card.1)).or_default() += 1;
            if let Some(why) = viewing.wrong(card, known.contains(&card.0 .0)) {
                wrong.push(format!(
                    "{} card of {} to {account} at {}s: {why}",
                    view_name(card.1),
                    card.0,
                    fmt_num(t)
                ));
            }
        }
    }
    if reads == 0 {
        return CheckResult::not_applicable(
            NAME,
            Quantity::Count(limit),
            "no gamer card was read: nothing to judge",
        );
    }
    let views = by_view
        .iter()
        .map(|(view, n)| format!("{n} {view}"))
        .collect::<Vec<_>>()
        .join(", ");
    let mut detail = format!("{reads} card reads judged against the model ({views})");
    if !wrong.is_empty() {
        detail.push_str(&format!(
            "; {} not allowed: {}",
            wrong.len(),
            some(&wrong, 4)
        ));
    }
    CheckResult::count(NAME, limit, wrong.len() as u64, detail)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::testing::*;
    use crate::checks::Verdict;
    use crate::events::{WriteOp, WriteOutcome};
    use CardRelation as R;
    use CardView as V;

    fn judge(events: Vec<At>) -> CheckResult {
        let (history, model) = with_model(events);
        check(&history, &model, 0)
    }

    fn verdict(events: Vec<At>) -> Verdict {
        judge(events).result
    }

    /// 1 and 2 are friends from 1 s; 3 is a stranger to both.
    fn base() -> Vec<At> {
        vec![
            welcome(0.1, 1, 1, "node-1"),
            welcome(0.1, 2, 2, "node-1"),
            welcome(0.1, 3, 3, "node-1"),
            befriend(1.0, 1, 2),
        ]
    }

    fn with(mut events: Vec<At>, more: Vec<At>) -> Vec<At> {
        events.extend(more);
        events
    }

    #[test]
    fn default_privacy_shows_friends_in_full_and_strangers_limited() {
        let right = with(
            base(),
            vec![cards_read(
                5.0,
                1,
                &[
                    (1, V::Full, Some(R::Me)),
                    (2, V::Full, Some(R::Friend)),
                    (3, V::Limited, Some(R::None)),
                ],
            )],
        );
        let result = judge(right);
        assert_eq!(result.result, Verdict::Pass, "{}", result.detail);
        assert!(result.detail.contains("1 card reads"), "{}", result.detail);
        assert!(
            result.detail.contains("2 full, 1 limited"),
            "{}",
            result.detail
        );
        // A stranger in full, a friend limited, one's own card missing or not `self`: each
        // wrong.
        for card in [
            (3, V::Full, Some(R::None)),
            (2, V::Limited, Some(R::Friend)),
            (1, V::Missing, None),
            (1, V::Full, Some(R::Friend)),
            (2, V::Full, Some(R::None)),
            (3, V::Limited, Some(R::Friend)),
            (3, V::Missing, None),
        ] {
            let result = judge(with(base(), vec![cards_read(5.0, 1, &[card])]));
            assert_eq!(result.result, Verdict::Fail, "{card:?}: {}", result.detail);
        }
        // An id that is no account of the run is rightly missing.
        assert_eq!(
            verdict(with(
                base(),
                vec![cards_read(5.0, 1, &[(99, V::Missing, None)])]
            )),
            Verdict::Pass
        );
    }

    #[test]
    fn privacy_follows_its_writes_and_a_call_in_flight_with_one_may_see_either() {
        let private = with(base(), vec![set_privacy(3.0, 2, Privacy::Private)]);
        assert_eq!(
            verdict(with(
                private.clone(),
                vec![cards_read(5.0, 1, &[(2, V::Limited, Some(R::Friend))])]
            )),
            Verdict::Pass
        );
        assert_eq!(
            verdict(with(
                private.clone(),
                vec![cards_read(5.0, 1, &[(2, V::Full, Some(R::Friend))])]
            )),
            Verdict::Fail
        );
        // Sent before the change was answered: either shape is right.
        assert_eq!(
            verdict(with(
                private,
                vec![cards_read(3.0, 1, &[(2, V::Full, Some(R::Friend))])]
            )),
            Verdict::Pass
        );
        let public = with(base(), vec![set_privacy(3.0, 3, Privacy::Public)]);
        assert_eq!(
            verdict(with(
                public.clone(),
                vec![cards_read(5.0, 1, &[(3, V::Full, Some(R::None))])]
            )),
            Verdict::Pass
        );
        assert_eq!(
            verdict(with(
                public.clone(),
                vec![cards_read(5.0, 1, &[(3, V::Limited, Some(R::None))])]
            )),
            Verdict::Fail
        );
        // Back to friends-only: a stranger sees it limited again.
        let back = with(public, vec![set_privacy(6.0, 3, Privacy::Friends)]);
        assert_eq!(
            verdict(with(
                back,
                vec![cards_read(8.0, 1, &[(3, V::Full, Some(R::None))])]
            )),
            Verdict::Fail
        );
    }

    #[test]
    fn a_block_hides_the_blockers_card_and_only_while_it_stands() {
        let blocked = with(
            base(),
            vec![
                friend(3.0, WriteOp::Block, 2, 1, WriteOutcome::Ok),
                friend(9.0, WriteOp::Unblock, 2, 1, WriteOutcome::Ok),
            ],
        );
        // 2 blocked 1: its card is missing to 1, and the friendship is gone.
        assert_eq!(
            verdict(with(
                blocked.clone(),
                vec![cards_read(5.0, 1, &[(2, V::Missing, None)])]
            )),
            Verdict::Pass
        );
        for card in [
            (2, V::Limited, Some(R::None)),
            (2, V::Full, Some(R::Friend)),
        ] {
            let result = judge(with(blocked.clone(), vec![cards_read(5.0, 1, &[card])]));
            assert_eq!(result.result, Verdict::Fail, "{card:?}: {}", result.detail);
        }
        // The blocker still sees the blocked account's card (limited: no longer friends).
        assert_eq!(
            verdict(with(
                blocked.clone(),
                vec![cards_read(5.0, 2, &[(1, V::Limited, Some(R::None))])]
            )),
            Verdict::Pass
        );
        // After the unblock, missing is wrong.
        assert_eq!(
            verdict(with(
                blocked,
                vec![cards_read(12.0, 1, &[(2, V::Missing, None)])]
            )),
            Verdict::Fail
        );
    }

    #[test]
    fn a_request_shows_as_incoming_and_outgoing() {
        let asked = with(
            base(),
            vec![friend(3.0, WriteOp::FriendRequest, 1, 3, WriteOutcome::Ok)],
        );
        let right = with(
            asked.clone(),
            vec![
                cards_read(5.0, 1, &[(3, V::Limited, Some(R::Outgoing))]),
                cards_read(5.0, 3, &[(1, V::Limited, Some(R::Incoming))]),
            ],
        );
        assert_eq!(verdict(right), Verdict::Pass);
        assert_eq!(
            verdict(with(
                asked.clone(),
                vec![cards_read(5.0, 1, &[(3, V::Limited, Some(R::None))])]
            )),
            Verdict::Fail
        );
        assert_eq!(
            verdict(with(
                asked,
                vec![cards_read(5.0, 1, &[(3, V::Limited, Some(R::Incoming))])]
            )),
            Verdict::Fail
        );
    }

    #[test]
    fn no_reads_is_nothing_to_judge() {
        let result = judge(base());
        assert_eq!(result.result, Verdict::Pass);
        assert!(result.detail.contains("nothing to judge"));
    }
}
