//! `GET /v1/cards?ids=...`: gamer cards, one per id asked, in the order asked.

use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use serde::Serialize;

use crate::error::{ApiError, ApiResult};
use crate::extract::Auth;
use crate::state::AppState;
use crate::store::Card;

/// The most ids one call may ask for (duplicates count).
pub const MAX_IDS: usize = 100;

/// Why an `ids` list was refused.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum IdsError {
    #[error("the query needs one ids=1,2,3 parameter")]
    Missing,
    #[error("ids is given more than once")]
    Repeated,
    #[error("ids is empty")]
    Empty,
    #[error("at most {MAX_IDS} ids per call")]
    TooMany,
    /// 1-based position of the bad item, so its text is not echoed back.
    #[error("item {0} of ids is not an id (a positive integer)")]
    NotAnId(usize),
}

impl From<IdsError> for ApiError {
    fn from(e: IdsError) -> Self {
        match e {
            IdsError::TooMany => {
                ApiError::rule(StatusCode::BAD_REQUEST, "too_many_ids", e.to_string())
            }
            e => ApiError::BadRequest(e.to_string()),
        }
    }
}

/// The ids of `?ids=1,2,3` in the order given, duplicates kept. Read from the raw
/// query so that every malformed list gets the contract's error; other
/// parameters are ignored.
pub fn parse_ids(query: Option<&str>) -> Result<Vec<i64>, IdsError> {
    let mut lists = form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .filter(|(key, _)| key == "ids")
        .map(|(_, value)| value);
    let list = lists.next().ok_or(IdsError::Missing)?;
    if lists.next().is_some() {
        return Err(IdsError::Repeated);
    }
    if list.is_empty() {
        return Err(IdsError::Empty);
    }
    // Stop splitting one past the limit: a huge list costs no more than that.
    let items: Vec<&str> = list.split(',').take(MAX_IDS + 1).collect();
    if items.len() > MAX_IDS {
        return Err(IdsError::TooMany);
    }
    items
        .iter()
        .enumerate()
        .map(|(i, item)| parse_item(item).ok_or(IdsError::NotAnId(i + 1)))
        .collect()
}

/// Digits only (no sign, no spaces), positive, within i64.
fn parse_item(item: &str) -> Option<i64> {
    if item.is_empty() || !item.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    item.parse::<i64>().ok().filter(|&id| id > 0)
}

#[derive(Serialize)]
pub struct Cards {
    cards: Vec<Card>,
}

pub async fn get(
    State(state): State<AppState>,
    auth: Auth,
    RawQuery(query): RawQuery,
) -> ApiResult<axum::Json<Cards>> {
    let ids = parse_ids(query.as_deref())?;
    let cards = state.store.cards(auth.account_id, &ids).await?;
    Ok(axum::Json(Cards { cards }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_keep_their_order_and_duplicates() {
        assert_eq!(parse_ids(Some("ids=3,1,3")), Ok(vec![3, 1, 3]));
        assert_eq!(parse_ids(Some("x=1&ids=7&y=")), Ok(vec![7]));
    }

    #[test]
    fn percent_encoded_commas_are_commas() {
        assert_eq!(parse_ids(Some("ids=1%2C2")), Ok(vec![1, 2]));
    }

    #[test]
    fn a_missing_or_empty_list_is_refused() {
        assert_eq!(parse_ids(None), Err(IdsError::Missing));
        assert_eq!(parse_ids(Some("")), Err(IdsError::Missing));
        assert_eq!(parse_ids(Some("idz=1")), Err(IdsError::Missing));
        assert_eq!(parse_ids(Some("ids=")), Err(IdsError::Empty));
        assert_eq!(parse_ids(Some("ids")), Err(IdsError::Empty));
        assert_eq!(parse_ids(Some("ids=1&ids=2")), Err(IdsError::Repeated));
    }

    #[test]
    fn items_are_positive_integers() {
        for bad in [
            "ids=1,,2",
            "ids=1,",
            "ids=a",
            "ids=0",
            "ids=-4",
            "ids=+4",
            "ids=%201",
            "ids=1.5",
            "ids=99999999999999999999",
        ] {
            assert!(
                matches!(parse_ids(Some(bad)), Err(IdsError::NotAnId(_))),
                "{bad}"
            );
        }
        assert_eq!(parse_ids(Some("ids=5,x")), Err(IdsError::NotAnId(2)));
    }

    #[test]
    fn one_hundred_ids_pass_and_more_do_not() {
        let list = |n: usize| (1..=n).map(|i| i.to_string()).collect::<Vec<_>>().join(",");
        assert_eq!(
            parse_ids(Some(&format!("ids={}", list(100)))).map(|v| v.len()),
            Ok(100)
        );
        assert_eq!(
            parse_ids(Some(&format!("ids={}", list(101)))),
            Err(IdsError::TooMany)
        );
        assert_eq!(
            parse_ids(Some(&format!("ids={},x", list(100)))),
            Err(IdsError::TooMany)
        );
    }

    #[test]
    fn errors_speak_the_contract() {
        assert_eq!(ApiError::from(IdsError::TooMany).code(), "too_many_ids");
        assert_eq!(
            ApiError::from(IdsError::TooMany).status(),
            StatusCode::BAD_REQUEST
        );
        assert_eq!(ApiError::from(IdsError::Empty).code(), "bad_request");
    }
}
