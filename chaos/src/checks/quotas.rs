//! The friend limits of cloud-api against the model: whether a limit may have stood against
//! a write (a `limit_reached` is right only then), and whether the daily one surely did (an
//! ok request then is wrong). At most `max_friends` friends on either side of a new
//! friendship; at most `max_outgoing` open requests of the asker; and an account younger
//! than a day opens at most `daily_requests_new` requests a day. Every account of a run is
//! that young, since the run made its store; a request that met the other side's (answered
//! `friends`) opens none and counts none.

use std::collections::HashMap;

use super::model::{Model, Relation};
use crate::events::{FriendLimits, History, Write, WriteOp, WriteOutcome};

pub struct Quotas<'a> {
    limits: FriendLimits,
    model: &'a Model,
    /// Each account's requests that opened one or may have: when sent and answered, and
    /// whether surely (answered ok).
    opened: HashMap<u64, Vec<Opened>>,
}

struct Opened {
    sent: f64,
    answered: f64,
    surely: bool,
}

impl<'a> Quotas<'a> {
    /// `None` when the history does not say which limits the nodes held to.
    pub fn of(history: &History, model: &'a Model) -> Option<Quotas<'a>> {
        let limits = history.friend_limits()?;
        let mut opened: HashMap<u64, Vec<Opened>> = HashMap::new();
        for (t, w) in history.writes() {
            let surely = match w.outcome {
                WriteOutcome::Ok if !w.befriended => true,
                WriteOutcome::Unknown => false,
                _ => continue,
            };
            if w.op == WriteOp::FriendRequest {
                opened.entry(w.account).or_default().push(Opened {
                    sent: w.sent,
                    answered: t,
                    surely,
                });
            }
        }
        Some(Quotas {
            limits,
            model,
            opened,
        })
    }

    /// Whether some limit may have stood against `w`, a request or an accept answered at `t`.
    pub fn may_bind(&self, w: &Write, t: f64) -> bool {
        let Some(other) = w.other() else {
            return true;
        };
        let (me, sent) = (w.account, w.sent);
        let friends = |a: u64| {
            self.model
                .may_count(a, |b| Relation::friends(a, b), sent, t)
        };
        let full = |a: u64| friends(a) >= self.limits.max_friends as usize;
        if full(me) || full(other) {
            return true;
        }
        if w.op != WriteOp::FriendRequest {
            return false;
        }
        let outgoing = self
            .model
            .may_count(me, |b| Relation::Request(me, b), sent, t);
        outgoing >= self.limits.max_outgoing as usize
            || self.opened_before(me, t, false) >= self.limits.daily_requests_new as usize
    }

    /// Whether `w`, a request answered ok that opened one, came when the account had surely
    /// opened its day's requests already.
    pub fn surely_past_daily(&self, w: &Write) -> bool {
        w.op == WriteOp::FriendRequest
            && w.outcome == WriteOutcome::Ok
            && !w.befriended
            && self.opened_before(w.account, w.sent, true)
                >= self.limits.daily_requests_new as usize
    }

    /// How many requests `account` opened before `t`: surely (answered ok by then), or
    /// possibly (sent by then, ok or unknown).
    fn opened_before(&self, account: u64, t: f64, surely: bool) -> usize {
        self.opened.get(&account).map_or(0, |opened| {
            opened
                .iter()
                .filter(|o| {
                    if surely {
                        o.surely && o.answered < t
                    } else {
                        o.sent < t
                    }
                })
                .count()
        })
    }
}
