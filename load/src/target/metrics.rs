//! What the nodes' `/metrics` say changed during a run: each node is scraped before and after,
//! and the series whose value moved are reported with the difference.

use std::collections::BTreeMap;

use crate::api::client::ClientError;
use crate::target::NodeEndpoint;

/// Series (name with labels) to value.
pub type Metrics = BTreeMap<String, f64>;

/// Parses Prometheus text: `name{labels} value [timestamp]`; comments and bad lines are skipped.
pub fn parse(text: &str) -> Metrics {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .filter_map(|line| {
            // Labels may hold spaces, so the series ends at the closing brace when there is one.
            let split = match line.rfind('}') {
                Some(brace) => brace + 1,
                None => line.find(char::is_whitespace)?,
            };
            let (series, rest) = line.split_at(split);
            let value = rest.split_whitespace().next()?.parse::<f64>().ok()?;
            Some((series.trim().to_string(), value))
        })
        .collect()
}

/// The series that moved between `before` and `after` (new series count from 0).
pub fn changes(before: &Metrics, after: &Metrics) -> Metrics {
    after
        .iter()
        .filter_map(|(series, value)| {
            let delta = value - before.get(series).copied().unwrap_or(0.0);
            (delta != 0.0 && delta.is_finite()).then(|| (series.clone(), delta))
        })
        .collect()
}

/// A scrape of every node that has an operations listener (`None` where it has none or failed).
pub async fn scrape_all(http: &reqwest::Client, nodes: &[NodeEndpoint]) -> Vec<Option<Metrics>> {
    let mut all = Vec::with_capacity(nodes.len());
    for node in nodes {
        let scraped = match node.metrics_url() {
            Some(url) => scrape(http, &url)
                .await
                .inspect_err(|e| tracing::warn!("scraping {url}: {e}"))
                .ok(),
            None => None,
        };
        all.push(scraped);
    }
    all
}

/// One node's metrics page, parsed.
pub async fn scrape(http: &reqwest::Client, url: &str) -> Result<Metrics, ClientError> {
    let resp = http.get(url).send().await.map_err(ClientError::NoAnswer)?;
    let status = resp.status().as_u16();
    if !resp.status().is_success() {
        return Err(ClientError::Unexpected {
            status,
            detail: "metrics page".into(),
        });
    }
    Ok(parse(&resp.text().await.map_err(ClientError::NoAnswer)?))
}

/// The report's `server` object: per node (`node-1`, ...), what changed.
pub fn report(before: &[Option<Metrics>], after: &[Option<Metrics>]) -> BTreeMap<String, Metrics> {
    before
        .iter()
        .zip(after)
        .enumerate()
        .filter_map(|(i, pair)| match pair {
            (Some(before), Some(after)) => {
                Some((format!("node-{}", i + 1), changes(before, after)))
            }
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEFORE: &str =
        "# HELP http_requests_total Requests.\n# TYPE http_requests_total counter\n\
        http_requests_total{route=\"/v1/friends\",status=\"200\"} 10\n\
        open_connections 5\n";
    const AFTER: &str = "http_requests_total{route=\"/v1/friends\",status=\"200\"} 25\n\
        http_requests_total{route=\"/v1/cards\",status=\"a b\"} 3 1700000000\n\
        open_connections 5\n";

    #[test]
    fn prometheus_text_parses_with_labels() {
        let m = parse(AFTER);
        assert_eq!(
            m["http_requests_total{route=\"/v1/cards\",status=\"a b\"}"],
            3.0
        );
        assert_eq!(m["open_connections"], 5.0);
        assert_eq!(parse(BEFORE).len(), 2);
    }

    #[test]
    fn only_series_that_moved_are_reported() {
        let c = changes(&parse(BEFORE), &parse(AFTER));
        assert_eq!(c.len(), 2);
        assert_eq!(
            c["http_requests_total{route=\"/v1/friends\",status=\"200\"}"],
            15.0
        );
        let nodes = report(
            &[Some(parse(BEFORE)), None],
            &[Some(parse(AFTER)), Some(parse(AFTER))],
        );
        assert_eq!(nodes.keys().collect::<Vec<_>>(), ["node-1"]);
    }
}
