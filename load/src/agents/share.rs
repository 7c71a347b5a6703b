//! Each agent's share of a run: a range of the run's players (sizes differing by at most one)
//! and its part of every rate. A rate-driven scenario's operations are split as a count, so
//! the agents together play exactly as many as the whole run would; each agent's rate is its
//! count over the scenario's window.

use std::ops::Range;
use std::time::Duration;

use crate::error::LoadError;
use crate::schedule::Plan;
use crate::settings::Settings;

/// `total` split into `parts` counts that differ by at most one and sum to `total`.
pub fn split_count(total: u64, parts: usize) -> Vec<u64> {
    let parts_u64 = parts as u64;
    let (base, extra) = (total / parts_u64, total % parts_u64);
    (0..parts_u64)
        .map(|i| base + u64::from(i < extra))
        .collect()
}

/// The run's players split into `parts` consecutive ranges.
pub fn player_ranges(players: usize, parts: usize) -> Vec<Range<usize>> {
    let mut first = 0;
    split_count(players as u64, parts)
        .into_iter()
        .map(|count| {
            let range = first..first + count as usize;
            first = range.end;
            range
        })
        .collect()
}

/// The per-share rates of `rate` over `duration`: each share's count of operations per second.
fn split_rate(rate: f64, duration: Duration, parts: usize) -> Vec<f64> {
    let total = Plan::for_duration(rate, duration, 1).count;
    split_count(total, parts)
        .into_iter()
        .map(|count| count as f64 / duration.as_secs_f64())
        .collect()
}

/// The settings of each of `agents` shares of `settings`, each one valid on its own.
pub fn shares(settings: &Settings, agents: usize) -> Result<Vec<Settings>, LoadError> {
    let ranges = player_ranges(settings.players, agents);
    let presence = split_rate(settings.presence.rate, settings.presence.duration, agents);
    let sessions = split_rate(settings.sessions.rate, settings.sessions.duration, agents);
    let cards = split_rate(settings.cards.rate, settings.cards.duration, agents);
    // The provoking traffic rides beside the presence changes, for as long.
    let traffic = settings.presence.duration;
    let friend_rate = split_rate(settings.traffic.friend_rate, traffic, agents);
    let churn_rate = split_rate(settings.traffic.churn_rate, traffic, agents);
    let block_rate = split_rate(settings.traffic.block_rate, traffic, agents);
    let privacy_rate = split_rate(settings.traffic.privacy_rate, traffic, agents);
    let logout_rate = split_rate(settings.traffic.logout_rate, traffic, agents);
    let in_flight = split_count(settings.max_in_flight as u64, agents);
    let mut shares = Vec::with_capacity(agents);
    for (i, players) in ranges.into_iter().enumerate() {
        let mut share = settings.draft();
        share.first_player = players.start;
        share.players = players.len();
        // The returning players are the run's first ones.
        share.returning = settings
            .returning
            .saturating_sub(players.start)
            .min(players.len());
        share.rate = settings.rate * players.len() as f64 / settings.players as f64;
        share.presence.rate = presence[i];
        share.sessions.rate = sessions[i];
        share.cards.rate = cards[i];
        share.traffic.friend_rate = friend_rate[i];
        share.traffic.churn_rate = churn_rate[i];
        share.traffic.block_rate = block_rate[i];
        share.traffic.privacy_rate = privacy_rate[i];
        share.traffic.logout_rate = logout_rate[i];
        share.max_in_flight = in_flight[i].max(1) as usize;
        share.source_ips = None;
        share.json = None;
        let share = share.validate().map_err(|e| {
            LoadError::Refused(format!(
                "agent {} of {agents} plays players {}..{}: {e}",
                i + 1,
                players.start,
                players.end
            ))
        })?;
        shares.push(share);
    }
    Ok(shares)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Args;
    use clap::Parser;

    fn settings(flags: &[&str]) -> Settings {
        let argv = [
            "anyplay-load",
            "--scenarios",
            "presence,sessions,cards,storm",
        ];
        Settings::from_args(Args::parse_from(argv.iter().chain(flags))).expect("valid")
    }

    fn ops(rate: f64, duration: Duration) -> u64 {
        Plan::for_duration(rate, duration, 1).count
    }

    #[test]
    fn player_ranges_cover_the_run_once_and_differ_by_at_most_one() {
        let ranges = player_ranges(100, 3);
        assert_eq!(ranges, [0..34, 34..67, 67..100]);
        assert_eq!(player_ranges(6, 3), [0..2, 2..4, 4..6]);
        assert_eq!(split_count(7, 7), [1; 7]);
    }

    #[test]
    fn shares_play_exactly_the_operations_of_the_whole_run() {
        let s = settings(&[
            "--players",
            "101",
            "--returning",
            "40",
            "--presence-rate",
            "37",
            "--session-rate",
            "5",
            "--cards-rate",
            "13.5",
            "--cards-seconds",
            "3",
            "--friend-rate",
            "7",
            "--churn-rate",
            "2",
            "--max-in-flight",
            "100",
        ]);
        let shares = shares(&s, 3).expect("valid shares");
        let sum = |f: &dyn Fn(&Settings) -> u64| shares.iter().map(f).sum::<u64>();
        assert_eq!(sum(&|x| x.players as u64), 101);
        assert_eq!(sum(&|x| x.returning as u64), 40);
        assert_eq!(sum(&|x| x.max_in_flight as u64), 100);
        assert_eq!(
            shares.iter().map(|x| x.first_player).collect::<Vec<_>>(),
            [0, 34, 68]
        );
        for (rate, window, total) in [
            (&|x: &Settings| x.presence.rate, s.presence.duration, 370),
            (&|x: &Settings| x.sessions.rate, s.sessions.duration, 50),
            (&|x: &Settings| x.cards.rate, s.cards.duration, 41),
            (
                &|x: &Settings| x.traffic.friend_rate,
                s.presence.duration,
                70,
            ),
            (
                &|x: &Settings| x.traffic.churn_rate,
                s.presence.duration,
                20,
            ),
        ] as [(&dyn Fn(&Settings) -> f64, Duration, u64); 5]
        {
            let counts: Vec<u64> = shares.iter().map(|x| ops(rate(x), window)).collect();
            assert_eq!(counts.iter().sum::<u64>(), total, "{counts:?}");
            assert!(counts.iter().max().unwrap() - counts.iter().min().unwrap() <= 1);
        }
        // The login wave lasts as long on every agent as in the whole run.
        let login: f64 = shares.iter().map(|x| x.rate).sum();
        assert!((login - s.rate).abs() < 1e-9, "{login}");
    }

    #[test]
    fn a_share_too_small_for_its_settings_is_refused_with_the_agent() {
        let s = settings(&["--players", "30", "--friends", "10"]);
        let e = shares(&s, 3).expect_err("10 players cannot have 10 friends");
        assert!(e.to_string().contains("agent 1 of 3"), "{e}");
        let s = settings(&[
            "--players",
            "60",
            "--session-rate",
            "1",
            "--session-seconds",
            "2",
        ]);
        let e = shares(&s, 3).expect_err("2 sessions over 3 agents");
        assert!(e.to_string().contains("--session-rate"), "{e}");
    }
}
