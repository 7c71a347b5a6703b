//! `mixed`: presence changes, sessions and gamer cards at once, each at its own rate for its
//! own duration, into one recorder: what players keep doing while `anyplay-chaos` runs its
//! timeline. (Not a `--scenarios` name of the binary; chaos calls it as a library.)

use crate::report::ScenarioReport;
use crate::scenarios::{cards, presence, sessions, Ctx};

/// The scenario's name in reports.
pub const NAME: &str = "mixed";

pub async fn run(ctx: &Ctx) -> ScenarioReport {
    let recorder = ctx.begin();
    let (presence, sessions, cards) = tokio::join!(
        presence::drive(ctx, &recorder),
        sessions::drive(ctx),
        cards::drive(ctx)
    );
    let mut report = ScenarioReport::new(NAME, &recorder.snapshot(), recorder.start().elapsed());
    report.skipped_saturated = [&presence, &sessions, &cards]
        .iter()
        .map(|d| d.outcome.skipped_saturated)
        .sum();
    report.delivery = presence.delivery;
    report
}
